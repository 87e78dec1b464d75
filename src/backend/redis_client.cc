#include "backend/redis_client.h"

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <deque>
#include <fstream>
#include <optional>

#include "backend/resp.h"

namespace delayq::backend {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// The reply objects hiredis's reader builds, carved out of blocks that are
// kept from reply to reply; a reply's whole tree goes at once when hiredis
// frees its root (after the reply's handler). hiredis's own objects cost a
// calloc per element and a malloc per string, and a free of each after
// every reply: with a batch's reply of a hundred elements that was a fifth
// of delayqd's time on the Redis backend (docs/redis-backend.md).
//
// The objects are redisReply structures, as hiredis's own. Each is preceded
// by a pointer to its arena: freeObject gets the object alone.
class ReplyArena {
 public:
  static const redisReplyObjectFunctions kFunctions;

  ReplyArena() = default;
  ReplyArena(const ReplyArena&) = delete;
  ReplyArena& operator=(const ReplyArena&) = delete;
  ~ReplyArena() { Reset(); }

  // The most one reply may take (its objects, strings and element
  // tables); a reply past it fails the connection (refused()).
  void set_limit(size_t bytes) { limit_ = bytes; }
  // Why the last reply was refused; empty if it was not.
  const std::string& refused() const { return refused_; }

 private:
  static constexpr size_t kBlock = 32 * 1024;
  static constexpr size_t kKeptBlocks = 8;  // kept after a reset: 256 KiB

  static ReplyArena* Of(const redisReadTask* task) {
    return static_cast<ReplyArena*>(task->privdata);
  }

  void* Alloc(size_t n) {
    n = (n + 7) & ~size_t{7};
    if (n > limit_ - std::min(limit_, reply_bytes_)) {
      // hiredis takes a null object for "out of memory" and stops.
      refused_ = "a reply of more than " + std::to_string(limit_) + " bytes";
      return nullptr;
    }
    reply_bytes_ += n;
    if (n > kBlock / 4) {
      large_.push_back(std::make_unique_for_overwrite<char[]>(n));
      return large_.back().get();
    }
    if (blocks_.empty() || used_ + n > kBlock) {
      if (blocks_.empty() || ++current_ == blocks_.size()) {
        blocks_.push_back(std::make_unique_for_overwrite<char[]>(kBlock));
        current_ = blocks_.size() - 1;
      }
      used_ = 0;
    }
    char* p = blocks_[current_].get() + used_;
    used_ += n;
    return p;
  }

  void Reset() {
    root_ = nullptr;
    reply_bytes_ = 0;
    current_ = 0;
    used_ = 0;
    large_.clear();
    if (blocks_.size() > kKeptBlocks) blocks_.resize(kKeptBlocks);
  }

  // A new object of the task's type, hung into its parent array; null
  // past the limit.
  redisReply* Object(const redisReadTask* task, int type) {
    redisReply* parent = nullptr;
    if (task->parent != nullptr) {
      parent = static_cast<redisReply*>(task->parent->obj);
      if (!Room(parent, static_cast<size_t>(task->idx))) return nullptr;
    }
    auto* slot = static_cast<ReplyArena**>(Alloc(sizeof(ReplyArena*) + sizeof(redisReply)));
    if (slot == nullptr) return nullptr;
    *slot = this;
    auto* r = new (slot + 1) redisReply{};
    r->type = type;
    if (parent == nullptr) {
      root_ = r;
    } else {
      parent->element[task->idx] = r;
    }
    return r;
  }

  // An array's element table grows as its elements arrive, not to the
  // count its header announces: "*2147483647\r\n" is 13 bytes from the
  // server. The table's capacity is kept in the word before it; a table
  // outgrown stays in the arena until the reply goes.
  static constexpr size_t kFirstElements = 16;
  static size_t& Capacity(redisReply* array) {
    return *reinterpret_cast<size_t*>(array->element - 1);
  }
  redisReply** Table(size_t capacity) {
    auto* words = static_cast<redisReply**>(Alloc((capacity + 1) * sizeof(redisReply*)));
    if (words == nullptr) return nullptr;
    *reinterpret_cast<size_t*>(words) = capacity;
    std::fill_n(words + 1, capacity, nullptr);
    return words + 1;
  }
  bool Room(redisReply* array, size_t idx) {
    if (idx < Capacity(array)) return true;
    const size_t capacity = std::min(std::max(idx + 1, 2 * Capacity(array)), array->elements);
    redisReply** table = Table(capacity);
    if (table == nullptr) return false;
    std::copy_n(array->element, Capacity(array), table);
    array->element = table;
    return true;
  }

