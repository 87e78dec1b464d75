// Test helpers shared by the Redis backend's black-box tests: a job through
// delayqd, and a Redis Cluster made of test-started redis-servers.
#ifndef DELAYQ_TESTS_SERVER_REDIS_TEST_UTIL_H_
#define DELAYQ_TESTS_SERVER_REDIS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <span>
#include <string>

#include "server/redis_process.h"
#include "server/server_process.h"

namespace delayq::testing {

inline std::string HostPort(const RedisProcess& r) {
  return "127.0.0.1:" + std::to_string(r.port());
}

// put, reserve and delete one job over the beanstalkd protocol.
inline void ExpectAJobGoesThrough(uint16_t port) {
  RawClient c(port);
  ASSERT_TRUE(c.ok()) << c.error();
  std::string put = c.Call("put 0 0 60 5\r\nhello\r\n");
  ASSERT_EQ(put.rfind("INSERTED ", 0), 0u) << put;
  std::string id = put.substr(9, put.size() - 11);
  EXPECT_EQ(c.Call("reserve-with-timeout 5\r\n"), "RESERVED " + id + " 5\r\nhello\r\n");
  EXPECT_EQ(c.Call("delete " + id + "\r\n"), "DELETED\r\n");
}

// Puts a job in each of eight topics through delayqd on a Redis Cluster
// (they spread over its masters) and sees them all counted.
inline void ExpectJobsOnEveryMaster(uint16_t port) {
  RawClient c(port);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 8; ++i) {
    std::string tube = "t" + std::to_string(i);
    EXPECT_EQ(c.Call("use " + tube + "\r\n"), "USING " + tube + "\r\n");
    EXPECT_EQ(c.Call("put 0 0 60 1\r\nx\r\n").rfind("INSERTED", 0), 0u) << tube;
  }
  std::string stats = c.Call("stats\r\n");
  EXPECT_NE(stats.find("\ntotal-jobs: 8\n"), std::string::npos) << stats;
}

// Makes `nodes` (started with --cluster-enabled yes) one cluster of
// masters with `cli` (redis-cli with its connection flags, e.g. a password
// or TLS), and waits until each says cluster_state:ok.
inline void CreateRedisCluster(std::span<RedisProcess> nodes, const std::string& cli) {
  std::string cmd = cli + " --cluster create";
  for (const RedisProcess& n : nodes) cmd += " " + HostPort(n);
  cmd += " --cluster-replicas 0 --cluster-yes >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const RedisProcess& n : nodes) {
    std::string check = "for i in $(seq 100); do " + cli + " -p " + std::to_string(n.port()) +
                        " cluster info 2>/dev/null | grep -q cluster_state:ok && exit 0;"
                        " sleep 0.1; done; exit 1";
    ASSERT_EQ(std::system(check.c_str()), 0) << "cluster not ok on " << n.port();
  }
}

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_SERVER_REDIS_TEST_UTIL_H_
