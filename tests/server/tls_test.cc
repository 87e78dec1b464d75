// TLS on the listeners (docs/security.md, "TLS"), against a real delayqd
// and real clients: `openssl s_client` speaking beanstalkd, `curl` speaking
// HTTPS, plaintext on the same ports, client certificates, a wrong CA, a
// reload on SIGHUP, a stalled handshake, --tls-required, and the starts
// that stop with a message. The CA and the certificates are made at test
// time with the `openssl` command-line tool in a temporary directory.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "server/server_process.h"

namespace delayq::testing {
namespace {

// Runs `command` with /bin/sh; returns its output (stdout and stderr) and
// sets *code to its exit code.
std::string Shell(const std::string& command, int* code = nullptr) {
  int st = -1;
  std::string out = RunShell(command + " 2>&1", &st);
  if (code != nullptr) *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

bool ToolsAvailable() {
  int a = 0, b = 0;
  Shell("openssl version", &a);
  Shell("curl --version", &b);
  return a == 0 && b == 0;
}

// A CA, a server certificate for 127.0.0.1 and localhost (serial 1001,
// CN delayq-server-1), a client certificate, and a second CA that signed
// neither; in dir.
bool MakeCertificates(const std::string& dir, std::string* out) {
  const std::string script = "set -e; cd '" + dir +
                             "'\n"
                             "ec='-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes'\n"
                             "openssl req -x509 $ec -keyout ca.key -out ca.pem -days 2 "
                             "-subj /CN=delayq-test-ca\n"
                             "openssl req -x509 $ec -keyout other-ca.key -out other-ca.pem -days 2 "
                             "-subj /CN=delayq-other-ca\n"
                             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext\n"
                             "printf 'extendedKeyUsage=clientAuth\\n' > client.ext\n"
                             "sign() { openssl req $ec -keyout $1.key -out $1.csr -subj /CN=$2; "
                             "openssl x509 -req -in $1.csr -CA ca.pem -CAkey ca.key -set_serial $3 "
                             "-days 2 -extfile $4 -out $1.pem; }\n"
                             "sign server delayq-server-1 1001 server.ext\n"
                             "sign server2 delayq-server-2 2002 server.ext\n"
                             "sign client delayq-client 3003 client.ext\n";
  int code = 0;
  *out = Shell("sh -c \"$(cat <<'SCRIPT'\n" + script + "SCRIPT\n)\"", &code);
  return code == 0;
}

class Tls : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ToolsAvailable()) GTEST_SKIP() << "openssl or curl missing";
    std::string out;
    ASSERT_TRUE(MakeCertificates(dir_.path(), &out)) << out;
  }

  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  // delayqd with TLS, on the HTTP port http_port_, and `extra` args.
  void StartServer(std::vector<std::string> extra = {}) {
    http_port_ = FreeLoopbackPort();
    std::vector<std::string> args = {"--in-memory",
                                     "--http-listen",
                                     "127.0.0.1",
                                     "--http-port",
                                     std::to_string(http_port_),
                                     "--tls-cert",
                                     Path("server.pem"),
                                     "--tls-key",
                                     Path("server.key")};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string error;
    ASSERT_TRUE(server_.Start(DelayqdPath(), args, &error)) << error;
  }

  // openssl s_client to the beanstalkd port, sending `input` (which should
  // end in quit, so that the server closes); its output and exit code.
  std::string SClient(const std::string& input, const std::string& options, int* code = nullptr) {
    std::ofstream(Path("input")) << input;
    return Shell("openssl s_client -connect 127.0.0.1:" + std::to_string(server_.port()) +
                     " -quiet -verify_return_error -verify_ip 127.0.0.1 " + options + " < '" +
                     Path("input") + "'",
                 code);
  }

  std::string Curl(const std::string& options, const std::string& path, int* code = nullptr) {
    return Shell("curl -sS --max-time 10 " + options +
                     " https://127.0.0.1:" + std::to_string(http_port_) + path,
                 code);
  }

  TempDir dir_;
  ServerProcess server_;
  uint16_t http_port_ = 0;
};