  static void* CreateString(const redisReadTask* task, char* str, size_t len) {
    ReplyArena* a = Of(task);
    redisReply* r = a->Object(task, task->type);
    auto* copy = r != nullptr ? static_cast<char*>(a->Alloc(len + 1)) : nullptr;
    if (copy == nullptr) return nullptr;
    std::memcpy(copy, str, len);
    copy[len] = '\0';
    r->str = copy;
    r->len = len;
    return r;
  }
  static void* CreateArray(const redisReadTask* task, int elements) {
    ReplyArena* a = Of(task);
    redisReply* r = a->Object(task, REDIS_REPLY_ARRAY);
    if (r != nullptr && elements > 0) {
      const auto n = static_cast<size_t>(elements);
      r->element = a->Table(std::min(n, kFirstElements));
      if (r->element == nullptr) return nullptr;
      r->elements = n;
    }
    return r;
  }
  static void* CreateInteger(const redisReadTask* task, long long value) {
    redisReply* r = Of(task)->Object(task, REDIS_REPLY_INTEGER);
    if (r != nullptr) r->integer = value;
    return r;
  }
  static void* CreateNil(const redisReadTask* task) {
    return Of(task)->Object(task, REDIS_REPLY_NIL);
  }
  static void FreeObject(void* obj) {
    ReplyArena* a = *(static_cast<ReplyArena**>(obj) - 1);
    if (obj == a->root_) a->Reset();
  }

  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t current_ = 0, used_ = 0;
  size_t limit_ = SIZE_MAX, reply_bytes_ = 0;
  std::string refused_;
  std::vector<std::unique_ptr<char[]>> large_;
  redisReply* root_ = nullptr;
};

const redisReplyObjectFunctions ReplyArena::kFunctions = {
    &ReplyArena::CreateString, &ReplyArena::CreateArray, &ReplyArena::CreateInteger,
    &ReplyArena::CreateNil, &ReplyArena::FreeObject};

// Bytes read from the socket at a time (as hiredis reads).
constexpr size_t kReadSize = 16 * 1024;
// An output buffer that grew past this (a big command) is let go once sent.
constexpr size_t kKeptOutput = 1 << 20;

// OpenSSL's reason for its latest error ("no certificate or crl found"),
// and its error queue emptied.
std::string OpenSslReason() {
  unsigned long e = ERR_peek_last_error();
  const char* reason = e != 0 ? ERR_reason_error_string(e) : nullptr;
  ERR_clear_error();
  return reason != nullptr ? reason : "unknown OpenSSL error";
}

// Checks that `path` can be opened, before OpenSSL's vaguer words for it.
Status Readable(const std::string& what, const std::string& path) {
  if (std::ifstream(path).good()) return Status::Ok();
  return Status::InvalidArgument("cannot read the " + what + " " + path + ": " +
                                 std::strerror(errno));
}

// A pub/sub message or confirmation (subscriber mode): not the reply of a
// command in flight.
bool IsPush(const redisReply* r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) return false;
  const redisReply* kind = r->element[0];
  if (kind->type != REDIS_REPLY_STRING || kind->str == nullptr) return false;
  std::string_view k(kind->str, kind->len);
  return k == "message" || k == "subscribe" || k == "unsubscribe" || k == "pmessage" ||
         k == "psubscribe" || k == "punsubscribe";
}

}  // namespace

