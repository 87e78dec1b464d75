// The Redis backend over TLS (rediss://, rediss-cluster://) against real
// redis-servers serving TLS alone, with a CA and certificates each test
// makes (server/test_pki.h): a job goes through and a waiting reserve is
// woken; a wrong CA, a certificate for another host, a missing client
// certificate and a plaintext port are refused with words that say so;
// passwords and ACL users go over TLS; and a Redis Cluster whose nodes
// (and bus) speak TLS only.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <boost/asio/io_context.hpp>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "app/config.h"
#include "backend/redis_backend.h"
#include "backend/redis_client.h"
#include "server/io_wait.h"
#include "server/redis_process.h"
#include "server/redis_test_util.h"
#include "server/server_process.h"
#include "server/test_pki.h"
#include "temp_dir.h"

namespace delayq::testing {
namespace {

constexpr const char* kTlsSecret = "s3cr3t-over-tls";

TEST(RedisUrlTls, SchemesParseAndPasswordsAreRedacted) {
  auto a = backend::ParseRedisUrl("rediss://worker:p%40ss@redis.example:6380/2");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->tls);
  EXPECT_FALSE(a->cluster);
  EXPECT_EQ(a->nodes.at(0).host, "redis.example");
  EXPECT_EQ(a->nodes.at(0).port, 6380);
  EXPECT_EQ(a->db, 2);
  EXPECT_EQ(a->auth.user, "worker");
  EXPECT_EQ(a->auth.password, "p@ss");
  auto b = backend::ParseRedisUrl("rediss://h");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->tls);
  EXPECT_EQ(b->nodes.at(0).port, 6379);
  auto c = backend::ParseRedisUrl("rediss-cluster://:pw@a:7000,b:7001");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->tls);
  EXPECT_TRUE(c->cluster);
  EXPECT_EQ(c->nodes.size(), 2u);
  EXPECT_EQ(c->auth.password, "pw");
  for (const char* plain : {"redis://h", "redis-cluster://a,b"}) {
    auto p = backend::ParseRedisUrl(plain);
    ASSERT_TRUE(p.ok()) << plain;
    EXPECT_FALSE(p->tls) << plain;
  }
  EXPECT_EQ(backend::RedactRedisUrl("rediss://worker:s3cr3t@h:1/2"), "rediss://worker:***@h:1/2");
  EXPECT_EQ(backend::RedactRedisUrl("rediss://s3cr3t@h"), "rediss://***@h");
  EXPECT_EQ(backend::RedactRedisUrl("rediss-cluster://u:s3cr3t@a,b"), "rediss-cluster://u:***@a,b");
  for (const char* bad : {"rediss://u:s3cr3t@a:1,b:2", "rediss-cluster://u:s3cr3t@a/1",
                          "rediss://u:s3cr3t@h:0", "redisss://h", "rediss//h", "rediss:/h"}) {
    auto r = backend::ParseRedisUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().find("s3cr3t"), std::string::npos) << r.status().message();
  }
  EXPECT_NE(backend::ParseRedisUrl("rediss://a:1,b:2").status().message().find("rediss-cluster://"),
            std::string::npos);
}

TEST(RedisTlsSettings, TheTlsFilesComeFromEachSource) {
  app::Config c;
  ASSERT_TRUE(app::ParseConfig({"delayqd", "--redis-tls-cert", "/c.pem"},
                               {"DELAYQ_BACKEND=rediss://h", "DELAYQ_REDIS_TLS_CA_FILE=/ca.pem",
                                "DELAYQ_REDIS_TLS_KEY=/k.pem"},
                               &c)
                  .run);
  EXPECT_EQ(c.redis_tls_ca_file, "/ca.pem");
  EXPECT_EQ(c.redis_tls_cert, "/c.pem");
  EXPECT_EQ(c.redis_tls_key, "/k.pem");
}

TEST(RedisTlsContext, FilesThatCannotServeAreNamed) {
  TempDir dir;
  const std::string junk = dir.path() + "/junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  auto missing = backend::NewRedisTlsContext({.ca_file = dir.path() + "/none.pem"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "cannot read the CA file " + dir.path() + "/none.pem: No such file or directory");
  auto not_pem = backend::NewRedisTlsContext({.ca_file = junk});
  ASSERT_FALSE(not_pem.ok());
  EXPECT_EQ(not_pem.status().message().rfind("cannot use the CA file " + junk + ": ", 0), 0u)
      << not_pem.status().message();
  auto lone = backend::NewRedisTlsContext({.cert_file = junk});
  ASSERT_FALSE(lone.ok());
  EXPECT_NE(lone.status().message().find("needs its key"), std::string::npos);
  // The system's store, when no CA file is named.
  EXPECT_TRUE(backend::NewRedisTlsContext({}).ok());
}

class RedisTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(pki_.Init(&error)) << error;
    ASSERT_TRUE(pki_.Issue("redis", "IP:127.0.0.1,DNS:localhost", &error)) << error;
    ASSERT_TRUE(pki_.Issue("delayq", "", &error)) << error;
  }
  // A redis-server serving TLS with certificate `cert` of pki_.
  void StartRedis(RedisProcess& r, const std::string& cert, bool want_client_cert,
                  std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = pki_.RedisFlags(cert);
    flags.insert(flags.end(), {"--tls-auth-clients", want_client_cert ? "yes" : "no"});
    r.UseTls(flags);
    std::string error;
    ASSERT_TRUE(r.Start(&error, extra)) << error;
  }
  // A RedisClient to `host`:`port`, over TLS with `tls` (nullopt: plain
  // TCP), run until it is connected or has failed; returns last_error()
  // ("" when connected).
  std::string ConnectOnce(const std::string& host, uint16_t port,
                          const std::optional<backend::RedisTlsOptions>& tls) {
    boost::asio::io_context io;
    backend::RedisClient::Options o;
    o.host = host;
    o.port = port;
    if (tls) {
      auto ctx = backend::NewRedisTlsContext(*tls);
      EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
      if (!ctx.ok()) return "no context";
      o.tls = *ctx;
    }
    o.connect_timeout = milliseconds(1000);
    backend::RedisClient client(io, o);
    client.Start();
    bool pinged = false, answered = false;
    RunIoUntil(
        io,
        [&] {
          if (!client.last_error().empty()) return true;
          if (client.connected() && !pinged) {
            pinged = true;
            client.Command({"PING"}, [&](const redisReply* r) {
              answered = r != nullptr && r->type == REDIS_REPLY_STATUS;
            });
          }
          return answered;
        },
        milliseconds(3000));
    return client.last_error();
  }

  TestPki pki_;
};

TEST_F(RedisTlsTest, AJobGoesThroughAndAWaitingReserveIsWoken) {
  RedisProcess redis;
  StartRedis(redis, "redis", false);
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(DelayqdPath(),
                           {"--backend", redis.url(), "--redis-tls-ca-file", pki_.ca()}, &error))
      << error;
  ExpectAJobGoesThrough(server.port());
  // The subscriber's connection is over TLS too: it wakes the reserve.
  RawClient worker(server.port()), producer(server.port());
  ASSERT_TRUE(worker.Send("reserve-with-timeout 10\r\n"));
  EXPECT_EQ(worker.ReadReply(milliseconds(300)), std::string(kTimeoutMark));
  ASSERT_EQ(producer.Call("put 0 0 60 1\r\nw\r\n").rfind("INSERTED", 0), 0u);
  EXPECT_EQ(worker.ReadReply(milliseconds(5000)).rfind("RESERVED", 0), 0u);
  EXPECT_NE(server.Log().find("event=redis_connected backend=rediss://127.0.0.1:"),
            std::string::npos)
      << server.Log();
}

TEST_F(RedisTlsTest, AWrongCaIsRefusedAndOperationsFail) {
  RedisProcess redis;
  StartRedis(redis, "redis", false);
  TestPki other;
  std::string error;
  ASSERT_TRUE(other.Init(&error)) << error;
  ServerProcess server;
  ASSERT_TRUE(server.Start(DelayqdPath(),
                           {"--backend", redis.url(), "--redis-tls-ca-file", other.ca()}, &error))
      << error;
  RawClient c(server.port());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.Call("put 0 0 60 1\r\nx\r\n"), "INTERNAL_ERROR\r\n");
  std::string log = server.Log();
  EXPECT_NE(log.find("event=redis_unreachable backend=rediss://127.0.0.1:"), std::string::npos)
      << log;
  // "(unable to get local issuer certificate)", or "(self-signed
  // certificate in certificate chain)" when Redis sends its CA along.
  EXPECT_NE(log.find("TLS handshake failed: certificate verify failed ("), std::string::npos)
      << log;

  // TLS settings with a plain URL stop the start: no silent plain text.
  ServerProcess plain;
  EXPECT_FALSE(plain.Start(
      DelayqdPath(), {"--backend", "redis://" + HostPort(redis), "--redis-tls-ca-file", pki_.ca()},
      &error, milliseconds(3000)));
  EXPECT_NE(plain.Log().find("event=bad_redis_tls"), std::string::npos) << plain.Log();
  // A CA file that is not there, or holds no certificate, stops the start.
  const std::string junk = pki_.Path("junk.pem");
  std::ofstream(junk) << "not a certificate\n";
  for (const std::string& ca : {pki_.Path("none.pem"), junk}) {
    ServerProcess refused;
    EXPECT_FALSE(refused.Start(DelayqdPath(), {"--backend", redis.url(), "--redis-tls-ca-file", ca},
                               &error, milliseconds(3000)));
    EXPECT_NE(refused.Log().find("event=bad_redis_tls"), std::string::npos) << refused.Log();
    EXPECT_NE(refused.Log().find(ca), std::string::npos) << refused.Log();
  }
}

