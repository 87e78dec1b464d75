#include "server/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "server/test_pki.h"

#ifndef DELAYQ_BINARY_DIR
#error "DELAYQ_BINARY_DIR must name the build directory (see CMakeLists.txt)"
#endif

namespace delayq::testing {

using Clock = std::chrono::steady_clock;

std::string DelayqdPath() {
  // DELAYQ_DELAYQD runs the black-box tests against another build (an older
  // one, to see a test fail without its fix).
  if (const char* p = std::getenv("DELAYQ_DELAYQD"); p != nullptr && *p != '\0') return p;
  return std::string(DELAYQ_BINARY_DIR) + "/delayqd";
}

bool BeanstalkdAvailable() { return access(kBeanstalkdPath, X_OK) == 0; }

bool OverTls() {
  const char* e = std::getenv("DELAYQ_TEST_TLS");
  return e != nullptr && std::string_view(e) == "1";
}

namespace {
// The test CA and the server's certificate, made once per test process.
struct TestTls {
  TestPki pki;
  std::string error;
  SSL_CTX* client = nullptr;  // verifies the server against the CA
};

TestTls& SharedTestTls() {
  static TestTls* tls = [] {
    auto* t = new TestTls;  // lives as long as the process
    // OpenSSL writes with write(2): a server that closed would end the
    // test with SIGPIPE, where a plain client's send gets EPIPE.
    signal(SIGPIPE, SIG_IGN);
    if (!t->pki.Init(&t->error) || !t->pki.Issue("server", "IP:127.0.0.1", &t->error)) return t;
    t->client = SSL_CTX_new(TLS_client_method());
    if (t->client == nullptr ||
        SSL_CTX_load_verify_locations(t->client, t->pki.ca().c_str(), nullptr) != 1) {
      t->error = "cannot load the test CA into a client context";
      return t;
    }
    SSL_CTX_set_verify(t->client, SSL_VERIFY_PEER, nullptr);
    return t;
  }();
  return *tls;
}
}  // namespace

std::vector<std::string> TlsServerArgs(std::string* error) {
  TestTls& t = SharedTestTls();
  if (!t.error.empty()) {
    *error = t.error;
    return {};
  }
  return {"--tls-cert", t.pki.Path("server.crt"), "--tls-key", t.pki.Path("server.key")};
}

namespace {
uint64_t StatusKb(pid_t pid, std::string_view key) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(key, 0) == 0) return std::stoull(line.substr(key.size()));
  return 0;
}
}  // namespace

uint64_t RssKb(pid_t pid) { return StatusKb(pid, "VmRSS:"); }
uint64_t PeakRssKb(pid_t pid) { return StatusKb(pid, "VmHWM:"); }

