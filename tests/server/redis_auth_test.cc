// delayqd on a Redis that wants a password: in the URL (the default user,
// or an ACL user), from --redis-password-file, and on a Redis Cluster whose
// nodes all want it. A wrong password is refused with Redis's words, the
// operations fail until it is right, and no log line ever holds a password.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/redis_backend.h"
#include "server/redis_process.h"
#include "server/redis_test_util.h"
#include "server/server_process.h"

namespace delayq::testing {
namespace {

constexpr const char* kSecret = "s3cr3t-p@ss/w:rd";
// kSecret as a URL's userinfo writes it.
constexpr const char* kSecretInUrl = "s3cr3t-p%40ss%2Fw%3Ard";

void ExpectNoSecretIn(const std::string& log) {
  EXPECT_EQ(log.find("s3cr3t"), std::string::npos) << "a password in the log:\n" << log;
  EXPECT_EQ(log.find("wrong-one"), std::string::npos) << "a password in the log:\n" << log;
}

TEST(RedisUrlAuth, CredentialsAreParsedDecodedAndNeverShown) {
  auto a = backend::ParseRedisUrl("redis://worker:" + std::string(kSecretInUrl) + "@h:7000/2");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->auth.user, "worker");
  EXPECT_EQ(a->auth.password, kSecret);
  EXPECT_EQ(a->nodes.at(0).host, "h");
  EXPECT_EQ(a->nodes.at(0).port, 7000);
  EXPECT_EQ(a->db, 2);
  auto b = backend::ParseRedisUrl("redis://:pw@h");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->auth.user, "");
  EXPECT_EQ(b->auth.password, "pw");
  auto c = backend::ParseRedisUrl("redis-cluster://u:pw@a:1,b:2");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->auth.password, "pw");
  EXPECT_EQ(c->nodes.size(), 2u);
  auto plain = backend::ParseRedisUrl("redis://h");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->auth.password.empty());

  EXPECT_EQ(backend::RedactRedisUrl("redis://worker:s3cr3t@h:1/2"), "redis://worker:***@h:1/2");
  EXPECT_EQ(backend::RedactRedisUrl("redis://:s3cr3t@h"), "redis://:***@h");
  EXPECT_EQ(backend::RedactRedisUrl("redis://s3cr3t@h"), "redis://***@h");
  EXPECT_EQ(backend::RedactRedisUrl("redis-cluster://u:s3cr3t@a,b"), "redis-cluster://u:***@a,b");
  EXPECT_EQ(backend::RedactRedisUrl("redis://h:1"), "redis://h:1");
  // Errors name the URL without its password.
  for (const char* bad : {"redis://u:s3cr3t@h:0", "redis://u:s3cr3t@", "redis://u:s3cr3t@h/x",
                          "redis://u:s3cr3t%zz@h", "redis-cluster://u:s3cr3t@h/3"}) {
    auto r = backend::ParseRedisUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().find("s3cr3t"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(backend::ParseRedisUrl("redis://u:@h").ok());  // an empty password
  // URLs that do not parse show no password either: a '/' in it (not
  // percent-encoded), the host left out so that it stands where the port
  // goes, a misspelt scheme.
  EXPECT_EQ(backend::RedactRedisUrl("redis://worker:s3c/r3t@h:6379"), "redis://worker:***@h:6379");
  EXPECT_EQ(backend::RedactRedisUrl("redis://worker:s3cr3t"), "redis://***");
  EXPECT_EQ(backend::RedactRedisUrl("redis-cluster://a:1,b:s3cr3t/0"), "redis-cluster://***");
  EXPECT_EQ(backend::RedactRedisUrl("redis://[::1]:6379/2"), "redis://[::1]:6379/2");
  EXPECT_EQ(backend::RedactRedisUrl("redis://h/2"), "redis://h/2");
  EXPECT_EQ(backend::RedactRedisUrl("redis:/u:s3cr3t@h"), "redis:***@h");
  EXPECT_EQ(backend::RedactRedisUrl("rediss-cluster://a:7000,b:7001"),
            "rediss-cluster://a:7000,b:7001");
  for (const char* bad :
       {"redis://worker:s3c/r3t@h:6379", "redis://worker:s3cr3t", "redis:/u:s3cr3t@h",
        "redis://worker:12345r3t", "redis://worker:s3c:r3t", "redis://worker:s3c/r3t",
        "redis-cluster://worker:s3,cr3t", "redis://worker:99999999"}) {
    auto r = backend::ParseRedisUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    for (const char* part : {"s3cr3t", "s3c", "r3t", "99999999"})
      EXPECT_EQ(r.status().message().find(part), std::string::npos) << r.status().message();
    for (const char* part : {"s3c", "r3t", "99999999"})
      EXPECT_EQ(backend::RedactRedisUrl(bad).find(part), std::string::npos)
          << backend::RedactRedisUrl(bad);
  }
  // No ':' in the user information: a password alone (or, with the
  // password in a file, a user's name: ThePasswordFromAFile).
  auto alone = backend::ParseRedisUrl("redis://worker@h");
  ASSERT_TRUE(alone.ok());
  EXPECT_TRUE(alone->password_alone);
  EXPECT_EQ(alone->auth.password, "worker");
  EXPECT_FALSE(a->password_alone);
}

// The number a shell command prints first, or -1.
long CliNumber(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  long v = -1;
  if (std::fscanf(p, "%ld", &v) != 1) v = -1;
  ::pclose(p);
  return v;
}

class RedisAuthTest : public ::testing::Test {
 protected:
  void Start(const std::vector<std::string>& redis_flags) {
    std::string error;
    ASSERT_TRUE(redis_.Start(&error, redis_flags)) << error;
  }
  RedisProcess redis_;
};

TEST_F(RedisAuthTest, ThePasswordInTheUrlAuthenticatesEveryConnection) {
  Start({"--requirepass", kSecret});
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(
      DelayqdPath(),
      {"--backend", "redis://:" + std::string(kSecretInUrl) + "@" + HostPort(redis_)}, &error))
      << error;
  ExpectAJobGoesThrough(server.port());
  // A waiting reserve is woken through the subscriber connection, which
  // authenticates too.
  RawClient worker(server.port()), producer(server.port());
  ASSERT_TRUE(worker.Send("reserve-with-timeout 10\r\n"));
  EXPECT_EQ(worker.ReadReply(milliseconds(300)), std::string(kTimeoutMark));
  ASSERT_EQ(producer.Call("put 0 0 60 1\r\nw\r\n").rfind("INSERTED", 0), 0u);
  EXPECT_EQ(worker.ReadReply(milliseconds(5000)).rfind("RESERVED", 0), 0u);
  std::string log = server.Log();
  EXPECT_NE(log.find("event=redis_connected backend=redis://:***@"), std::string::npos) << log;
  ExpectNoSecretIn(log);
}