Result<std::shared_ptr<asio::ssl::context>> NewRedisTlsContext(const RedisTlsOptions& o) {
  if (o.cert_file.empty() != o.key_file.empty())
    return Status::InvalidArgument(
        "a TLS client certificate needs its key, and a key its "
        "certificate");
  std::shared_ptr<asio::ssl::context> ctx;
  try {
    ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("TLS: ") + e.what());
  }
  SSL_CTX* c = ctx->native_handle();
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
  // An encrypted key is refused rather than asked for on the terminal.
  SSL_CTX_set_default_passwd_cb(c, [](char*, int, int, void*) { return 0; });
  if (o.ca_file.empty()) {
    // The system's store; where there is none, every certificate is
    // refused ("unable to get local issuer certificate").
    SSL_CTX_set_default_verify_paths(c);
    ERR_clear_error();
  } else {
    if (Status st = Readable("CA file", o.ca_file); !st.ok()) return st;
    if (SSL_CTX_load_verify_locations(c, o.ca_file.c_str(), nullptr) != 1)
      return Status::InvalidArgument("cannot use the CA file " + o.ca_file + ": " +
                                     OpenSslReason());
  }
  if (!o.cert_file.empty()) {
    if (Status st = Readable("TLS certificate", o.cert_file); !st.ok()) return st;
    if (Status st = Readable("TLS key", o.key_file); !st.ok()) return st;
    if (SSL_CTX_use_certificate_chain_file(c, o.cert_file.c_str()) != 1)
      return Status::InvalidArgument("cannot use the TLS certificate " + o.cert_file + ": " +
                                     OpenSslReason());
    if (SSL_CTX_use_PrivateKey_file(c, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
      std::string reason = OpenSslReason();
      if (!mismatch)
        return Status::InvalidArgument("cannot use the TLS key " + o.key_file + ": " + reason);
    }
    if (SSL_CTX_check_private_key(c) != 1) {
      ERR_clear_error();
      return Status::InvalidArgument("the TLS key " + o.key_file + " does not match the " +
                                     "certificate " + o.cert_file);
    }
  }
  return ctx;
}

// One connection. The asynchronous operations on it hold it, so it
// outlives a client that let go of it; `client` is null from then on, and
// every completion looks at it first.
struct RedisClient::Link {
  Link(asio::io_context& io, RedisClient* c, std::shared_ptr<asio::ssl::context> tls_context)
      : client(c), context(std::move(tls_context)), resolver(io), timer(io) {
    if (context) {
      tls.emplace(io, *context);
    } else {
      plain.emplace(io);
    }
    reader = redisReaderCreateWithFunctions(
        const_cast<redisReplyObjectFunctions*>(&ReplyArena::kFunctions));
    if (reader != nullptr) reader->privdata = &arena;
    arena.set_limit(c->options_.max_reply);
  }
  ~Link() {
    if (reader != nullptr) redisReaderFree(reader);
  }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  tcp::socket& socket() { return tls ? tls->next_layer() : *plain; }
  // Ends every operation on it; their completions find `client` null.
  void Close() {
    client = nullptr;
    boost::system::error_code ignored;
    resolver.cancel();
    timer.cancel();
    socket().close(ignored);
  }

  RedisClient* client;  // null once the client let go of it
  std::shared_ptr<asio::ssl::context> context;
  tcp::resolver resolver;
  asio::steady_timer timer;  // the connect timeout, then the reply timeout
  std::optional<tcp::socket> plain;
  std::optional<asio::ssl::stream<tcp::socket>> tls;
  bool tcp_up = false;  // connected (TLS: the handshake may still be going)
  bool up = false;      // connected, TLS handshake done
  bool ready = false;   // and AUTH (or PING) and SELECT answered
  ReplyArena arena;     // where `reader` builds the replies
  redisReader* reader = nullptr;
  struct InFlight {
    Handler handler;
    std::chrono::steady_clock::time_point sent;
  };
  std::deque<InFlight> handlers;                      // of the commands in flight, oldest first
  std::chrono::steady_clock::time_point last_read{};  // bytes from Redis, last
  std::string out;                                    // queued, not yet being written
  std::string writing;                                // being written (asynchronously)
  bool write_in_flight = false;
  std::unique_ptr<char[]> buf = std::make_unique<char[]>(kReadSize);
};

