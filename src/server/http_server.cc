#include "server/http_server.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
// GCC 12 with the sanitizers reports a false -Wmaybe-uninitialized inside
// Beast's parser (a boost::optional it fills before reading).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <charconv>
#include <optional>

namespace delayq::server {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

namespace {
constexpr size_t kReadChunk = 16 * 1024;
// Reads beyond the first in one go, when each fills the chunk.
constexpr int kMaxExtraReads = 16;
// Stop reading while this much input waits behind a request in flight.
constexpr size_t kMaxBufferedInput = 1024 * 1024;
// Stop reading while this much output waits for a slow client.
constexpr size_t kMaxPendingOutput = 4 * 1024 * 1024;
// Pipelined requests are not dispatched while this much reply waits to be
// sent: a client that sends and does not read gets no more than this.
constexpr size_t kMaxOutput = 256 * 1024;
constexpr std::chrono::seconds kSweepEvery{1};

void AppendUint(std::string& out, uint64_t v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(p - buf));
}

// What a connection past --max-connections is sent before it is closed.
std::string TooManyConnectionsReply() {
  std::string body =
      HttpErrorBody("too_many_connections", "too many connections; try again later") + "\n";
  std::string r = "HTTP/1.1 503 " + std::string(HttpReasonPhrase(503)) +
                  "\r\nContent-Type: application/json\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  return r + body;
}
}  // namespace

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(HttpServer& server, tcp::socket socket)
      : server_(server), socket_(std::move(socket)), last_active_(SteadyClock::now()) {
    boost::system::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    socket_.non_blocking(true, ec);
  }

  void Start() {
    NewParser();
    WaitReadable();
  }

  void CloseNow() { Close(); }

  // Finish the request in flight (a waiting long-poll is answered by the
  // API), then close.
  void Shutdown() {
    draining_ = true;
    if (!busy_ && !writing_ && out_.empty()) Close();
  }

  // Nothing in flight and quiet for `idle`.
  bool IdleFor(std::chrono::milliseconds idle, SteadyClock::time_point now) const {
    return !busy_ && !writing_ && out_.empty() && now - last_active_ >= idle;
  }

 private:
  void NewParser() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(server_.options_.max_header_bytes));
    parser_->body_limit(server_.options_.max_body_bytes);
    parser_->eager(true);
    continue_sent_ = false;
  }

  void WaitReadable() {
    if (reading_ || closed_ || peer_closed_) return;
    if (out_.size() + pending_.size() > kMaxPendingOutput) return;
    if ((busy_ || out_.size() >= kMaxOutput) && in_.size() - in_pos_ > kMaxBufferedInput) return;
    reading_ = true;
    socket_.async_read_some(asio::buffer(rbuf_),
                            [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                              self->reading_ = false;
                              self->OnRead(ec, n);
                            });
  }

  void OnRead(boost::system::error_code ec, size_t n) {
    if (closed_) return;
    if (!ec) {
      last_active_ = SteadyClock::now();
      Append(n);
      // The read filled the chunk: more may be waiting (a bounded amount).
      for (int i = 0; i < kMaxExtraReads && n == rbuf_.size(); ++i) {
        n = socket_.read_some(asio::buffer(rbuf_), ec);
        if (ec) break;
        Append(n);
      }
      if (ec == asio::error::would_block || ec == asio::error::try_again) ec = {};
    }
    if (ec == asio::error::eof) {
      peer_closed_ = true;
    } else if (ec) {
      return Close();
    }
    Run();
  }

  void Append(size_t n) {
    if (in_pos_ > 0 && in_pos_ == in_.size()) {
      in_.clear();
      in_pos_ = 0;
    }
    in_.append(rbuf_.data(), n);
  }

  void Run() {
    for (;;) {
      Process();
      if (closed_) return;
      if (peer_closed_ && busy_ && call_ != 0) {
        // A long-poll whose client is gone: nobody will read the answer.
        server_.api_->Cancel(call_);
        call_ = 0;
        return Close();
      }
      // Process stops at kMaxOutput of replies. When the kernel takes them
      // all at once the requests after them go on now; when it takes part,
      // the end of the write resumes us.
      const bool stopped_full = out_.size() >= kMaxOutput;
      Flush();
      if (closed_) return;
      if (!stopped_full || writing_) break;
    }
    if (peer_closed_) {
      if (!busy_ && !writing_) Close();
      return;
    }
    WaitReadable();
  }

  // Parses and runs the buffered requests, one at a time, until one is in
  // flight, the input runs out, kMaxOutput of replies wait, or the
  // connection is to close.
  void Process() {
    while (!busy_ && !close_after_ && !closed_ && out_.size() < kMaxOutput) {
      if (in_pos_ == in_.size()) break;
      boost::system::error_code ec;
      size_t used =
          parser_->put(asio::const_buffer(in_.data() + in_pos_, in_.size() - in_pos_), ec);
      in_pos_ += used;
      if (ec == http::error::need_more) {
        if (parser_->is_header_done() && !continue_sent_) {
          continue_sent_ = true;
          auto expect = parser_->get()[http::field::expect];
          if (expect.size() == 12 && (expect[0] == '1') && expect.substr(3) == "-continue")
            out_.append("HTTP/1.1 100 Continue\r\n\r\n");
        }
        if (in_pos_ > 0 && in_pos_ == in_.size()) {
          in_.clear();
          in_pos_ = 0;
        }
        break;
      }
      if (ec) return Reject(ec);
      if (!parser_->is_done()) continue;
      Dispatch();
    }
    if (in_pos_ == in_.size()) {
      in_.clear();
      in_pos_ = 0;
    } else if (in_pos_ > 64 * 1024) {
      in_.erase(0, in_pos_);
      in_pos_ = 0;
    }
  }

  // A request the parser refused: answer it, then close (the stream is
  // out of step).
  void Reject(boost::system::error_code ec) {
    HttpReply r;
    if (ec == http::error::header_limit) {
      r = HttpReply{431,
                    HttpErrorBody("header_too_large",
                                  "the request header is larger than " +
                                      std::to_string(server_.options_.max_header_bytes) + " bytes"),
                    {}};
    } else if (ec == http::error::body_limit) {
      r = HttpReply{413,
                    HttpErrorBody("payload_too_large",
                                  "the request body is larger than " +
                                      std::to_string(server_.options_.max_body_bytes) + " bytes"),
                    {}};
    } else {
      r = HttpReply{
          400, HttpErrorBody("bad_request", "malformed HTTP request: " + ec.message()), {}};
    }
    head_ = false;
    keep_alive_ = false;
    in_.clear();
    in_pos_ = 0;
    Write(r);
  }

  void Dispatch() {
    auto& req = parser_->get();
    keep_alive_ = parser_->keep_alive() && !draining_;
    http10_ = req.version() < 11;
    head_ = req.method() == http::verb::head;
    auto method = req.method_string();
    auto target = req.target();
    HttpRequest r{std::string_view(method.data(), method.size()),
                  std::string_view(target.data(), target.size()), req.body()};
    busy_ = true;
    in_handle_ = true;
    std::weak_ptr<HttpConnection> weak = weak_from_this();
    call_ = server_.api_->Handle(r, [weak](HttpReply reply) {
      auto self = weak.lock();
      if (self) self->OnReply(std::move(reply));
    });
    in_handle_ = false;
    if (!busy_) {
      call_ = 0;
      // Only now: the request's views pointed into the parser.
      if (!close_after_) NewParser();
    }
  }

  void OnReply(HttpReply reply) {
    if (closed_ || !busy_) return;
    busy_ = false;
    call_ = 0;
    Write(reply);
    if (close_after_) {
      in_.clear();
      in_pos_ = 0;
    }
    if (in_handle_) return;  // Dispatch makes the next parser; Process goes on
    if (!close_after_) NewParser();
    // Completed later (a backend completion): resume on the loop.
    if (wake_posted_) return;
    wake_posted_ = true;
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      self->wake_posted_ = false;
      if (!self->closed_) self->Run();
    });
  }

  void Write(const HttpReply& r) {
    bool close = !keep_alive_ || draining_;
    out_.append("HTTP/1.1 ");
    AppendUint(out_, static_cast<uint64_t>(r.status));
    out_.push_back(' ');
    out_.append(HttpReasonPhrase(r.status));
    out_.append("\r\nContent-Type: application/json\r\nContent-Length: ");
    AppendUint(out_, r.body.size() + 1);
    out_.append("\r\n");
    if (!r.allow.empty()) {
      out_.append("Allow: ");
      out_.append(r.allow);
      out_.append("\r\n");
    }
    if (close) {
      out_.append("Connection: close\r\n");
    } else if (http10_) {
      out_.append("Connection: keep-alive\r\n");
    }
    out_.append("\r\n");
    if (!head_) {
      out_.append(r.body);
      out_.push_back('\n');
    }
    if (close) close_after_ = true;
  }

  void Flush() {
    if (writing_ || closed_) return;
    if (out_.empty()) {
      if (close_after_ && !busy_) Close();
      return;
    }
    boost::system::error_code ec;
    size_t n = socket_.write_some(asio::buffer(out_), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      n = 0;
    } else if (ec) {
      return Close();
    }
    last_active_ = SteadyClock::now();
    if (n == out_.size()) {
      out_.clear();
      if (out_.capacity() > kMaxPendingOutput) std::string().swap(out_);
      if (close_after_ && !busy_) Close();
      return;
    }
    writing_ = true;
    pending_.assign(out_, n, std::string::npos);
    out_.clear();
    asio::async_write(socket_, asio::buffer(pending_),
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        self->writing_ = false;
                        if (self->closed_) return;
                        if (ec) return self->Close();
                        self->last_active_ = SteadyClock::now();
                        std::string().swap(self->pending_);
                        self->Run();
                      });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    if (busy_ && call_ != 0) server_.api_->Cancel(call_);
    call_ = 0;
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    server_.Forget(this);
  }

  HttpServer& server_;
  tcp::socket socket_;
  std::array<char, kReadChunk> rbuf_;
  std::string in_;     // received; in_pos_ onwards not parsed yet
  size_t in_pos_ = 0;  // (the parser keeps the body of a request it has begun)
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string out_;      // replies not sent yet
  std::string pending_;  // the rest of a write the kernel did not take at once
  HttpApi::CallId call_ = 0;
  SteadyClock::time_point last_active_;
  bool reading_ = false, writing_ = false, closed_ = false, draining_ = false;
  bool peer_closed_ = false, wake_posted_ = false;
  bool busy_ = false;       // a request is in flight
  bool in_handle_ = false;  // inside HttpApi::Handle: replies are synchronous
  bool keep_alive_ = true, http10_ = false, head_ = false;
  bool close_after_ = false;  // close once the replies are out
  bool continue_sent_ = false;
};

