#include "delivery/push_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <utility>

#include "delivery/outbound.h"

namespace delayq::delivery {

namespace {

// curl_global_init is not thread-safe before 7.84; once per process.
void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool HeaderIs(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  return true;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' '))
    s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

std::string_view PushFailureName(PushFailure f) {
  switch (f) {
    case PushFailure::kNone:
      return "none";
    case PushFailure::kTimeout:
      return "timeout";
    case PushFailure::kRefused:
      return "refused";
    case PushFailure::kConnect:
      return "connect";
    case PushFailure::kTls:
      return "tls";
    case PushFailure::kProtocol:
      return "protocol";
  }
  return "unknown";
}

struct PushClient::Call {
  PushClient* client = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  PushRequest request;
  std::function<void(PushResponse)> done;
  PushResponse response;
  std::string refused;  // why an address was refused
  bool opened = false;  // a socket was opened for it (an address passed)
  std::chrono::steady_clock::time_point start;
  char error[CURL_ERROR_SIZE] = {};

  ~Call() {
    if (headers != nullptr) curl_slist_free_all(headers);
    if (easy != nullptr) curl_easy_cleanup(easy);
  }
};

// A socket curl asked us to watch: the descriptor is curl's (it opens and
// closes it); the stream_descriptor only waits on it and is released, not
// closed, when curl is done with it.
struct PushClient::Socket {
  explicit Socket(boost::asio::io_context& io, int fd) : sd(io, fd), fd(fd) {}
  boost::asio::posix::stream_descriptor sd;
  int fd;
  int want = 0;  // CURL_POLL_IN / OUT / INOUT
  bool reading = false, writing = false;
  bool foreign = false;  // curl opened it, not OpenSocket
};

struct PushClient::Callbacks {
  static int OnSocket(CURL*, curl_socket_t fd, int what, void* self, void*) {
    auto* c = static_cast<PushClient*>(self);
    auto it = c->sockets_.find(fd);
    if (what == CURL_POLL_REMOVE) {
      if (it != c->sockets_.end()) {
        // A wait still pending ends by itself and, wanted no more, is not
        // made again; not cancelled, so that curl wanting the socket again
        // meanwhile finds it still waited on. One of curl's own sockets
        // goes now: no CloseSocket comes for it.
        it->second->want = 0;
        if (it->second->foreign) {
          boost::system::error_code ignored;
          it->second->sd.cancel(ignored);
          it->second->sd.release();
          c->sockets_.erase(it);
        }
      }
      return 0;
    }
    if (it == c->sockets_.end()) {  // curl's own (its resolver's wake-up): watched too
      std::shared_ptr<Socket> s;
      try {
        s = std::make_shared<Socket>(c->io_, fd);
      } catch (const std::exception&) {
        return -1;  // not watchable: curl fails the transfer
      }
      s->foreign = true;
      it = c->sockets_.emplace(fd, std::move(s)).first;
    }
    it->second->want = what;
    c->Watch(it->second);
    return 0;
  }

  static int OnTimer(CURLM*, long timeout_ms, void* self) {
    static_cast<PushClient*>(self)->SetTimer(timeout_ms);
    return 0;
  }

  // Every connection: its address checked, then the socket made and
  // watched from the start (curl tells what to wait for next).
  static curl_socket_t OpenSocket(void* arg, curlsocktype, curl_sockaddr* a) {
    auto* call = static_cast<Call*>(arg);
    PushClient* c = call->client;
    if (!c->options_.allow_private) {
      std::optional<boost::asio::ip::address> ip;
      if (a->family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&a->addr);
        ip = boost::asio::ip::address_v4(ntohl(in->sin_addr.s_addr));
      } else if (a->family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a->addr);
        boost::asio::ip::address_v6::bytes_type b;
        std::memcpy(b.data(), &in6->sin6_addr, b.size());
        ip = boost::asio::ip::address_v6(b);
      }
      std::optional<std::string_view> kind =
          ip ? NonPublicKind(*ip) : std::optional<std::string_view>("not an IP");
      if (kind) {
        call->refused = (ip ? ip->to_string() : std::string("the address")) + " is " +
                        std::string(*kind) + " (private targets need --push-allow-private)";
        return CURL_SOCKET_BAD;
      }
    }
    const int fd = ::socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (fd < 0) return CURL_SOCKET_BAD;
    std::shared_ptr<Socket> s;
    try {
      s = std::make_shared<Socket>(c->io_, fd);
    } catch (const std::exception&) {  // no exception may cross curl's C frames
      ::close(fd);
      return CURL_SOCKET_BAD;
    }
    // An entry left for this number (its descriptor closed behind our
    // back) must not close the new socket when it goes: released first.
    if (auto old = c->sockets_.find(fd); old != c->sockets_.end()) {
      old->second->want = 0;
      boost::system::error_code ignored;
      old->second->sd.cancel(ignored);
      old->second->sd.release();
      c->sockets_.erase(old);
    }
    c->sockets_.emplace(fd, std::move(s));
    ++c->opened_;
    call->opened = true;
    return fd;
  }

  static int CloseSocket(void* self, curl_socket_t fd) {
    auto* c = static_cast<PushClient*>(self);
    if (auto it = c->sockets_.find(fd); it != c->sockets_.end()) {
      boost::system::error_code ignored;
      it->second->want = 0;  // a wait that ends now does not wait again
      it->second->sd.cancel(ignored);
      it->second->sd.release();  // curl's to close
      c->sockets_.erase(it);
    }
    return ::close(fd);
  }

  static size_t OnHeader(char* data, size_t size, size_t n, void* arg) {
    auto* call = static_cast<Call*>(arg);
    const std::string_view line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) call->response.retry_after.reset();  // a new answer
    if (HeaderIs(line, "retry-after"))
      call->response.retry_after = Trim(line.substr(line.find(':') + 1));
    return size * n;
  }

  static size_t OnBody(char* data, size_t size, size_t n, void* arg) {
    auto* call = static_cast<Call*>(arg);
    std::string& prefix = call->response.body_prefix;
    if (prefix.size() < kBodyPrefixBytes)
      prefix.append(data, std::min(size * n, kBodyPrefixBytes - prefix.size()));
    return size * n;  // the rest is read and dropped
  }
};