int64_t MillisSince(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

std::string RunShell(const std::string& command, int* status) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return "<popen failed>";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

namespace {

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// One connect attempt; the socket on success, -1 otherwise.
int ConnectOnce(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a = Loopback(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The inodes of the sockets listening on 127.0.0.1:port, from the kernel's
// table (/proc/net/tcp: local address as hex "0100007F:PORT", state 0A is
// LISTEN, the inode is the tenth field).
std::vector<unsigned long> ListenerInodes(uint16_t port) {
  std::vector<unsigned long> inodes;
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // the header
  char want[16];
  std::snprintf(want, sizeof want, "0100007F:%04X", port);
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state, queues, timer, retrans, uid, timeout;
    unsigned long inode = 0;
    if (!(f >> slot >> local >> remote >> state >> queues >> timer >> retrans >> uid >> timeout >>
          inode))
      continue;
    if (local == want && state == "0A") inodes.push_back(inode);
  }
  return inodes;
}

// Whether process `pid` holds one of the sockets `inodes` (its fd links
// read "socket:[inode]").
bool HoldsSocket(pid_t pid, const std::vector<unsigned long>& inodes) {
  std::error_code ec;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code lec;
    const std::string target = std::filesystem::read_symlink(e.path(), lec).string();
    if (lec || target.rfind("socket:[", 0) != 0) continue;
    const unsigned long inode = std::strtoul(target.c_str() + 8, nullptr, 10);
    for (unsigned long i : inodes)
      if (i == inode) return true;
  }
  return false;
}

}  // namespace

uint16_t FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a = Loopback(0);
  uint16_t port = 0;
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// ---- ServerProcess -----------------------------------------------------------

ServerProcess::~ServerProcess() {
  Stop();
  if (!log_path_.empty()) unlink(log_path_.c_str());
  if (!data_dir_.empty()) std::filesystem::remove_all(data_dir_);
}

bool ServerProcess::Spawn(const std::string& binary, const std::vector<std::string>& args,
                          uint16_t port) {
  if (log_path_.empty()) {
    char tmpl[] = "/tmp/delayq-server-log-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0) return false;
    close(fd);
    log_path_ = tmpl;
  }
  std::vector<std::string> argv_s = {binary, "-l", "127.0.0.1", "-p", std::to_string(port)};
  // delayqd's HTTP listener on a free port too (its default port would
  // collide between tests running in parallel), unless the test says.
  bool http_given = false;
  for (const std::string& a : args)
    http_given |= a.rfind("--http-port", 0) == 0 || a == "--no-http";
  if (binary != kBeanstalkdPath && !http_given) {
    argv_s.push_back("--http-port");
    argv_s.push_back("0");
  }
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  // Opened before fork: only async-signal-safe calls happen in the child.
  int log_fd = open(log_path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (log_fd < 0 || null_fd < 0) return false;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(log_fd, 2);
    // The test runner may block or ignore signals; the server must not
    // inherit that (SIGUSR1, SIGTERM, SIGPIPE are part of its contract).
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log_fd);
  close(null_fd);
  if (pid < 0) return false;
  pid_ = pid;
  status_ = -1;
  port_ = port;
  return true;
}

bool ServerProcess::Start(const std::string& binary, const std::vector<std::string>& args,
                          std::string* error, milliseconds timeout) {
  if (access(binary.c_str(), X_OK) != 0) {
    *error = binary + " is not an executable file";
    return false;
  }
  std::vector<std::string> full_args = args;
  if (binary == DelayqdPath()) {
    bool has_store_flag = false;
    for (const std::string& a : args)
      has_store_flag |= a == "-b" || a == "--data-dir" || a == "--in-memory";
    if (!has_store_flag) {
      if (data_dir_.empty()) {
        char tmpl[] = "/tmp/delayq-data-XXXXXX";
        if (mkdtemp(tmpl) == nullptr) {
          *error = std::string("cannot make a data directory: ") + std::strerror(errno);
          return false;
        }
        data_dir_ = tmpl;
      }
      full_args.push_back("-b");
      full_args.push_back(data_dir_);
    }
  }
  auto deadline = Clock::now() + timeout;
  for (int attempt = 0; attempt < 5; ++attempt) {
    uint16_t port = FreeLoopbackPort();
    if (port == 0 || !Spawn(binary, full_args, port)) {
      *error = std::string("cannot start a server: ") + std::strerror(errno);
      return false;
    }
    bool taken = false;
    while (Clock::now() < deadline) {
      if (!Alive()) break;
      // The listener on the port must be our child's own socket: a server
      // of another test (a redis-server, say) may have bound the port
      // between FreeLoopbackPort() and our child's bind, and a connect
      // alone would not tell them apart.
      const std::vector<unsigned long> inodes = ListenerInodes(port);
      if (!inodes.empty()) {
        if (HoldsSocket(pid_, inodes)) {
          int fd = ConnectOnce(port);
          if (fd >= 0) {
            close(fd);
            return true;
          }
        } else if (Alive()) {
          // Someone else's. Ours fails its bind and exits; if it is slow
          // to get there, do not wait for it.
          std::this_thread::sleep_for(milliseconds(20));
          if (Alive() && !HoldsSocket(pid_, ListenerInodes(port))) {
            taken = true;
            break;
          }
        }
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    if (taken) {
      Stop(milliseconds(2000));
      *error = "port " + std::to_string(port) + " was taken by another process";
      continue;
    }
    if (Alive()) {
      Stop();
      *error = "the server did not accept connections in time; its log:\n" + Log();
      return false;
    }
    // Exited early: most likely the port was taken meanwhile; try another.
    *error = "the server exited early (status " + std::to_string(status_) + "); its log:\n" + Log();
    pid_ = -1;
  }
  return false;
}

bool ServerProcess::Alive() {
  if (pid_ < 0) return false;
  if (status_ != -1) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    return false;
  }
  return r == 0;
}

void ServerProcess::Signal(int sig) const {
  if (pid_ > 0 && status_ == -1) kill(pid_, sig);
}

int ServerProcess::Stop(milliseconds grace) {
  if (pid_ < 0) return -1;
  if (Alive()) {
    kill(pid_, SIGTERM);
    auto deadline = Clock::now() + grace;
    while (Alive() && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
    if (Alive()) {
      kill(pid_, SIGKILL);
      int st = 0;
      if (waitpid(pid_, &st, 0) == pid_) status_ = st;
    }
  }
  int st = status_;
  pid_ = -1;
  return st;
}

std::string ServerProcess::Log() const {
  if (log_path_.empty()) return {};
  std::ifstream in(log_path_, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// ---- RawClient ---------------------------------------------------------------

RawClient::RawClient(uint16_t port, milliseconds timeout) : timeout_(timeout) {
  // A server under heavy load (hundreds of connections at once, ASan) may
  // refuse for a moment when its accept queue is full: retry briefly.
  auto deadline = Clock::now() + timeout;
  while (true) {
    fd_ = ConnectOnce(port);
    if (fd_ >= 0 || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  if (fd_ < 0) {
    error_ = std::string("connect: ") + std::strerror(errno);
    return;
  }
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (OverTls() && !StartTls(deadline)) Close();
}

bool RawClient::StartTls(Clock::time_point deadline) {
  TestTls& t = SharedTestTls();
  if (t.client == nullptr) {
    error_ = "TLS: " + t.error;
    return false;
  }
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  ssl_ = SSL_new(t.client);
  SSL_set_fd(ssl_, fd_);
  for (;;) {
    ERR_clear_error();
    const int r = SSL_connect(ssl_);
    if (r == 1) return true;
    const int e = SSL_get_error(ssl_, r);
    if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) &&
        Wait(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline) > 0)
      continue;
    char why[256] = "timed out";
    if (unsigned long err = ERR_get_error(); err != 0) ERR_error_string_n(err, why, sizeof why);
    error_ = std::string("TLS handshake: ") + why;
    return false;
  }
}

int RawClient::Wait(short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left < 0) left = 0;
    pollfd p{fd_, events, 0};
    int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    return r < 0 ? -1 : r;
  }
}

RawClient::~RawClient() { Close(); }

RawClient::RawClient(RawClient&& o) noexcept
    : fd_(o.fd_),
      ssl_(o.ssl_),
      timeout_(o.timeout_),
      buf_(std::move(o.buf_)),
      error_(std::move(o.error_)) {
  o.fd_ = -1;
  o.ssl_ = nullptr;
}

RawClient& RawClient::operator=(RawClient&& o) noexcept {
  if (this != &o) {
    Close();
    fd_ = o.fd_;
    ssl_ = o.ssl_;
    timeout_ = o.timeout_;
    buf_ = std::move(o.buf_);
    error_ = std::move(o.error_);
    o.fd_ = -1;
    o.ssl_ = nullptr;
  }
  return *this;
}

void RawClient::Close() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  ssl_ = nullptr;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool RawClient::CloseNotifyAnswered(milliseconds timeout) {
  if (ssl_ == nullptr) return false;
  const auto deadline = Clock::now() + timeout;
  ERR_clear_error();
  SSL_shutdown(ssl_);  // ours: non-blocking, the kernel takes its few bytes
  while (ReadSome(deadline) > 0) {
  }
  const bool answered = (SSL_get_shutdown(ssl_) & SSL_RECEIVED_SHUTDOWN) != 0;
  ERR_clear_error();
  return answered;
}

void RawClient::ShutdownWrite() {
  if (fd_ >= 0) shutdown(fd_, SHUT_WR);
}

bool RawClient::Send(std::string_view bytes) {
  if (fd_ < 0) return false;
  while (ssl_ != nullptr && !bytes.empty()) {
    ERR_clear_error();
    const int n = SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    const int e = SSL_get_error(ssl_, n);
    if ((e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) &&
        Wait(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, Clock::now() + timeout_) > 0)
      continue;
    error_ = "TLS send failed (SSL_get_error " + std::to_string(e) + ")";
    return false;
  }
  while (!bytes.empty()) {
    ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      error_ = std::string("send: ") + std::strerror(errno);
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool RawClient::SendByteByByte(std::string_view bytes, std::chrono::microseconds gap) {
  for (char c : bytes) {
    if (!Send(std::string_view(&c, 1))) return false;
    if (gap.count() > 0) std::this_thread::sleep_for(gap);
  }
  return true;
}

int RawClient::ReadInto(std::string* out, Clock::time_point deadline) {
  const int r = buf_.empty() ? ReadSome(deadline) : 1;
  out->append(buf_);
  buf_.clear();
  return r;
}

int RawClient::ReadSome(Clock::time_point deadline) {
  if (fd_ < 0) return -1;
  while (ssl_ != nullptr) {
    // Decrypted bytes OpenSSL holds are not in the socket: read them first.
    if (SSL_pending(ssl_) == 0) {
      const int r = Wait(POLLIN, deadline);
      if (r <= 0) return r;
    }
    char chunk[65536];
    ERR_clear_error();
    const int n = SSL_read(ssl_, chunk, sizeof chunk);
    if (n > 0) {
      buf_.append(chunk, static_cast<size_t>(n));
      return 1;
    }
    const int e = SSL_get_error(ssl_, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) continue;  // a record's rest
    return -1;  // the server's close_notify, the end of the stream, an error
  }
  while (true) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left < 0) left = 0;
    pollfd p{fd_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return 0;
    if (r < 0) return -1;
    char chunk[65536];
    ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    buf_.append(chunk, static_cast<size_t>(n));
    return 1;
  }
}

int RawClient::FillTo(size_t n, Clock::time_point deadline) {
  while (buf_.size() < n) {
    int r = ReadSome(deadline);
    if (r <= 0) return r;
  }
  return 1;
}

std::string RawClient::ReadReply() { return ReadReply(timeout_); }

std::string RawClient::ReadReply(milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  auto fail = [this](int r) {
    std::string got = std::move(buf_);
    buf_.clear();
    got.append(r == 0 ? kTimeoutMark : kEofMark);
    return got;
  };
  size_t eol;
  while ((eol = buf_.find("\r\n")) == std::string::npos) {
    int r = ReadSome(deadline);
    if (r <= 0) return fail(r);
  }
  size_t line_end = eol + 2;
  std::string_view line(buf_.data(), eol);
  // Replies followed by a block of data: the block's size is the last field.
  size_t total = line_end;
  if (line.starts_with("OK ") || line.starts_with("FOUND ") || line.starts_with("RESERVED ")) {
    size_t sp = line.rfind(' ');
    uint64_t bytes = std::strtoull(std::string(line.substr(sp + 1)).c_str(), nullptr, 10);
    total = line_end + bytes + 2;
  }
  if (int r = FillTo(total, deadline); r <= 0) return fail(r);
  std::string reply = buf_.substr(0, total);
  buf_.erase(0, total);
  return reply;
}

std::string RawClient::ReadReplies(size_t n) {
  std::string all;
  for (size_t i = 0; i < n; ++i) {
    std::string r = ReadReply();
    all += r;
    if (r.ends_with(kTimeoutMark) || r.ends_with(kEofMark)) break;
  }
  return all;
}

std::string RawClient::Call(std::string_view request) {
  if (!Send(request)) return std::string("<send failed: ") + error_ + ">";
  return ReadReply();
}

std::string RawClient::ReadFor(milliseconds quiet) {
  while (ReadSome(Clock::now() + quiet) > 0) {
  }
  std::string got = std::move(buf_);
  buf_.clear();
  return got;
}

bool RawClient::WaitClosed(milliseconds timeout, std::string* data) {
  auto deadline = Clock::now() + timeout;
  int r;
  while ((r = ReadSome(deadline)) > 0) {
  }
  if (data != nullptr) data->append(buf_);
  buf_.clear();
  return r < 0;
}

// ---- a client that does not read ----------------------------------------------

std::string PutCmd(std::string_view body, uint32_t pri, uint32_t delay, uint32_t ttr) {
  return "put " + std::to_string(pri) + " " + std::to_string(delay) + " " + std::to_string(ttr) +
         " " + std::to_string(body.size()) + "\r\n" + std::string(body) + "\r\n";
}

std::string Repeated(std::string_view s, int n) {
  std::string out;
  out.reserve(s.size() * static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

uint64_t SendWithoutReading(int fd, std::string_view chunk, milliseconds d, std::string* error) {
  uint64_t sent = 0;
  auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
    ssize_t n = send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<uint64_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      std::this_thread::sleep_for(milliseconds(10));
    } else {
      *error = std::strerror(errno);
      break;
    }
  }
  return sent;
}

// ---- /proc ---------------------------------------------------------------------

double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t p = all.rfind(')');
  if (p == std::string::npos) return -1;
  std::istringstream fields(all.substr(p + 2));
  // After the name: the state (field 3), fields 4..13, utime (14), stime (15).
  std::string skip;
  for (int i = 3; i <= 13; ++i) fields >> skip;
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// ---- YAML masking ------------------------------------------------------------

std::string YamlValue(std::string_view reply, std::string_view key) {
  std::string needle = "\n" + std::string(key) + ": ";
  size_t p = reply.find(needle);
  if (p == std::string_view::npos) return "<missing>";
  p += needle.size();
  size_t e = reply.find('\n', p);
  return std::string(reply.substr(p, e - p));
}

std::string MaskYamlValues(std::string_view reply, const std::vector<std::string>& keys) {
  size_t eol = reply.find("\r\n");
  if (!reply.starts_with("OK ") || eol == std::string_view::npos) return std::string(reply);
  std::string_view rest = reply.substr(eol + 2);
  if (!rest.ends_with("\r\n")) return std::string(reply);
  std::string_view yaml = rest.substr(0, rest.size() - 2);
  std::string out;
  size_t pos = 0;
  while (pos < yaml.size()) {
    size_t nl = yaml.find('\n', pos);
    size_t end = nl == std::string_view::npos ? yaml.size() : nl;
    std::string_view line = yaml.substr(pos, end - pos);
    size_t colon = line.find(": ");
    bool masked = false;
    if (colon != std::string_view::npos) {
      std::string_view key = line.substr(0, colon);
      for (const std::string& k : keys) {
        if (key == k) {
          out.append(key);
          out.append(": *");
          masked = true;
          break;
        }
      }
    }
    if (!masked) out.append(line);
    if (nl != std::string_view::npos) out.push_back('\n');
    pos = end + 1;
  }
  return "OK " + std::to_string(out.size()) + "\r\n" + out + "\r\n";
}

}  // namespace delayq::testing