HttpServer::HttpServer(asio::io_context& io, ServerContext& ctx, HttpServerOptions options)
    : ctx_(ctx),
      options_(options),
      api_(std::make_unique<HttpApi>(ctx, options.api)),
      listener_(io, "HTTP", ctx, TooManyConnectionsReply()),
      sweep_(io) {}

HttpServer::~HttpServer() = default;

Status HttpServer::Listen(const std::string& address, uint16_t port) {
  return listener_.Listen(address, port);
}

uint16_t HttpServer::port() const { return listener_.port(); }

void HttpServer::Start() {
  listener_.Accept([this](tcp::socket socket) {
    return std::make_shared<HttpConnection>(*this, std::move(socket));
  });
  ArmSweep();
}

void HttpServer::ArmSweep() {
  if (options_.idle_timeout.count() <= 0 || listener_.stopping()) return;
  sweep_.expires_after(kSweepEvery);
  sweep_.async_wait([this](boost::system::error_code ec) {
    if (ec || listener_.stopping()) return;
    auto now = SteadyClock::now();
    std::vector<std::shared_ptr<HttpConnection>> idle;
    for (auto& [p, c] : listener_.conns())
      if (c->IdleFor(options_.idle_timeout, now)) idle.push_back(c);
    for (auto& c : idle) c->CloseNow();
    ArmSweep();
  });
}

std::vector<std::shared_ptr<HttpConnection>> HttpServer::StopAccepting() {
  sweep_.cancel();
  return listener_.StopAccepting();
}

void HttpServer::Stop() {
  auto all = StopAccepting();
  for (auto& c : all) c->Shutdown();
  api_->WakeWaiters();  // their replies leave with Connection: close
}

void HttpServer::CloseAll() {
  for (auto& c : StopAccepting()) c->CloseNow();
}

}  // namespace delayq::server