constexpr const char* kJobRoundTrip =
    "put 0 0 60 5\r\nhello\r\nreserve-with-timeout 0\r\ndelete 1\r\nquit\r\n";
constexpr const char* kJobRoundTripReplies = "INSERTED 1\r\nRESERVED 1 5\r\nhello\r\nDELETED\r\n";

TEST_F(Tls, BeanstalkdOverTls) {
  StartServer();
  int code = 0;
  std::string out = SClient(kJobRoundTrip, "-CAfile '" + Path("ca.pem") + "'", &code);
  EXPECT_NE(out.find(kJobRoundTripReplies), std::string::npos) << out;
  EXPECT_EQ(code, 0) << out;
}

TEST_F(Tls, HttpsStats) {
  StartServer();
  int code = 0;
  std::string out = Curl("--cacert '" + Path("ca.pem") + "'", "/stats", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"uptime_ms\""), std::string::npos) << out;
  // A job in and out over HTTPS.
  out = Curl("--cacert '" + Path("ca.pem") + "' -X POST -d '{\"body\":\"hi\"}'", "/topics/t/jobs",
             &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"id\""), std::string::npos) << out;
}

TEST_F(Tls, PlaintextStillWorksOnTheSamePorts) {
  StartServer();
  RawClient c(server_.port());
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.Call("put 0 0 60 5\r\nhello\r\n"), "INSERTED 1\r\n");
  EXPECT_EQ(c.Call("reserve-with-timeout 0\r\n"), "RESERVED 1 5\r\nhello\r\n");
  EXPECT_EQ(c.Call("delete 1\r\n"), "DELETED\r\n");
  int code = 0;
  std::string out = Shell(
      "curl -sS --max-time 10 http://127.0.0.1:" + std::to_string(http_port_) + "/stats", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"uptime_ms\""), std::string::npos) << out;
}

TEST_F(Tls, ClientCertificatesRequired) {
  StartServer({"--tls-client-ca", Path("ca.pem")});
  const std::string ca = "-CAfile '" + Path("ca.pem") + "'";
  const std::string with_cert =
      " -cert '" + Path("client.pem") + "' -key '" + Path("client.key") + "'";
  std::string out = SClient(kJobRoundTrip, ca + with_cert);
  EXPECT_NE(out.find(kJobRoundTripReplies), std::string::npos) << out;
  out = SClient(kJobRoundTrip, ca);
  EXPECT_EQ(out.find("INSERTED"), std::string::npos) << out;

  int code = 0;
  out = Curl("--cacert '" + Path("ca.pem") + "' --cert '" + Path("client.pem") + "' --key '" +
                 Path("client.key") + "'",
             "/stats", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"uptime_ms\""), std::string::npos) << out;
  out = Curl("--cacert '" + Path("ca.pem") + "'", "/stats", &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_EQ(out.find("\"uptime_ms\""), std::string::npos) << out;
  // A client certificate from another CA is refused too.
  out = Curl("--cacert '" + Path("ca.pem") + "' --cert '" + Path("other-ca.pem") + "' --key '" +
                 Path("other-ca.key") + "'",
             "/stats", &code);
  EXPECT_NE(code, 0) << out;
}

