#include "server/test_pki.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace delayq::testing {

bool TestPki::Run(const std::string& script, std::string* error) {
  const std::string log = Path("openssl.log");
  const std::string cmd = "cd '" + dir_.path() + "' && (" + script + ") >'" + log + "' 2>&1";
  if (std::system(cmd.c_str()) == 0) return true;
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  *error = "openssl failed: " + cmd + "\n" + text.str();
  return false;
}

bool TestPki::Init(std::string* error) {
  return Run(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
      "-keyout ca.key -out ca.crt -days 2 -subj '/CN=delayq test CA'",
      error);
}

bool TestPki::Issue(const std::string& name, const std::string& san, std::string* error) {
  std::string ext = "basicConstraints=CA:FALSE\\nextendedKeyUsage=serverAuth,clientAuth\\n";
  if (!san.empty()) ext += "subjectAltName=" + san + "\\n";
  return Run("printf '" + ext + "' >" + name +
                 ".ext && openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                 "-nodes -keyout " +
                 name + ".key -out " + name + ".csr -subj '/CN=" + name +
                 "' && openssl x509 -req -in " + name +
                 ".csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -sha256 -extfile " + name +
                 ".ext -out " + name + ".crt",
             error);
}

std::vector<std::string> TestPki::RedisFlags(const std::string& name) const {
  return {"--tls-cert-file",   Path(name + ".crt"),  "--tls-key-file",
          Path(name + ".key"), "--tls-ca-cert-file", ca()};
}

}  // namespace delayq::testing