TEST_F(RedisAuthTest, AnAclUserAndAWrongPassword) {
  // The grant docs/redis-backend.md recommends.
  Start({"--user", "worker", "on", ">" + std::string(kSecret), "~dq:*", "&dq:*", "+@all", "--user",
         "default", "off"});
  ServerProcess good;
  std::string error;
  ASSERT_TRUE(good.Start(
      DelayqdPath(),
      {"--backend", "redis://worker:" + std::string(kSecretInUrl) + "@" + HostPort(redis_)},
      &error))
      << error;
  ExpectAJobGoesThrough(good.port());
  ExpectNoSecretIn(good.Log());

  ServerProcess wrong;
  ASSERT_TRUE(wrong.Start(DelayqdPath(),
                          {"--backend", "redis://worker:wrong-one@" + HostPort(redis_)}, &error))
      << error;
  RawClient c(wrong.port());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.Call("put 0 0 60 1\r\nx\r\n"), "INTERNAL_ERROR\r\n");
  std::string log = wrong.Log();
  EXPECT_NE(log.find("event=redis_unreachable backend=redis://worker:***@"), std::string::npos)
      << log;
  EXPECT_NE(log.find("AUTH refused: WRONGPASS"), std::string::npos) << log;
  ExpectNoSecretIn(log);
}

