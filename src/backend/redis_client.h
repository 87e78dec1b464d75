// One connection to a Redis server, driven by hiredis's asynchronous API on
// the Asio loop thread (docs/redis-backend.md). Commands are sent in the
// order issued and their handlers run in that order; nothing blocks the loop.
//
// The connection re-establishes itself: when it is lost (Redis restarted, a
// network error) every command in flight completes with a null reply, and
// the client connects again after a pause (100 ms, doubling to 2 s), runs
// `on_connect` (e.g. SELECT, SCRIPT LOAD, SUBSCRIBE) and carries on.
// Commands issued while disconnected complete at once with a null reply.
//
// A subscriber client (`subscriber` true) delivers pub/sub messages to
// `on_message`, and Redis's confirmations of its subscriptions to
// `on_subscribed`; it re-subscribes its channels after a reconnect.
//
// With credentials, every (re)connect first sends AUTH, and the client is
// connected only once Redis accepts it: nothing runs unauthenticated.
//
// Thread: every method, and every handler, on the loop thread.
#ifndef DELAYQ_BACKEND_REDIS_CLIENT_H_
#define DELAYQ_BACKEND_REDIS_CLIENT_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

struct redisAsyncContext;
struct redisReply;

namespace delayq::backend {

// What a connection authenticates with (AUTH): a password, and the ACL
// user it belongs to (empty: the default user). Never logged or shown.
struct RedisCredentials {
  std::string user;
  std::string password;  // empty: no AUTH
  bool operator==(const RedisCredentials&) const = default;
};

class RedisClient {
 public:
  // `reply` is null when the connection failed or was lost before a reply.
  // It is valid only during the call.
  using Handler = std::function<void(const redisReply* reply)>;

  struct Options {
    std::string host = "127.0.0.1";
    int port = 6379;
    bool subscriber = false;
    // Sent as AUTH first on every (re)connect: the client counts as
    // connected, runs `on_connect` and takes commands only once Redis has
    // accepted it. A refusal is kept as last_error() ("AUTH refused:
    // WRONGPASS ...", the server's words, which never hold the password),
    // and the connection is dropped and tried again later.
    RedisCredentials auth;
    // Runs on the loop thread after every (re)connect, before commands
    // issued later; it may issue commands itself.
    std::function<void()> on_connect;
    // Runs when the connection is lost (after the in-flight handlers).
    std::function<void(const std::string& error)> on_disconnect;
    // Subscriber: a message published on a subscribed channel.
    std::function<void(std::string_view channel, std::string_view message)> on_message;
    // Subscriber: Redis confirmed a subscription (also each one renewed
    // after a reconnect): from now on the channel's messages arrive.
    std::function<void(std::string_view channel)> on_subscribed;
  };

  RedisClient(boost::asio::io_context& io, Options options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Starts connecting (and reconnecting whenever the connection is lost).
  void Start();
  bool connected() const { return connected_; }
  const std::string& last_error() const { return last_error_; }
  std::string address() const;

  // Sends a command; `done` runs with its reply (or null, see above).
  void Command(const std::vector<std::string_view>& argv, Handler done);
  // The same for a command already in RESP (backend/resp.h), sent as it is.
  void Send(std::string_view command, Handler done);

  // Subscriber only: subscribes now if connected, and after every reconnect.
  void Subscribe(const std::string& channel);
  void Unsubscribe(const std::string& channel);

 private:
  struct Io;         // the socket's watcher, shared with hiredis's hooks
  class ReplyArena;  // where hiredis's reader builds the replies
  void Connect();
  void ScheduleReconnect();
  void OnConnected(int status);
  void OnDisconnected(int status);
  static void OnReply(redisAsyncContext* ac, void* reply, void* privdata);
  static void OnPubSub(redisAsyncContext* ac, void* reply, void* privdata);
  void SendSubscribe(const char* verb, const std::string& channel);
  // After AUTH, if any: connected; on_connect; the subscriptions.
  void Ready();
  void SendAuth();
  // Send, connected or not. REQUIRES: ctx_ != nullptr.
  void SendNow(std::string_view command, Handler done);

  boost::asio::io_context& io_;
  Options options_;
  // Declared before ctx_: a context hiredis frees may free a reply into it.
  std::unique_ptr<ReplyArena> arena_;
  redisAsyncContext* ctx_ = nullptr;
  std::shared_ptr<Io> watcher_;
  bool connected_ = false;
  bool stopping_ = false;
  std::string last_error_;
  std::chrono::milliseconds retry_{100};
  boost::asio::steady_timer reconnect_timer_;
  std::set<std::string> channels_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace delayq::backend

#endif  // DELAYQ_BACKEND_REDIS_CLIENT_H_
