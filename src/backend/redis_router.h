// Sends each command to the Redis server that holds its key: the one server
// of a plain deployment, or, in a Redis Cluster, the master that serves the
// key's hash slot (docs/redis-backend.md, "Redis Cluster"). The slot map
// comes from CLUSTER SLOTS; it is read again when a node (re)connects,
// when a node answers MOVED (the command is then sent on to the node
// named, after ASKING for ASK), when a node's connection is lost, and
// every second while some slot has no connected master (a master lost and
// a replica promoted in its place: the old master's slots answer nothing,
// so no MOVED would ever tell). Every node has its own RedisClient, which
// reconnects by itself, until a map no longer names it while it is down.
//
// Thread: every method, and every handler, on the loop thread.
#ifndef DELAYQ_BACKEND_REDIS_ROUTER_H_
#define DELAYQ_BACKEND_REDIS_ROUTER_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "backend/redis_client.h"

namespace delayq::backend {

class RedisRouter {
 public:
  struct Node {
    std::string host;
    int port = 6379;
  };
  struct Options {
    std::vector<Node> seeds;  // a plain deployment: exactly one
    bool cluster = false;
    int db = 0;             // plain only (a cluster has database 0 only)
    RedisCredentials auth;  // every node's connection authenticates so
    // Non-null: every node, the seeds and those CLUSTER SLOTS and MOVED
    // name, is reached over TLS with this context (RedisClient::Options).
    std::shared_ptr<boost::asio::ssl::context> tls;
    // Runs after every (re)connect of a node, before later commands to it
    // (e.g. SCRIPT LOAD).
    std::function<void(RedisClient& node)> on_node_connect;
    // Runs when a node's connection that was up is lost, with why.
    std::function<void(RedisClient& node, const std::string& error)> on_node_disconnect;
    // Every node's connection counts here (RedisClient::Options::counts).
    RedisCallCounts* counts = nullptr;
    size_t max_reply = size_t{1} << 30;               // RedisClient::Options::max_reply
    std::chrono::milliseconds reply_timeout{10'000};  // RedisClient::Options::reply_timeout
  };

  RedisRouter(boost::asio::io_context& io, Options options);
  ~RedisRouter();
  RedisRouter(const RedisRouter&) = delete;
  RedisRouter& operator=(const RedisRouter&) = delete;

  void Start();
  // Plain: connected. Cluster: every slot has a master, and every master
  // in the map is connected.
  bool connected() const;
  // For messages: the seeds, and the last connection error seen.
  std::string address() const;
  std::string last_error() const;

  // Sends `argv` to the node of `key`'s slot; `done` as RedisClient's.
  void Command(std::string_view key, const std::vector<std::string_view>& argv,
               RedisClient::Handler done);
  // The same for a command already in RESP (backend/resp.h).
  void Send(std::string_view key, std::shared_ptr<const std::string> command,
            RedisClient::Handler done);

  // The Redis Cluster hash slot of a key (CRC16 of its hash tag, mod 16384).
  static uint16_t KeySlot(std::string_view key);

 private:
  RedisClient& ClientFor(const std::string& host, int port);
  void LoadSlots();
  // After the map is read: drops the clients of nodes the last map named
  // (`named_before`, by "host:port"), this one does not, and whose
  // connection is down (not the seeds).
  void DropLostNodes(std::set<std::string> named_before);
  void SendTo(RedisClient* node, std::shared_ptr<const std::string> command, bool asking,
              int redirects, RedisClient::Handler done);

  boost::asio::io_context& io_;
  Options options_;
  std::map<std::string, std::unique_ptr<RedisClient>> clients_;  // by "host:port"
  std::vector<RedisClient*> slots_;                              // cluster: the master of each slot
  bool loading_ = false, reload_ = false;
  // Cluster: every second while some slot has no connected master, the
  // map is read again (ArmRefresh).
  boost::asio::steady_timer refresh_;
  void ArmRefresh();
  std::string last_error_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace delayq::backend

#endif  // DELAYQ_BACKEND_REDIS_ROUTER_H_