namespace {

// A Redis host that vanished (powered off, cut off) fails the connection
// within about 30 s, not the kernel's 15 minutes of retransmissions (data
// sent and not acknowledged: TCP_USER_TIMEOUT) or 2 hours and more of
// silence (keepalives, which Linux sends only while nothing is
// unacknowledged); the commands in flight then get their null replies.
void KeepAlive(int fd) {
  const int on = 1, idle = 15, interval = 5, count = 3;
  const unsigned int user_timeout_ms = 30'000;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

// Why a TLS handshake failed, in OpenSSL's words: "certificate verify
// failed (hostname mismatch)", "wrong version number (is ... a TLS port?)".
std::string HandshakeError(const boost::system::error_code& ec, SSL* ssl,
                           const std::string& address) {
  std::string out = "TLS handshake failed: ";
  if (ec == asio::ssl::error::stream_truncated || ec == asio::error::eof)
    return out + "the server closed the connection (is " + address + " a TLS port?)";
  if (ec.category() != asio::error::get_ssl_category()) return out + ec.message();
  const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
  out += reason != nullptr ? reason : ec.message();
  long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) return out + " (" + X509_verify_cert_error_string(verify) + ")";
  return out + " (is " + address + " a TLS port?)";
}

// Why a connection that was up was lost: "Server closed the connection",
// "TLS: tlsv13 alert certificate required".
std::string ReadError(const boost::system::error_code& ec) {
  if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated)
    return "Server closed the connection";
  if (ec.category() != asio::error::get_ssl_category()) return ec.message();
  const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
  return std::string("TLS: ") + (reason != nullptr ? reason : ec.message());
}

}  // namespace

RedisClient::RedisClient(boost::asio::io_context& io, Options options)
    : io_(io), options_(std::move(options)), reconnect_timer_(io) {}

RedisClient::~RedisClient() {
  stopping_ = true;
  reconnect_timer_.cancel();
  if (link_) {
    // Handlers still due are dropped, not called: their owner is going.
    link_->Close();
    link_->handlers.clear();
    link_.reset();
  }
}

std::string RedisClient::address() const {
  return options_.host + ":" + std::to_string(options_.port);
}

void RedisClient::Start() { Connect(); }

void RedisClient::Connect() {
  if (stopping_ || link_) return;
  auto link = std::make_shared<Link>(io_, this, options_.tls);
  if (link->reader == nullptr) {
    last_error_ = "out of memory";
    return ScheduleReconnect();
  }
  link_ = link;
  link->timer.expires_after(options_.connect_timeout);
  link->timer.async_wait([this, link](const boost::system::error_code& ec) {
    // Ready meanwhile: a cancel that came after the expiry does not stop this.
    if (ec || link->client == nullptr || link->ready) return;
    Fail(link, link->up       ? "Redis did not answer the connection's first command in time"
               : link->tcp_up ? "TLS handshake timed out (is " + address() + " a TLS port?)"
                              : "connect timed out");
  });
  auto on_connect = [this, link](const boost::system::error_code& ec) {
    if (link->client == nullptr) return;
    if (ec) return Fail(link, ec.message());
    link->tcp_up = true;
    boost::system::error_code ignored;
    link->socket().set_option(tcp::no_delay(true), ignored);
    KeepAlive(link->socket().native_handle());
    if (!link->tls) return OnLinkUp(link);
    SSL* ssl = link->tls->native_handle();
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    boost::system::error_code not_ip;
    asio::ip::make_address(options_.host, not_ip);
    int named = 0;
    if (!not_ip) {
      // An address: the certificate must list it (an IP subjectAltName).
      named = X509_VERIFY_PARAM_set1_ip_asc(param, options_.host.c_str());
    } else {
      // A name: sent as SNI (never an address, RFC 6066), and matched
      // against the certificate's DNS names.
      SSL_set_tlsext_host_name(ssl, options_.host.c_str());
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      named = X509_VERIFY_PARAM_set1_host(param, options_.host.c_str(), 0);
    }
    // Not checked against a name is not checked at all: any certificate
    // of the CA would do ("fe80::1%eth0", which OpenSSL does not take).
    if (named != 1) {
      ERR_clear_error();
      return Fail(link, "cannot check a TLS certificate against " + options_.host);
    }
    link->tls->async_handshake(
        asio::ssl::stream_base::client, [this, link](const boost::system::error_code& hec) {
          if (link->client == nullptr) return;
          if (hec) return Fail(link, HandshakeError(hec, link->tls->native_handle(), address()));
          OnLinkUp(link);
        });
  };
  boost::system::error_code not_ip;
  asio::ip::address ip = asio::ip::make_address(options_.host, not_ip);
  if (!not_ip) {
    link->socket().async_connect(tcp::endpoint(ip, static_cast<uint16_t>(options_.port)),
                                 on_connect);
    return;
  }
  link->resolver.async_resolve(
      options_.host, std::to_string(options_.port),
      [this, link, on_connect](const boost::system::error_code& ec,
                               const tcp::resolver::results_type& results) {
        if (link->client == nullptr) return;
        if (ec) return Fail(link, "cannot resolve " + options_.host + ": " + ec.message());
        asio::async_connect(link->socket(), results,
                            [on_connect](const boost::system::error_code& cec,
                                         const tcp::endpoint&) { on_connect(cec); });
      });
}