TEST_F(RedisTlsTest, ACertificateForAnotherHostIsRefused) {
  std::string error;
  ASSERT_TRUE(pki_.Issue("elsewhere", "DNS:elsewhere.example", &error)) << error;
  RedisProcess redis;
  StartRedis(redis, "elsewhere", false);
  EXPECT_EQ(ConnectOnce("127.0.0.1", redis.port(), backend::RedisTlsOptions{pki_.ca()}),
            "TLS handshake failed: certificate verify failed (IP address mismatch)");
  EXPECT_EQ(ConnectOnce("localhost", redis.port(), backend::RedisTlsOptions{pki_.ca()}),
            "TLS handshake failed: certificate verify failed (hostname mismatch)");
  // The certificate that names the host passes the same checks.
  RedisProcess good;
  StartRedis(good, "redis", false);
  EXPECT_EQ(ConnectOnce("localhost", good.port(), backend::RedisTlsOptions{pki_.ca()}), "");
  EXPECT_EQ(ConnectOnce("127.0.0.1", good.port(), backend::RedisTlsOptions{pki_.ca()}), "");
}

TEST_F(RedisTlsTest, TlsToAPlaintextPortAndBackSaySo) {
  RedisProcess plain;
  std::string error;
  ASSERT_TRUE(plain.Start(&error)) << error;
  std::string e = ConnectOnce("127.0.0.1", plain.port(), backend::RedisTlsOptions{pki_.ca()});
  EXPECT_EQ(e.rfind("TLS handshake ", 0), 0u) << e;
  EXPECT_NE(e.find("a TLS port?"), std::string::npos) << e;
  // And the other way round: plain TCP to a TLS port is never taken for
  // connected (its first command, a PING, has no answer).
  RedisProcess tls;
  StartRedis(tls, "redis", false);
  e = ConnectOnce("127.0.0.1", tls.port(), std::nullopt);
  EXPECT_NE(e.find(" before Redis answered (is 127.0.0.1:" + std::to_string(tls.port()) +
                   " a TLS port? Then rediss://)"),
            std::string::npos)
      << e;
}

TEST_F(RedisTlsTest, AClientCertificateWhenRedisAsksForOne) {
  RedisProcess redis;
  StartRedis(redis, "redis", true);
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(
      server.Start(DelayqdPath(),
                   {"--backend", redis.url(), "--redis-tls-ca-file", pki_.ca(), "--redis-tls-cert",
                    pki_.Path("delayq.crt"), "--redis-tls-key", pki_.Path("delayq.key")},
                   &error))
      << error;
  ExpectAJobGoesThrough(server.port());
  // Without one, Redis ends the connection (TLS 1.3: after the handshake,
  // with an alert that says why).
  std::string e = ConnectOnce("127.0.0.1", redis.port(), backend::RedisTlsOptions{pki_.ca()});
  EXPECT_NE(e.find("certificate required"), std::string::npos) << e;
  // A key that is not the certificate's stops the start.
  ServerProcess refused;
  EXPECT_FALSE(
      refused.Start(DelayqdPath(),
                    {"--backend", redis.url(), "--redis-tls-ca-file", pki_.ca(), "--redis-tls-cert",
                     pki_.Path("delayq.crt"), "--redis-tls-key", pki_.Path("redis.key")},
                    &error, milliseconds(3000)));
  EXPECT_NE(refused.Log().find("does not match"), std::string::npos) << refused.Log();
}

TEST_F(RedisTlsTest, APasswordAndAnAclUserGoOverTls) {
  RedisProcess redis;
  StartRedis(redis, "redis", false,
             {"--user", "worker", "on", ">" + std::string(kTlsSecret), "~dq:*", "&dq:*", "+@all",
              "--user", "default", "off"});
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(
      DelayqdPath(),
      {"--backend", "rediss://worker:" + std::string(kTlsSecret) + "@" + HostPort(redis),
       "--redis-tls-ca-file", pki_.ca()},
      &error))
      << error;
  ExpectAJobGoesThrough(server.port());
  std::string log = server.Log();
  EXPECT_NE(log.find("event=redis_connected backend=rediss://worker:***@"), std::string::npos)
      << log;
  EXPECT_EQ(log.find(kTlsSecret), std::string::npos) << "a password in the log:\n" << log;
}

// Three masters that speak TLS alone, to clients and on the cluster bus:
// CLUSTER SLOTS names their TLS ports, and delayqd reaches each over TLS.
TEST_F(RedisTlsTest, ARedisClusterOverTls) {
  RedisProcess nodes[3];
  for (auto& n : nodes) {
    StartRedis(
        n, "redis", false,
        {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
         "--cluster-node-timeout", "5000", "--tls-cluster", "yes", "--tls-replication", "yes"});
    if (HasFatalFailure()) return;
  }
  CreateRedisCluster(nodes, "redis-cli --tls --cacert '" + pki_.ca() + "'");
  if (HasFatalFailure()) return;
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(
      DelayqdPath(),
      {"--backend", "rediss-cluster://" + HostPort(nodes[0]), "--redis-tls-ca-file", pki_.ca()},
      &error))
      << error;
  // Topics spread over the masters: each is reached over TLS.
  ExpectJobsOnEveryMaster(server.port());
  ExpectAJobGoesThrough(server.port());
}

}  // namespace
}  // namespace delayq::testing