PushClient::PushClient(boost::asio::io_context& io, Options options)
    : io_(io), options_(std::move(options)), timer_(io) {
  GlobalInit();
  multi_ = curl_multi_init();
  curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &Callbacks::OnSocket);
  curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &Callbacks::OnTimer);
  curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  if (options_.max_host_connections > 0)
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, options_.max_host_connections);
}

PushClient::~PushClient() {
  *alive_ = false;
  alive_.reset();
  for (auto& [easy, call] : calls_) curl_multi_remove_handle(multi_, easy);
  calls_.clear();
  timer_.cancel();
  for (CURL* e : spare_) curl_easy_cleanup(e);
  curl_multi_cleanup(multi_);       // closes the cached connections (CloseSocket)
  for (auto& [fd, s] : sockets_) {  // any left: not ours to close
    boost::system::error_code ignored;
    s->sd.cancel(ignored);
    s->sd.release();
  }
}

void PushClient::Send(PushRequest request, std::function<void(PushResponse)> done) {
  auto call = std::make_unique<Call>();
  call->client = this;
  call->request = std::move(request);
  call->done = std::move(done);
  call->start = std::chrono::steady_clock::now();
  CURL* e = nullptr;
  if (!spare_.empty()) {
    e = spare_.back();
    spare_.pop_back();
  } else {
    e = curl_easy_init();
  }
  if (e == nullptr) return FailLater(std::move(call->done), "curl_easy_init failed");
  call->easy = e;
  const PushRequest& r = call->request;
  curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(e, CURLOPT_PRIVATE, call.get());
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, call->error);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, r.follow_redirects ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<TimeMs>(r.timeout_ms, 1)));
  // No proxy from the environment (http_proxy, ...): the address check
  // would see the proxy's address, not the target's.
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  // A transfer ended while its name resolves does not wait for the
  // resolver's thread (it would block the loop).
  curl_easy_setopt(e, CURLOPT_QUICK_EXIT, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!options_.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, options_.ca_file.c_str());
  curl_easy_setopt(e, CURLOPT_USERAGENT, options_.user_agent.c_str());
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, &Callbacks::OpenSocket);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, call.get());
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, &Callbacks::CloseSocket);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, this);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Callbacks::OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, call.get());
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Callbacks::OnBody);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, call.get());
  // No "Expect: 100-continue" round trip before a large body.
  call->headers = curl_slist_append(call->headers, "Expect:");
  for (const std::string& h : r.headers)
    call->headers = curl_slist_append(call->headers, h.c_str());
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, call->headers);
  if (r.method == "GET") {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
    if (r.method != "POST") curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }
  Call* started = call.get();
  calls_[e] = std::move(call);
  if (CURLMcode rc = curl_multi_add_handle(multi_, e); rc != CURLM_OK) {  // its timer starts it
    std::function<void(PushResponse)> failed = std::move(started->done);
    calls_.erase(e);
    return FailLater(std::move(failed), curl_multi_strerror(rc));
  }
}

// A request that could not start: its completion runs later on the loop,
// never inside Send.
void PushClient::FailLater(std::function<void(PushResponse)> done, std::string why) {
  std::weak_ptr<bool> alive = alive_;
  boost::asio::post(io_, [alive, done = std::move(done), why = std::move(why)] {
    if (alive.expired()) return;
    PushResponse r;
    r.failure = PushFailure::kProtocol;
    r.error = why;
    done(std::move(r));
  });
}