void RedisClient::ScheduleReconnect() {
  if (stopping_) return;
  reconnect_timer_.expires_after(retry_);
  retry_ = std::min(retry_ * 2, std::chrono::milliseconds(2000));
  std::weak_ptr<bool> alive = alive_;
  reconnect_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (!ec && !alive.expired()) Connect();
  });
}

void RedisClient::OnLinkUp(const std::shared_ptr<Link>& link) {
  link->up = true;
  if (link->plain) {
    // Reads and writes are tried at once and must not block (ReadMore, Flush).
    boost::system::error_code ec;
    link->plain->non_blocking(true, ec);
    if (ec) return Fail(link, ec.message());
  }
  ReadMore(link);
  SendAuth();  // Ready once it (and SELECT) is answered
}

void RedisClient::Ready() {
  // Back to short waits only once Redis took the connection: a refused
  // password is tried again every 2 s, not every 100 ms.
  retry_ = std::chrono::milliseconds(100);
  link_->ready = true;
  link_->timer.cancel();
  WatchReplies(link_);
  connected_ = true;
  if (ever_connected_ && options_.counts != nullptr) options_.counts->reconnects++;
  ever_connected_ = true;
  if (options_.on_connect) options_.on_connect();
  if (options_.subscriber)
    for (const std::string& ch : channels_) SendSubscribe("SUBSCRIBE", ch);
}

void RedisClient::WatchReplies(const std::shared_ptr<Link>& link) {
  const std::chrono::milliseconds timeout = options_.reply_timeout;
  if (timeout.count() <= 0) return;
  // Looked at every quarter of the timeout: one wake-up per 2.5 s by
  // default, none per command.
  link->timer.expires_after(std::max(timeout / 4, std::chrono::milliseconds(1)));
  link->timer.async_wait([this, link, timeout](const boost::system::error_code& ec) {
    if (ec || link->client == nullptr) return;
    const auto now = std::chrono::steady_clock::now();
    // Silent for the timeout while a command waits: not a backlog Redis
    // works through, nor a long reply still arriving.
    if (!link->handlers.empty() &&
        now - std::max(link->handlers.front().sent, link->last_read) >= timeout)
      return Fail(link, "Redis sent nothing for " + std::to_string(timeout.count()) +
                            " ms while commands waited (--redis-timeout)");
    // A subscriber waits for messages with no command in flight: a Redis
    // stopped or cut off would leave it deaf for good. Silent for half the
    // timeout, it asks (PING, which Redis answers in subscribed mode too),
    // and that answer is watched as any command's.
    if (options_.subscriber && link->handlers.empty() && link == link_ &&
        now - link->last_read >= timeout / 2)
      SendNow(resp::Format(std::vector<std::string_view>{"PING"}), nullptr);
    WatchReplies(link);
  });
}

// The first command of every connection: AUTH with credentials, PING
// without, so that "connected" means Redis answered (not a TLS port taken
// for a plain one, nor a TLS 1.3 server that ends the connection right
// after the handshake for want of a client certificate).
void RedisClient::SendAuth() {
  const bool auth = !options_.auth.password.empty();
  std::vector<std::string_view> argv = {auth ? "AUTH" : "PING"};
  if (auth && !options_.auth.user.empty()) argv.push_back(options_.auth.user);
  if (auth) argv.push_back(options_.auth.password);
  std::weak_ptr<Link> sent_on = link_;
  SendNow(resp::Format(argv), [this, sent_on, auth](const redisReply* r) {
    std::shared_ptr<Link> link = sent_on.lock();
    if (r == nullptr || link == nullptr || link != link_) return;  // lost meanwhile
    if (r->type != REDIS_REPLY_ERROR) {
      last_error_.clear();
      return options_.db != 0 ? SendSelect() : Ready();
    }
    // Redis's words ("WRONGPASS invalid username-password pair or user is
    // disabled.", "NOAUTH Authentication required.") name no secret. A
    // server that does not know AUTH (renamed, a proxy) quotes the command
    // back with its arguments, the password cut at 128 bytes: not shown.
    // The connection goes; it is tried again.
    std::string words(r->str, r->len);
    if (auth && words.find("unknown command") != std::string::npos)
      words = "the server does not know AUTH (its reply quotes the password: not shown)";
    Fail(link, (auth ? "AUTH refused: " : "Redis refused: ") + words);
  });
}

