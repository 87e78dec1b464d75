// One connection to a Redis server on the Asio loop thread: a TCP socket, or
// a TLS stream over it (rediss://, docs/redis-backend.md), that Asio drives;
// hiredis's reader parses the replies. Commands are sent in the order
// issued and their handlers run in that order; nothing blocks the loop.
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
// Every (re)connect first sends AUTH (with credentials) or PING, and the
// client is connected only once Redis answers it without an error: nothing
// runs unauthenticated, and "connected" means Redis answered.
//
// With TLS, every (re)connect first completes a TLS handshake that checks
// the server's certificate against the context's CAs and its name (or IP
// address) against `host`, which is also sent as SNI; a failure is kept as
// last_error() ("TLS handshake failed: certificate verify failed (...)")
// and tried again later, as a refused connection is.
//
// Thread: every method, and every handler, on the loop thread.
#ifndef DELAYQ_BACKEND_REDIS_CLIENT_H_
#define DELAYQ_BACKEND_REDIS_CLIENT_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/histogram.h"
#include "delayq/status.h"

struct redisReply;

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace delayq::backend {

// What a connection authenticates with (AUTH): a password, and the ACL
// user it belongs to (empty: the default user). Never logged or shown.
struct RedisCredentials {
  std::string user;
  std::string password;  // empty: no AUTH
  bool operator==(const RedisCredentials&) const = default;
};

// What TLS connections to Redis trust and show (docs/redis-backend.md,
// "TLS"). The server's certificate is always verified.
struct RedisTlsOptions {
  std::string ca_file = {};    // PEM; empty: the system's CA store
  std::string cert_file = {};  // the client's certificate chain (PEM), for
                               // tls-auth-clients; empty: none
  std::string key_file = {};   // its private key (PEM); with cert_file only
};

// A client TLS context for Redis connections: TLS 1.2 or later, peers
// verified against `o`'s CAs. kInvalidArgument naming the file and
// OpenSSL's reason when a file cannot be used (never its contents).
Result<std::shared_ptr<boost::asio::ssl::context>> NewRedisTlsContext(const RedisTlsOptions& o);

// What connections count for /metrics (RedisMetrics): commands sent, the
// time from each one's sending to its reply, and reconnects (a connection
// made again after one was up). Shared by the clients of one backend.
struct RedisCallCounts {
  uint64_t calls = 0;
  LatencyHistogram duration;  // commands answered
  uint64_t reconnects = 0;
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
    // Non-null: connect over TLS with this context (NewRedisTlsContext),
    // verifying that the certificate names `host`.
    std::shared_ptr<boost::asio::ssl::context> tls;
    // A connection (resolving, TCP, and the TLS handshake) not made within
    // this is given up, and tried again later.
    std::chrono::milliseconds connect_timeout{3000};
    // A connection that has had commands in flight and heard nothing from
    // Redis for this long (a Redis that is stopped, wedged or cut off while
    // the socket stays open) is given up within a quarter more: its
    // commands get null replies, and it is made again. 0: wait for ever.
    // A subscriber, which has no commands in flight once subscribed, sends
    // a PING when it has heard nothing for half of this, and that PING is
    // watched as any command.
    std::chrono::milliseconds reply_timeout{10'000};
    // Sent as AUTH first on every (re)connect: the client counts as
    // connected, runs `on_connect` and takes commands only once Redis has
    // accepted it. A refusal is kept as last_error() ("AUTH refused:
    // WRONGPASS ...", the server's words, which never hold the password),
    // and the connection is dropped and tried again later.
    RedisCredentials auth;
    // Not 0: SELECTed after AUTH, before the client counts as connected;
    // a refusal fails the connection like a refused AUTH.
    int db = 0;
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
    // Not owned; null: nothing counted. Must outlive the client.
    RedisCallCounts* counts = nullptr;
    // The most one reply may take in memory (its strings, its objects):
    // a server that sends more (a broken or hostile one; Redis itself
    // refuses strings over 512 MB) fails the connection ("a reply of more
    // than N bytes"), which is tried again later. An array's announced
    // length costs nothing until its elements arrive.
    size_t max_reply = size_t{1} << 30;
  };

  RedisClient(boost::asio::io_context& io, Options options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Starts connecting (and reconnecting whenever the connection is lost).
  void Start();
  bool connected() const { return connected_; }
  // Why the connection was lost or could not be made ("Connection refused",
  // "TLS handshake failed: certificate verify failed (hostname mismatch)",
  // "AUTH refused: WRONGPASS ..."); never holds a secret.
  const std::string& last_error() const { return last_error_; }
  const std::string& host() const { return options_.host; }
  std::string address() const;

  // Sends a command; `done` runs with its reply (or null, see above).
  void Command(const std::vector<std::string_view>& argv, Handler done);
  // The same for a command already in RESP (backend/resp.h), sent as it is.
  void Send(std::string_view command, Handler done);

  // Subscriber only: subscribes now if connected, and after every reconnect.
  void Subscribe(const std::string& channel);
  void Unsubscribe(const std::string& channel);

 private:
  struct Link;  // one connection: its socket or TLS stream, reader, handlers
  void Connect();
  void ScheduleReconnect();
  // The connection is up (TCP, and TLS if any): AUTH, or Ready.
  void OnLinkUp(const std::shared_ptr<Link>& link);
  // Ends `link` (if it is still the current one) with `error`: the handlers
  // in flight get null replies, on_disconnect runs, a reconnect is due.
  void Fail(const std::shared_ptr<Link>& link, std::string error);
  void ReadMore(const std::shared_ptr<Link>& link);
  // Parses `n` bytes just read and runs the handlers of the replies whole.
  void OnRead(const std::shared_ptr<Link>& link, size_t n);
  void Dispatch(const std::shared_ptr<Link>& link, const redisReply* r);
  void OnPubSub(const redisReply* r);
  // Writes what `link` has queued: at once if it can, else on the loop.
  void Flush(const std::shared_ptr<Link>& link);
  void WriteAsync(const std::shared_ptr<Link>& link);
  void SendSubscribe(const char* verb, const std::string& channel);
  // After AUTH or PING: connected; on_connect; the subscriptions.
  void Ready();
  // While `link` is ready: gives it up when its oldest command has waited
  // longer than Options::reply_timeout (on its timer).
  void WatchReplies(const std::shared_ptr<Link>& link);
  void SendAuth();
  void SendSelect();  // after SendAuth, with Options::db
  // Send, connected or not. REQUIRES: link_ != nullptr.
  void SendNow(std::string_view command, Handler done);

  boost::asio::io_context& io_;
  Options options_;
  std::shared_ptr<Link> link_;  // null while there is no connection
  bool connected_ = false;
  bool ever_connected_ = false;
  bool stopping_ = false;
  std::string last_error_;
  std::chrono::milliseconds retry_{100};
  boost::asio::steady_timer reconnect_timer_;
  std::set<std::string> channels_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace delayq::backend

#endif  // DELAYQ_BACKEND_REDIS_CLIENT_H_
