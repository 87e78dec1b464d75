// delayqd on a Redis that wants a password: in the URL (the default user,
// or an ACL user), from --redis-password-file, and on a Redis Cluster whose
// nodes all want it. A wrong password is refused with Redis's words, the
// operations fail until it is right, and no log line ever holds a password.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
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