// curl names its next timeout with nearly every step of a transfer, and
// each move of an Asio timer is a timerfd_settime system call (9% of
// delayqd's time pushing to one keep-alive receiver). So "now" (0) is a
// post to the loop, "none" (-1) leaves the timer as it is, and a timeout
// only moves the timer earlier. A wake-up before curl's time is harmless:
// told of it, curl finds nothing due and names its next timeout, for which
// the timer is armed again.
void PushClient::SetTimer(long timeout_ms) {
  if (timeout_ms < 0) return;
  std::weak_ptr<bool> alive = alive_;
  if (timeout_ms == 0) {
    if (timeout_posted_) return;
    timeout_posted_ = true;
    boost::asio::post(io_, [this, alive] {
      if (alive.expired()) return;
      timeout_posted_ = false;
      Action(CURL_SOCKET_TIMEOUT, 0);
    });
    return;
  }
  const auto at = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (timer_at_ && *timer_at_ <= at) return;
  timer_at_ = at;
  timer_.expires_at(at);  // a wait pending ends as aborted
  timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    timer_at_.reset();
    Action(CURL_SOCKET_TIMEOUT, 0);
  });
}

void PushClient::Watch(const std::shared_ptr<Socket>& s) {
  if (s->want & CURL_POLL_IN) Arm(s, true);
  if (s->want & CURL_POLL_OUT) Arm(s, false);
}

// One wait for readable (in) or writable; when it comes, curl is told, and
// the wait is made again while curl still wants it (curl calls OnSocket only
// when what it wants changes).
void PushClient::Arm(const std::shared_ptr<Socket>& s, bool in) {
  bool& busy = in ? s->reading : s->writing;
  if (busy) return;
  busy = true;
  std::weak_ptr<Socket> weak = s;
  std::weak_ptr<bool> alive = alive_;
  s->sd.async_wait(
      in ? boost::asio::posix::stream_descriptor::wait_read
         : boost::asio::posix::stream_descriptor::wait_write,
      [this, weak, alive, in](const boost::system::error_code& ec) {
        if (alive.expired()) return;
        std::shared_ptr<Socket> sock = weak.lock();
        if (!sock) return;
        (in ? sock->reading : sock->writing) = false;
        if (ec == boost::asio::error::operation_aborted) return;
        // Closed since (its number perhaps another socket's now), or not
        // wanted any more: not curl's concern.
        auto it = sockets_.find(sock->fd);
        if (it == sockets_.end() || it->second != sock || sock->want == 0) return;
        Action(sock->fd, ec ? CURL_CSELECT_ERR : in ? CURL_CSELECT_IN : CURL_CSELECT_OUT);
        if (sock->want & (in ? CURL_POLL_IN : CURL_POLL_OUT)) Arm(sock, in);
      });
}

void PushClient::Action(int fd, int events) {
  int running = 0;
  curl_multi_socket_action(multi_, fd, events, &running);
  Finish();
}

void PushClient::Finish() {
  int left = 0;
  while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
    if (m->msg != CURLMSG_DONE) continue;
    CURL* e = m->easy_handle;
    const CURLcode rc = m->data.result;
    auto it = calls_.find(e);
    if (it == calls_.end()) continue;
    std::unique_ptr<Call> call = std::move(it->second);
    calls_.erase(it);
    curl_multi_remove_handle(multi_, e);
    PushResponse& r = call->response;
    r.elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - call->start)
                       .count();
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OK) {
      r.status = static_cast<int>(status);
    } else {
      r.status = 0;
      r.body_prefix.clear();
      r.retry_after.reset();
      r.error = call->error[0] != '\0' ? call->error : curl_easy_strerror(rc);
      switch (rc) {
        case CURLE_OPERATION_TIMEDOUT:
          r.failure = PushFailure::kTimeout;
          break;
        case CURLE_COULDNT_CONNECT:
          // Refused by us only if no address of the name passed the check.
          if (!call->refused.empty() && !call->opened) {
            r.failure = PushFailure::kRefused;
            r.error = call->refused;
          } else {
            r.failure = PushFailure::kConnect;
          }
          break;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
          r.failure = PushFailure::kConnect;
          break;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_INVALIDCERTSTATUS:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_CLIENTCERT:
        case CURLE_USE_SSL_FAILED:
        case CURLE_SSL_SHUTDOWN_FAILED:
          r.failure = PushFailure::kTls;
          break;
        default:
          r.failure = PushFailure::kProtocol;
          break;
      }
    }
    std::function<void(PushResponse)> done = std::move(call->done);
    PushResponse out = std::move(r);
    if (spare_.size() < kSpareHandles) {
      curl_easy_reset(e);  // every option goes; connections stay in the multi's cache
      spare_.push_back(e);
      call->easy = nullptr;
    }
    call.reset();
    done(std::move(out));  // may Send again
  }
}

}  // namespace delayq::delivery
