#include "server/http_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <exception>

#include "server/byte_buffer.h"
#include "server/front_door.h"
#include "server/http_request_reader.h"
#include "server/tls_session.h"

namespace delayq::server {

namespace asio = boost::asio;
using asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

namespace {
constexpr size_t kReadChunk = 16 * 1024;
// Reads beyond the first in one go, when each fills the chunk.
constexpr int kMaxExtraReads = 16;
// Stop reading while this much input waits behind a request in flight.
constexpr size_t kMaxBufferedInput = 256 * 1024;
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

// A reply sent to a connection that is then closed, before it ran any
// request.
std::string RefusalReply(int status, std::string_view code, std::string_view message) {
  std::string body = HttpErrorBody(code, message) + "\n";
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " +
                  std::string(HttpReasonPhrase(status)) + "\r\nContent-Type: application/json\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  return r + body;
}

// What a connection past --max-connections is sent before it is closed.
std::string TooManyConnectionsReply() {
  return RefusalReply(503, "too_many_connections", "too many connections; try again later");
}

// What a plaintext client from outside the trusted networks is sent when
// TLS is required (--tls-required) before it is closed.
std::string TlsRequiredReply() {
  return RefusalReply(403, "tls_required", "this server requires TLS (https://) from your network");
}
}  // namespace

// One connection: plaintext, or TLS through a TlsSession (tls_session.h)
// over the same socket. Either way the socket is read and written the same
// way (more reads at once when a read filled the chunk, each write tried
// at once, non-blocking); TLS only decrypts what came and encrypts what
// leaves, and says what the handshake has to say with the replies.
class HttpConnection : public ListenerConnection,
                       public std::enable_shared_from_this<HttpConnection> {
 public:
  // `tls`: the context in force when the client came, for a TLS client
  // (its handshake is still to run); null for plaintext.
  HttpConnection(HttpServer& server, tcp::socket socket,
                 std::shared_ptr<asio::ssl::context> tls = nullptr)
      : server_(server),
        socket_(std::move(socket)),
        reader_(server.options_.max_header_bytes, server.options_.max_body_bytes),
        caller_(server.ctx_.access, PeerAddress(socket_)),
        last_active_(SteadyClock::now()) {
    if (tls != nullptr) tls_ = std::make_unique<TlsSession>(std::move(tls));
    server_.ctx_.counters.http_connections++;
    server_.ctx_.counters.total_http_connections++;
    boost::system::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    socket_.non_blocking(true, ec);
  }

  void Start() override {
    if (tls_ != nullptr) {
      if (!tls_->ok()) return Close();
      handshake_deadline_.Arm(socket_.get_executor(), server_.ctx_.tls_handshake_timeout,
                              [weak = weak_from_this()](const std::string& why) {
                                auto self = weak.lock();
                                if (self == nullptr || self->closed_ || self->tls_->established())
                                  return;
                                self->server_.ctx_.warn.Warn("tls_handshake_timeout",
                                                             "protocol=http peer=" + self->Peer() +
                                                                 " error=\"" + why + "\"");
                                self->Close();
                              });
    }
    WaitReadable();
  }

  void CloseNow() override { Close(); }

  // Finish the request in flight (a waiting long-poll is answered by the
  // API), then close.
  void Shutdown() override {
    draining_ = true;
    if (!busy_ && !writing_ && out_.empty()) Close();
  }

  // The server's periodic look at the connection: closes it when it sat
  // idle too long, answers 408 when a request is taking too long to
  // arrive, and cancels a waiting request whose client hung up.
  void Sweep(SteadyClock::time_point now) override {
    if (closed_) return;
    const HttpServerOptions& o = server_.options_;
    if (busy_) {
      if (call_ != 0 && !reading_ && PeerHungUp()) {
        // Its input is not read (a backlog behind the long-poll, or replies
        // it does not read), so the end of stream would never be seen.
        server_.api_->Cancel(call_);
        call_ = 0;
        Close();
      }
      return;
    }
    if (reader_.begun() && !close_after_) {
      if (!reader_.header_done() && o.header_timeout.count() > 0 &&
          now - reader_.begun_at() >= o.header_timeout)
        return TimedOut("header", o.header_timeout);
      if (reader_.header_done() && o.body_timeout.count() > 0 &&
          now - reader_.header_done_at() >= o.body_timeout)
        return TimedOut("body", o.body_timeout);
    }
    if (o.idle_timeout.count() > 0 && !writing_ && out_.empty() &&
        now - last_active_ >= o.idle_timeout)
      Close();
  }

 private:
  void WaitReadable() {
    if (reading_ || closed_ || peer_closed_) return;
    if (out_.size() + pending_.size() > kMaxPendingOutput) return;
    if ((busy_ || out_.size() >= kMaxOutput || server_.ctx_.RepliesOverBudget()) &&
        reader_.buffered() > kMaxBufferedInput)
      return;
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
      if (!Take(n)) return;
      // The read filled the chunk: more may be waiting (a bounded amount).
      for (int i = 0; i < kMaxExtraReads && n == rbuf_.size(); ++i) {
        n = socket_.read_some(asio::buffer(rbuf_), ec);
        if (ec) break;
        if (!Take(n)) return;
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

  // Takes the n bytes a read brought: the request bytes, or, over TLS,
  // the records that carry them. False when the connection closed (a TLS
  // failure).
  bool Take(size_t n) {
    if (tls_ == nullptr) {
      reader_.Append(std::string_view(rbuf_.data(), n));
      return true;
    }
    const TlsSession::State state = tls_->Decrypt(std::string_view(rbuf_.data(), n), plain_);
    if (!plain_.empty()) {
      reader_.Append(plain_.view());
      plain_.Consume(plain_.size());
    }
    if (state == TlsSession::State::kFailed) {
      server_.ctx_.warn.Warn(tls_->failure_event(),
                             "protocol=http peer=" + Peer() + " error=\"" + tls_->error() + "\"");
      if (!writing_) tls_->SendAlert(socket_.native_handle());
      Close();
      return false;
    }
    // (The client's close_notify: no more requests; the replies to those
    // before it still go out.)
    if (state == TlsSession::State::kClosed) peer_closed_ = true;
    if (tls_->established()) handshake_deadline_.Cancel();
    return true;
  }

  // Bytes of replies this connection holds (not yet taken by the kernel,
  // or in a write under way).
  size_t Held() const { return out_.size() + sealed_.size() + pending_.size(); }

  // Brings the server's count of the replies held up to date.
  void Account() {
    const size_t held = closed_ ? 0 : Held();
    if (held != accounted_) server_.ctx_.AccountReplies(accounted_, held);
    accounted_ = held;
  }

  void Run() {
    for (;;) {
      Process();
      Account();
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
      const bool stopped_full = out_.size() >= kMaxOutput || budget_stop_;
      Flush();
      Account();
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
    budget_stop_ = false;
    while (!busy_ && !close_after_ && !closed_ && out_.size() < kMaxOutput) {
      // Past the server's reply budget (--max-reply-memory), a connection
      // that holds replies runs no request until its client takes them.
      if (server_.ctx_.RepliesOverBudget() && Held() > 0) {
        budget_stop_ = reader_.buffered() > 0;
        break;
      }
      HttpRequestReader::Result r = reader_.Parse(SteadyClock::now(), &out_);
      if (r == HttpRequestReader::Result::kNeedMore) break;
      if (r == HttpRequestReader::Result::kRefused) {
        if (!reader_.exception().empty())
          server_.ctx_.warn.Warn("http_parser_exception",
                                 "peer=" + Peer() + " " + reader_.exception());
        return Refuse(reader_.refusal());
      }
      Dispatch();
    }
  }

  // Answers `r` and closes once it is sent; nothing more is read.
  void Refuse(const HttpReply& r) {
    head_ = false;
    keep_alive_ = false;
    reader_.Discard();
    Write(r);
  }

  void TimedOut(const char* part, std::chrono::milliseconds limit) {
    server_.ctx_.warn.Warn(std::string("http_") + part + "_timeout",
                           "peer=" + Peer() + " timeout_ms=" + std::to_string(limit.count()));
    Refuse(HttpReply{408,
                     HttpErrorBody("request_timeout", std::string("the request ") + part +
                                                          " did not arrive within " +
                                                          std::to_string(limit.count()) + " ms"),
                     {}});
    Run();
  }

  // The client shut its side or the connection broke (POLLRDHUP is seen
  // even while unread input waits ahead of the end).
  bool PeerHungUp() {
    pollfd p{socket_.native_handle(), POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }

  std::string Peer() const {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    return ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  void Dispatch() {
    HttpRequestReader::Request req = reader_.request();
    keep_alive_ = req.keep_alive && !draining_;
    http10_ = req.http10;
    head_ = req.head;
    HttpRequest r{req.method, req.target, req.body, req.authorization, &caller_};
    busy_ = true;
    in_handle_ = true;
    std::weak_ptr<HttpConnection> weak = weak_from_this();
    try {
      call_ = server_.api_->Handle(r, [weak](HttpReply reply) {
        auto self = weak.lock();
        if (self) self->OnReply(std::move(reply));
      });
    } catch (const std::exception& e) {
      // A fault of ours (an allocation that failed, say): this request ends,
      // the server goes on.
      in_handle_ = false;
      busy_ = false;
      call_ = 0;
      server_.ctx_.warn.Warn("http_handler_exception",
                             "peer=" + Peer() + " what=\"" + std::string(e.what()) + "\"");
      return Refuse(HttpReply{
          500, HttpErrorBody("internal", "the request failed: " + std::string(e.what())), {}});
    }
    in_handle_ = false;
    if (!busy_) {
      call_ = 0;
      // Only now: the request's views pointed into the reader.
      if (!close_after_) reader_.Next();
    }
  }

  void OnReply(HttpReply reply) {
    if (closed_ || !busy_) return;
    busy_ = false;
    call_ = 0;
    Write(reply);
    if (close_after_) reader_.Discard();
    if (in_handle_) return;  // Dispatch moves the reader on; Process goes on
    if (!close_after_) reader_.Next();
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
    // A limit refused the client (--max-topics, --max-memory): one log line
    // per cause and 10 s, whichever protocol.
    if (r.status == 503 && r.body.find("\"resource_exhausted\"") != std::string::npos)
      server_.ctx_.warn.Warn("resource_exhausted", "protocol=http");
    // One allocation for a large reply, not a doubling that copies it.
    if (r.body.size() > 64 * 1024) out_.reserve(out_.size() + r.body.size() + 256);
    out_.append("HTTP/1.1 ");
    AppendUint(out_, static_cast<uint64_t>(r.status));
    out_.push_back(' ');
    out_.append(HttpReasonPhrase(r.status));
    // A JSON body is followed by a newline; any other goes out as it is.
    const bool newline = r.content_type == kJsonContentType;
    out_.append("\r\nContent-Type: ");
    out_.append(r.content_type);
    out_.append("\r\nContent-Length: ");
    AppendUint(out_, r.body.size() + (newline ? 1 : 0));
    out_.append("\r\n");
    if (!r.allow.empty()) {
      out_.append("Allow: ");
      out_.append(r.allow);
      out_.append("\r\n");
    }
    out_.append(r.headers);
    if (close) {
      out_.append("Connection: close\r\n");
    } else if (http10_) {
      out_.append("Connection: keep-alive\r\n");
    }
    out_.append("\r\n");
    if (!head_) {
      out_.append(r.body);
      if (newline) out_.push_back('\n');
    }
    if (close) close_after_ = true;
  }

  void Flush() {
    if (writing_ || closed_) return;
    // What goes on the wire: the replies themselves, or, over TLS, what
    // TLS has to say (the handshake's messages) and the replies as
    // records. Nothing is encrypted before the handshake is done.
    std::string* wire = &out_;
    if (tls_ != nullptr) {
      tls_->TakeOutput(sealed_);
      if (!out_.empty() && tls_->established()) {
        tls_->Encrypt(out_, sealed_);
        out_.clear();
        if (out_.capacity() > kMaxPendingOutput) std::string().swap(out_);
      }
      wire = &sealed_;
    }
    if (wire->empty()) {
      if (out_.empty() && close_after_ && !busy_) Close();
      return;
    }
    boost::system::error_code ec;
    size_t n = socket_.write_some(asio::buffer(*wire), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      n = 0;
    } else if (ec) {
      return Close();
    }
    last_active_ = SteadyClock::now();
    if (n == wire->size()) {
      wire->clear();
      if (wire->capacity() > kMaxPendingOutput) std::string().swap(*wire);
      if (out_.empty() && close_after_ && !busy_) Close();
      return;
    }
    // The rest waits in pending_: moved there, not copied.
    writing_ = true;
    pending_.swap(*wire);
    wire->clear();
    asio::async_write(socket_, asio::buffer(pending_.data() + n, pending_.size() - n),
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        self->writing_ = false;
                        if (self->closed_) return;
                        if (ec) return self->Close();
                        self->last_active_ = SteadyClock::now();
                        std::string().swap(self->pending_);
                        self->Account();
                        self->Run();
                      });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    server_.ctx_.counters.http_connections--;
    Account();
    if (busy_ && call_ != 0) server_.api_->Cancel(call_);
    call_ = 0;
    handshake_deadline_.Cancel();
    if (tls_ != nullptr && tls_->established() && !writing_) {
      // TLS's goodbye, if the kernel takes it now: the client can tell
      // the end of the replies from a cut.
      tls_->Close();
      std::string bye;
      tls_->TakeOutput(bye);
      if (!bye.empty())
        ::send(socket_.native_handle(), bye.data(), bye.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    server_.Forget(this);
  }

  HttpServer& server_;
  tcp::socket socket_;
  std::unique_ptr<TlsSession> tls_;          // TLS clients only
  TlsHandshakeDeadline handshake_deadline_;  // TLS
  std::array<char, kReadChunk> rbuf_;
  ByteBuffer plain_;    // TLS: what the records brought, on its way to reader_
  std::string sealed_;  // TLS: records (and the handshake's messages) not sent yet
  HttpRequestReader reader_;
  Caller caller_;        // who asks (access.h): authenticated anew by each request
  std::string out_;      // replies not sent yet
  std::string pending_;  // the rest of a write the kernel did not take at once
  HttpApi::CallId call_ = 0;
  size_t accounted_ = 0;      // Held() as the server counts it (Account)
  bool budget_stop_ = false;  // Process stopped at the reply budget
  SteadyClock::time_point last_active_;
  bool reading_ = false, writing_ = false, closed_ = false, draining_ = false;
  bool peer_closed_ = false, wake_posted_ = false;
  bool busy_ = false;       // a request is in flight
  bool in_handle_ = false;  // inside HttpApi::Handle: replies are synchronous
  bool keep_alive_ = true, http10_ = false, head_ = false;
  bool close_after_ = false;  // close once the replies are out
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
  if (ctx_.tls == nullptr) {
    listener_.Accept([this](tcp::socket socket) {
      return std::make_shared<HttpConnection>(*this, std::move(socket));
    });
    return ArmSweep();
  }
  // TLS and plaintext on one port: a front door tells them apart.
  doors_ = std::make_unique<FrontDoorHooks>();
  doors_->protocol = "http";
  doors_->tls_required_reply = TlsRequiredReply();
  doors_->first_byte_timeout = options_.idle_timeout;
  doors_->plain = [this](tcp::socket socket) -> std::shared_ptr<ListenerConnection> {
    return std::make_shared<HttpConnection>(*this, std::move(socket));
  };
  doors_->tls_socket = [this](std::shared_ptr<asio::ssl::context> tls,
                              tcp::socket socket) -> std::shared_ptr<ListenerConnection> {
    return std::make_shared<HttpConnection>(*this, std::move(socket), std::move(tls));
  };
  doors_->replace = [this](ListenerConnection* old, std::shared_ptr<ListenerConnection> next) {
    listener_.Replace(old, std::move(next));
  };
  doors_->forget = [this](ListenerConnection* c) { listener_.Forget(c); };
  listener_.Accept([this](tcp::socket socket) -> std::shared_ptr<ListenerConnection> {
    return std::make_shared<FrontDoor>(ctx_, *doors_, std::move(socket));
  });
  ArmSweep();
}

void HttpServer::ArmSweep() {
  if (listener_.stopping()) return;
  sweep_.expires_after(kSweepEvery);
  sweep_.async_wait([this](boost::system::error_code ec) {
    if (ec || listener_.stopping()) return;
    auto now = SteadyClock::now();
    // Sweeping may close connections, which edits the set: a copy.
    std::vector<std::shared_ptr<ListenerConnection>> all;
    all.reserve(listener_.conns().size());
    for (auto& [p, c] : listener_.conns()) all.push_back(c);
    for (auto& c : all) c->Sweep(now);
    ArmSweep();
  });
}

std::vector<std::shared_ptr<ListenerConnection>> HttpServer::StopAccepting() {
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