// The database, before the connection counts as connected: a command
// sent after a SELECT that Redis refused ("DB index is out of range", a
// proxy that has none) would run in database 0.
void RedisClient::SendSelect() {
  const std::string db = std::to_string(options_.db);
  std::weak_ptr<Link> sent_on = link_;
  const std::string_view argv[] = {"SELECT", db};
  SendNow(resp::Format(argv), [this, sent_on, db](const redisReply* r) {
    std::shared_ptr<Link> link = sent_on.lock();
    if (r == nullptr || link == nullptr || link != link_) return;  // lost meanwhile
    if (r->type != REDIS_REPLY_ERROR) return Ready();
    Fail(link, "Redis refused: SELECT " + db + ": " + std::string(r->str, r->len));
  });
}

void RedisClient::Fail(const std::shared_ptr<Link>& link, std::string error) {
  if (link->client == nullptr || link != link_) return;
  // A server that does not know AUTH (renamed, a proxy) may quote it back
  // with its arguments ("unknown command 'AUTH', with args beginning
  // with: 'worker' '...'"): the words are kept, the password is not.
  if (const std::string& pw = options_.auth.password; !pw.empty())
    for (size_t at = 0; (at = error.find(pw, at)) != std::string::npos; at += 3)
      error.replace(at, pw.size(), "***");
  // Lost before the first command was answered, with no word from Redis.
  if (link->plain && link->up && !connected_ && !error.starts_with("AUTH refused: ") &&
      !error.starts_with("Redis refused: "))
    error += " before Redis answered (is " + address() + " a TLS port? Then rediss://)";
  link->Close();
  link_.reset();
  last_error_ = std::move(error);
  bool was = connected_;
  connected_ = false;
  // The commands in flight get null replies, in order; then on_disconnect.
  std::deque<Link::InFlight> handlers = std::move(link->handlers);
  std::weak_ptr<bool> alive = alive_;
  for (Link::InFlight& f : handlers) {
    if (f.handler) f.handler(nullptr);
    if (alive.expired()) return;
  }
  if (was && options_.on_disconnect) options_.on_disconnect(last_error_);
  if (alive.expired()) return;
  ScheduleReconnect();
}

void RedisClient::ReadMore(const std::shared_ptr<Link>& link) {
  if (link->tls) {
    link->tls->async_read_some(asio::buffer(link->buf.get(), kReadSize),
                               [this, link](const boost::system::error_code& ec, size_t n) {
                                 if (link->client == nullptr) return;
                                 if (ec) return Fail(link, ReadError(ec));
                                 OnRead(link, n);
                               });
    return;
  }
  // Plain TCP: wait for readiness, then one read, as hiredis did: Asio's
  // async_read_some would first try a read that finds nothing.
  link->plain->async_wait(
      tcp::socket::wait_read, [this, link](const boost::system::error_code& ec) {
        if (link->client == nullptr) return;
        if (ec) return Fail(link, ReadError(ec));
        boost::system::error_code rec;
        size_t n = link->plain->read_some(asio::buffer(link->buf.get(), kReadSize), rec);
        if (rec == asio::error::would_block || rec == asio::error::try_again) return ReadMore(link);
        if (rec) return Fail(link, ReadError(rec));
        OnRead(link, n);
      });
}

void RedisClient::OnRead(const std::shared_ptr<Link>& link, size_t n) {
  if (options_.reply_timeout.count() > 0) link->last_read = std::chrono::steady_clock::now();
  if (redisReaderFeed(link->reader, link->buf.get(), n) != REDIS_OK)
    return Fail(link, "out of memory");
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(link->reader, &reply) != REDIS_OK) {
      if (!link->arena.refused().empty()) return Fail(link, link->arena.refused());
      return Fail(link, std::string("protocol error: ") + link->reader->errstr);
    }
    if (reply == nullptr) break;
    Dispatch(link, static_cast<const redisReply*>(reply));
    ReplyArena::kFunctions.freeObject(reply);
    // The handler may have dropped the connection, or the client.
    if (link->client == nullptr) return;
  }
  // What hiredis keeps is the part of a string still coming ("$4000000000\r\n"
  // waits for four gigabytes): bounded as the replies are.
  if (link->reader->len - link->reader->pos > options_.max_reply)
    return Fail(link, "a reply of more than " + std::to_string(options_.max_reply) + " bytes");
  ReadMore(link);
}

