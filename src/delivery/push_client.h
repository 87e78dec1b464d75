// The HTTP client pushes go out through (docs/push.md): libcurl's multi
// interface driven by the server's Asio loop, so a thousand requests in
// flight cost no thread. Connections are kept alive and reused per target
// (curl's connection cache); every connection is made to an address checked
// first (delivery/outbound.h) unless private targets are allowed; TLS
// certificates are verified.
//
// Thread: one loop thread, that of the io_context; completions run on it,
// after Send returns, never from inside it.
#ifndef DELAYQ_DELIVERY_PUSH_CLIENT_H_
#define DELAYQ_DELIVERY_PUSH_CLIENT_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "delayq/types.h"

typedef void CURLM;  // NOLINT: libcurl's own spelling

namespace delayq::delivery {

struct PushRequest {
  std::string url;
  std::string method = "POST";       // GET, POST, PUT, PATCH, DELETE
  std::vector<std::string> headers;  // "Name: value"
  std::string body;
  TimeMs timeout_ms = 30'000;  // the whole exchange, connecting included
  bool follow_redirects = false;
};

// Why a request got no HTTP answer.
enum class PushFailure : uint8_t {
  kNone,      // it got one: see status
  kTimeout,   // none within timeout_ms
  kRefused,   // the target's address is not public (--push-allow-private)
  kConnect,   // name not resolved, connection refused or reset
  kTls,       // the handshake or the certificate failed
  kProtocol,  // an answer that is not HTTP, or none before the close
};
std::string_view PushFailureName(PushFailure f);  // "timeout", "refused", ...

struct PushResponse {
  int status = 0;  // 0: no answer (failure says why)
  PushFailure failure = PushFailure::kNone;
  std::string error;                       // for people, with failure
  std::string body_prefix;                 // the answer's first kBodyPrefixBytes bytes
  std::optional<std::string> retry_after;  // the Retry-After header, as sent
  TimeMs elapsed_ms = 0;
};

class PushClient {
 public:
  static constexpr size_t kBodyPrefixBytes = 1024;
  struct Options {
    // Connect to loopback, private, link-local ... addresses too.
    bool allow_private = false;
    // CA certificates (PEM) to verify targets with, instead of the
    // system's; empty: the system's.
    std::string ca_file;
    std::string user_agent = "delayq";
    // Most connections open to one host (0: no limit); requests beyond
    // wait for one.
    long max_host_connections = 0;
  };

  PushClient(boost::asio::io_context& io, Options options);
  // Ends every request in flight; their completions are not called.
  ~PushClient();
  PushClient(const PushClient&) = delete;
  PushClient& operator=(const PushClient&) = delete;

  // `done` runs once, on the loop, never inside Send; it must not destroy
  // the client.
  void Send(PushRequest request, std::function<void(PushResponse)> done);
  size_t in_flight() const { return calls_.size(); }
  // Connections curl opened so far (reuse keeps it low).
  uint64_t connections_opened() const { return opened_; }

 private:
  struct Call;
  struct Socket;
  struct Callbacks;  // libcurl's, in push_client.cc
  friend struct Callbacks;
  void Watch(const std::shared_ptr<Socket>& s);
  void Arm(const std::shared_ptr<Socket>& s, bool in);
  void Action(int fd, int events);
  void FailLater(std::function<void(PushResponse)> done, std::string why);
  void Finish();
  // curl's timer (CURLMOPT_TIMERFUNCTION): due in `timeout_ms`.
  void SetTimer(long timeout_ms);

  // Easy handles of finished requests, reset, for the next ones (each
  // curl_easy_init allocates and sets up several kilobytes).
  static constexpr size_t kSpareHandles = 256;

  boost::asio::io_context& io_;
  Options options_;
  CURLM* multi_ = nullptr;
  boost::asio::steady_timer timer_;
  // When timer_ is armed to end (only ever moved earlier: SetTimer).
  std::optional<std::chrono::steady_clock::time_point> timer_at_;
  bool timeout_posted_ = false;                   // a "time out now" is posted to the loop
  std::vector<void*> spare_;                      // CURL*
  std::map<void*, std::unique_ptr<Call>> calls_;  // by easy handle
  std::map<int, std::shared_ptr<Socket>> sockets_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  uint64_t opened_ = 0;
};

}  // namespace delayq::delivery

#endif  // DELAYQ_DELIVERY_PUSH_CLIENT_H_
