// Test helper: an HTTP/1.1 receiver on a free loopback port, for pushes to
// land on (docs/push.md). Each request is recorded (method, target, headers
// by lower-case name, body, arrival time, connection) and answered as the
// test's function says: a status, headers and a body, after a delay, or
// not at all (the connection closed, or left hanging). Keep-alive, one
// thread per connection.
#ifndef DELAYQ_TESTS_SERVER_HTTP_RECEIVER_H_
#define DELAYQ_TESTS_SERVER_HTTP_RECEIVER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace delayq::testing {

class HttpReceiver {
 public:
  struct Request {
    std::string method, target;
    std::map<std::string, std::string> headers;  // by lower-case name
    std::string body;
    std::chrono::steady_clock::time_point at;  // when its last byte came
    int connection = 0;                        // 1, 2, ... in accept order
  };
  struct Answer {
    int status = 200;
    std::vector<std::string> headers;  // "Name: value"
    std::string body;
    std::chrono::milliseconds delay{0};
    bool close = false;  // close the connection instead of answering
    bool hang = false;   // never answer (the client's timeout ends it)
  };
  using Answerer = std::function<Answer(const Request&)>;

  explicit HttpReceiver(Answerer answer = {});
  ~HttpReceiver();
  HttpReceiver(const HttpReceiver&) = delete;
  HttpReceiver& operator=(const HttpReceiver&) = delete;

  uint16_t port() const { return port_; }
  std::string url(const std::string& path = "/") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::vector<Request> requests() const;
  // Waits until `n` requests came (or the timeout): how many came.
  size_t WaitFor(size_t n, std::chrono::milliseconds timeout) const;
  int connections() const { return connections_.load(); }

 private:
  void Accept();
  void Serve(int fd, int connection);

  Answerer answer_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<Request> requests_;
  std::vector<int> open_fds_;
  std::thread acceptor_;
  std::vector<std::thread> workers_;
};

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_SERVER_HTTP_RECEIVER_H_