// A refused password is tried again with waits that grow to 2 s, not
// every 100 ms: each try is a connection (and a TLS handshake) and a
// failed AUTH in Redis's ACL log.
TEST_F(RedisAuthTest, ARefusedPasswordIsTriedAgainEverLessOften) {
  Start({"--requirepass", kSecret});
  auto connections = [&] {
    return CliNumber("redis-cli -p " + std::to_string(redis_.port()) + " -a " +
                     std::string(kSecret) +
                     " --no-auth-warning info stats | sed -n 's/^total_connections_received://p'");
  };
  const long before = connections();
  ServerProcess wrong;
  std::string error;
  ASSERT_TRUE(
      wrong.Start(DelayqdPath(), {"--backend", "redis://:wrong-one@" + HostPort(redis_)}, &error))
      << error;
  std::this_thread::sleep_for(milliseconds(4000));
  // Two connections (calls, subscriber), each tried after 0.1, 0.2, 0.4,
  // 0.8, 1.6 and 2 s: about 12 in 4 s; every 100 ms it was about 80.
  const long made = connections() - before;
  EXPECT_LT(made, 30) << made << " connections in 4 s";
  EXPECT_GE(made, 2);
  ExpectNoSecretIn(wrong.Log());
}

// A database Redis does not have: SELECT is refused, and nothing is sent
// on that connection (it would land in database 0); the start log says why.
TEST_F(RedisAuthTest, ARefusedSelectLeavesTheConnectionDown) {
  Start({"--databases", "4"});
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(
      server.Start(DelayqdPath(), {"--backend", "redis://" + HostPort(redis_) + "/20"}, &error))
      << error;
  RawClient c(server.port());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.Call("put 0 0 60 1\r\nx\r\n"), "INTERNAL_ERROR\r\n");
  EXPECT_NE(server.Log().find("Redis refused: SELECT 20: ERR DB index is out of range"),
            std::string::npos)
      << server.Log();
  EXPECT_EQ(CliNumber("redis-cli -p " + std::to_string(redis_.port()) + " dbsize"), 0);
}

TEST_F(RedisAuthTest, ThePasswordFromAFile) {
  Start({"--requirepass", kSecret});
  TempDir dir;
  const std::string file = dir.path() + "/redis-password";
  std::ofstream(file) << kSecret << "\n";
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(
      DelayqdPath(), {"--backend", "redis://" + HostPort(redis_), "--redis-password-file", file},
      &error))
      << error;
  ExpectAJobGoesThrough(server.port());
  ExpectNoSecretIn(server.Log());
  // With an ACL user, named in the URL as docs/redis-backend.md says
  // ("redis://worker@host").
  RedisProcess acl;
  ASSERT_TRUE(acl.Start(&error, {"--user", "worker", "on", ">" + std::string(kSecret), "~dq:*",
                                 "&dq:*", "+@all", "--user", "default", "off"}))
      << error;
  ServerProcess user;
  ASSERT_TRUE(user.Start(
      DelayqdPath(),
      {"--backend", "redis://worker@" + HostPort(acl), "--redis-password-file", file}, &error))
      << error;
  ExpectAJobGoesThrough(user.port());
  ExpectNoSecretIn(user.Log());
  // A missing file, or a password given twice, stops the start.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--backend", "redis://" + HostPort(redis_),
                                 "--redis-password-file", dir.path() + "/none"},
        std::vector<std::string>{"--backend", "redis://:s3cr3t@" + HostPort(redis_),
                                 "--redis-password-file", file}}) {
    ServerProcess refused;
    EXPECT_FALSE(refused.Start(DelayqdPath(), args, &error, milliseconds(3000)));
    EXPECT_NE(refused.Log().find("event=bad_redis_password_file"), std::string::npos)
        << refused.Log();
    ExpectNoSecretIn(refused.Log());
  }
}

TEST(RedisClusterAuth, EveryNodeIsReachedWithThePassword) {
  RedisProcess nodes[3];
  std::string error;
  for (auto& n : nodes)
    ASSERT_TRUE(n.Start(&error, {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                 "--cluster-node-timeout", "5000", "--requirepass", kSecret,
                                 "--masterauth", kSecret}))
        << error;
  CreateRedisCluster(nodes, "REDISCLI_AUTH='" + std::string(kSecret) + "' redis-cli");
  if (HasFatalFailure()) return;
  ServerProcess server;
  ASSERT_TRUE(server.Start(
      DelayqdPath(),
      {"--backend", "redis-cluster://:" + std::string(kSecretInUrl) + "@" + HostPort(nodes[0])},
      &error))
      << error;
  // Topics spread over the masters: each is reached with the password.
  ExpectJobsOnEveryMaster(server.port());
  ExpectNoSecretIn(server.Log());
}

}  // namespace
}  // namespace delayq::testing