TEST_F(Tls, WrongCaFailsVerification) {
  StartServer();
  int code = 0;
  std::string out = SClient(kJobRoundTrip, "-CAfile '" + Path("other-ca.pem") + "'", &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_EQ(out.find("INSERTED"), std::string::npos) << out;
  out = Curl("--cacert '" + Path("other-ca.pem") + "'", "/stats", &code);
  EXPECT_NE(code, 0) << out;
}

TEST_F(Tls, ReloadOnSighupServesTheNewCertificate) {
  StartServer();
  const std::string ca = "-CAfile '" + Path("ca.pem") + "'";
  std::string out = SClient("quit\r\n", ca + " -no_ign_eof -showcerts");
  EXPECT_NE(out.find("delayq-server-1"), std::string::npos) << out;
  // A broken file: logged, the certificate in force stays.
  std::ofstream(Path("server.pem")) << "not a certificate\n";
  server_.Signal(SIGHUP);
  for (int i = 0; i < 100 && server_.Log().find("tls_reload_failed") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_NE(server_.Log().find("tls_reload_failed"), std::string::npos) << server_.Log();
  out = SClient(kJobRoundTrip, ca);
  EXPECT_NE(out.find(kJobRoundTripReplies), std::string::npos) << out;
  // The new certificate and key: served to new connections.
  ASSERT_EQ(std::rename(Path("server2.pem").c_str(), Path("server.pem").c_str()), 0);
  ASSERT_EQ(std::rename(Path("server2.key").c_str(), Path("server.key").c_str()), 0);
  server_.Signal(SIGHUP);
  for (int i = 0; i < 100 && server_.Log().find("tls_reloaded") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_NE(server_.Log().find("serial=07D2"), std::string::npos) << server_.Log();
  out = SClient("quit\r\n", ca + " -no_ign_eof -showcerts");
  EXPECT_NE(out.find("delayq-server-2"), std::string::npos) << out;
  out = Shell("openssl s_client -connect 127.0.0.1:" + std::to_string(http_port_) + " " + ca +
              " </dev/null 2>/dev/null | openssl x509 -noout -serial");
  EXPECT_NE(out.find("serial=07D2"), std::string::npos) << out;
}

TEST_F(Tls, StalledHandshakeIsClosed) {
  StartServer({"--tls-handshake-timeout", "500ms"});
  for (uint16_t port : {server_.port(), http_port_}) {
    RawClient c(port);
    ASSERT_TRUE(c.ok()) << c.error();
    ASSERT_TRUE(c.Send(std::string("\x16\x03\x01", 3)));  // a ClientHello begins, and stalls
    EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  }
  EXPECT_NE(server_.Log().find("tls_handshake_timeout"), std::string::npos) << server_.Log();
  // A handshake that is not TLS at all: closed, logged.
  RawClient bad(server_.port());
  ASSERT_TRUE(bad.Send(std::string("\x16garbage that is not a ClientHello\r\n")));
  EXPECT_TRUE(bad.WaitClosed(milliseconds(5000)));
}

TEST_F(Tls, RequiredRefusesPlaintextFromUntrustedNetworks) {
  // No network is trusted: loopback is as remote as any.
  StartServer({"--tls-required", "--trusted-networks", "none"});
  RawClient c(server_.port());
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_TRUE(c.Send("list-tubes\r\n"));
  std::string got;
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000), &got));
  EXPECT_EQ(got.rfind("TLS_REQUIRED ", 0), 0u) << got;
  int code = 0;
  std::string out = Shell("curl -sS --max-time 10 -w ' %{http_code}' http://127.0.0.1:" +
                              std::to_string(http_port_) + "/stats",
                          &code);
  EXPECT_NE(out.find("tls_required"), std::string::npos) << out;
  EXPECT_NE(out.find(" 403"), std::string::npos) << out;
  // Over TLS the client gets through (and, untrusted, must authenticate).
  out = SClient("list-tubes\r\nquit\r\n", "-CAfile '" + Path("ca.pem") + "'");
  EXPECT_NE(out.find("UNAUTHORIZED"), std::string::npos) << out;
}

TEST_F(Tls, BadSettingsStopTheStart) {
  const std::string delayqd = DelayqdPath() + " --in-memory -l 127.0.0.1 -p 0 --no-http ";
  int code = 0;
  std::string out = Shell(delayqd + "--tls-cert '" + Path("server.pem") + "'", &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("--tls-cert needs --tls-key"), std::string::npos) << out;
  out = Shell(
      delayqd + "--tls-cert '" + Path("server.pem") + "' --tls-key '" + Path("client.key") + "'",
      &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("not the key of"), std::string::npos) << out;
  out = Shell(
      delayqd + "--tls-cert '" + Path("missing.pem") + "' --tls-key '" + Path("server.key") + "'",
      &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("missing.pem"), std::string::npos) << out;
}

}  // namespace
}  // namespace delayq::testing