void RedisClient::Dispatch(const std::shared_ptr<Link>& link, const redisReply* r) {
  if (options_.subscriber && IsPush(r)) return OnPubSub(r);
  if (link->handlers.empty()) return;  // e.g. an error a SUBSCRIBE got
  Link::InFlight f = std::move(link->handlers.front());
  link->handlers.pop_front();
  if (options_.counts != nullptr)
    options_.counts->duration.Observe(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::steady_clock::now() - f.sent)
                                          .count());
  if (f.handler) f.handler(r);
}

void RedisClient::Command(const std::vector<std::string_view>& argv, Handler done) {
  Send(resp::Format(argv), std::move(done));
}

void RedisClient::Send(std::string_view command, Handler done) {
  if (!connected_ || !link_) {
    boost::asio::post(io_, [done = std::move(done)] { done(nullptr); });
    return;
  }
  SendNow(command, std::move(done));
}

void RedisClient::SendNow(std::string_view command, Handler done) {
  if (options_.counts != nullptr) options_.counts->calls++;
  link_->handlers.push_back({std::move(done), std::chrono::steady_clock::now()});
  link_->out.append(command);
  Flush(link_);
}

void RedisClient::Flush(const std::shared_ptr<Link>& link) {
  if (link->write_in_flight || link->out.empty()) return;
  if (link->plain) {
    // Written at once: waiting for write readiness cost an epoll_ctl per
    // command and held the command back until the loop's next epoll_wait,
    // behind every handler ready by then. What the socket does not take,
    // and any error, is left to the asynchronous write.
    boost::system::error_code ec;
    size_t n = link->plain->write_some(asio::buffer(link->out), ec);
    if (!ec && n == link->out.size()) {
      link->out.clear();
      return;
    }
    if (!ec) link->out.erase(0, n);
  }
  WriteAsync(link);
}

void RedisClient::WriteAsync(const std::shared_ptr<Link>& link) {
  link->write_in_flight = true;
  link->writing.swap(link->out);
  auto done = [this, link](const boost::system::error_code& ec, size_t) {
    if (link->client == nullptr) return;
    link->write_in_flight = false;
    if (link->writing.capacity() > kKeptOutput) {
      std::string().swap(link->writing);
    } else {
      link->writing.clear();
    }
    if (ec) return Fail(link, ec.message());
    Flush(link);
  };
  if (link->tls) {
    asio::async_write(*link->tls, asio::buffer(link->writing), done);
  } else {
    asio::async_write(*link->plain, asio::buffer(link->writing), done);
  }
}

void RedisClient::OnPubSub(const redisReply* r) {
  std::string_view kind(r->element[0]->str, r->element[0]->len);
  const redisReply* ch = r->element[1];
  if (kind == "subscribe" && ch->str != nullptr && options_.on_subscribed) {
    options_.on_subscribed(std::string_view(ch->str, ch->len));
    return;
  }
  if (kind != "message" || !options_.on_message || ch->str == nullptr) return;
  const redisReply* msg = r->element[2];
  options_.on_message(std::string_view(ch->str, ch->len),
                      msg->str != nullptr ? std::string_view(msg->str, msg->len) : "");
}

void RedisClient::SendSubscribe(const char* verb, const std::string& channel) {
  if (!connected_ || !link_) return;
  // No handler: Redis answers with pushes (OnPubSub), not replies.
  std::string_view argv[2] = {verb, channel};
  link_->out.append(resp::Format(argv));
  Flush(link_);
}

void RedisClient::Subscribe(const std::string& channel) {
  if (!channels_.insert(channel).second) return;
  SendSubscribe("SUBSCRIBE", channel);
}

void RedisClient::Unsubscribe(const std::string& channel) {
  if (channels_.erase(channel) == 0) return;
  SendSubscribe("UNSUBSCRIBE", channel);
}

}  // namespace delayq::backend
