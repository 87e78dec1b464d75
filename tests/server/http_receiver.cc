#include "server/http_receiver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace delayq::testing {

HttpReceiver::HttpReceiver(Answerer answer) : answer_(std::move(answer)) {
  if (!answer_) answer_ = [](const Request&) { return Answer{}; };
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listener_, 512) != 0)
    return;
  socklen_t len = sizeof a;
  getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { Accept(); });
}

HttpReceiver::~HttpReceiver() {
  stopping_ = true;
  if (listener_ >= 0) ::shutdown(listener_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  if (listener_ >= 0) ::close(listener_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  for (std::thread& t : workers_) t.join();
}

void HttpReceiver::Accept() {
  while (!stopping_) {
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const int n = ++connections_;
    std::lock_guard<std::mutex> lock(mu_);
    open_fds_.push_back(fd);
    workers_.emplace_back([this, fd, n] { Serve(fd, n); });
  }
}

void HttpReceiver::Serve(int fd, int connection) {
  std::string in;
  char buf[65536];
  auto read_more = [&]() -> bool {
    while (!stopping_) {
      pollfd p{fd, POLLIN, 0};
      int r = ::poll(&p, 1, 100);
      if (r < 0) return false;
      if (r == 0) continue;
      ssize_t got = ::recv(fd, buf, sizeof buf, 0);
      if (got <= 0) return false;
      in.append(buf, static_cast<size_t>(got));
      return true;
    }
    return false;
  };
  bool open = true;
  while (open) {
    size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos)
      if (!read_more()) {
        open = false;
        break;
      }
    if (!open) break;
    Request req;
    req.connection = connection;
    const std::string head = in.substr(0, head_end);
    size_t line_end = head.find("\r\n");
    const std::string start = head.substr(0, line_end);
    req.method = start.substr(0, start.find(' '));
    req.target = start.substr(req.method.size() + 1, start.rfind(' ') - req.method.size() - 1);
    for (size_t at = line_end; at != std::string::npos && at < head.size();) {
      size_t next = head.find("\r\n", at + 2);
      std::string line =
          head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
      at = next;
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      size_t v = line.find_first_not_of(' ', colon + 1);
      req.headers[name] = v == std::string::npos ? "" : line.substr(v);
    }
    size_t body_len = 0;
    if (auto it = req.headers.find("content-length"); it != req.headers.end())
      body_len = std::stoul(it->second);
    in.erase(0, head_end + 4);
    while (in.size() < body_len)
      if (!read_more()) {
        open = false;
        break;
      }
    if (!open) break;
    req.body = in.substr(0, body_len);
    in.erase(0, body_len);
    req.at = std::chrono::steady_clock::now();
    Answer a = answer_(req);
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(req);
    }
    cv_.notify_all();
    if (a.hang) {
      while (read_more()) {
      }
      break;
    }
    if (a.delay.count() > 0) std::this_thread::sleep_for(a.delay);
    if (a.close) break;
    std::string out = "HTTP/1.1 " + std::to_string(a.status) +
                      " Answer\r\nContent-Length: " + std::to_string(a.body.size()) + "\r\n";
    for (const std::string& h : a.headers) out += h + "\r\n";
    out += "\r\n" + a.body;
    if (::send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) break;
  }
  ::shutdown(fd, SHUT_RDWR);
  std::lock_guard<std::mutex> lock(mu_);
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
  ::close(fd);
}

std::vector<HttpReceiver::Request> HttpReceiver::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

size_t HttpReceiver::WaitFor(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
  return requests_.size();
}

}  // namespace delayq::testing
