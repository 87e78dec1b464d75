// Test helper: a certificate authority of a test's own, and certificates
// it signs, made at run time with the openssl command-line tool (Debian's
// openssl) in a temporary directory: EC P-256 keys, valid two days.
//
// Thread: each object belongs to one thread.
#ifndef DELAYQ_TESTS_SERVER_TEST_PKI_H_
#define DELAYQ_TESTS_SERVER_TEST_PKI_H_

#include <string>
#include <vector>

#include "temp_dir.h"

namespace delayq::testing {

class TestPki {
 public:
  // Makes the CA: ca.crt and ca.key. False with *error set otherwise.
  bool Init(std::string* error);
  // A certificate `name`.crt (and `name`.key) the CA signs, for both server
  // and client use, with the subjectAltName `san` ("IP:127.0.0.1,DNS:x";
  // empty: none).
  bool Issue(const std::string& name, const std::string& san, std::string* error);
  std::string Path(const std::string& file) const { return dir_.path() + "/" + file; }
  std::string ca() const { return Path("ca.crt"); }
  // redis-server's flags to serve TLS with certificate `name`, trusting
  // this CA for clients (and, in a cluster, for its peers).
  std::vector<std::string> RedisFlags(const std::string& name) const;

 private:
  bool Run(const std::string& script, std::string* error);
  TempDir dir_;
};

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_SERVER_TEST_PKI_H_
