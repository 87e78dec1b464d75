#include "server/redis_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <thread>

#include "server/test_pki.h"

namespace delayq::testing {

namespace {

// A socket connected to 127.0.0.1:port (replies awaited up to 1 s), or -1.
int ConnectLoopback(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  close(fd);
  return -1;
}

// True when 127.0.0.1:port answers "PING" with "+PONG", or with "-NOAUTH"
// (it is up, and wants a password first).
bool Pong(uint16_t port) {
  int fd = ConnectLoopback(port);
  if (fd < 0) return false;
  bool ok = false;
  if (send(fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6) {
    char buf[16] = {};
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    ok = (n >= 5 && std::strncmp(buf, "+PONG", 5) == 0) ||
         (n >= 7 && std::strncmp(buf, "-NOAUTH", 7) == 0);
  }
  close(fd);
  return ok;
}

// True when the log at `path` says, past its first `from` bytes, that
// redis-server serves ("Ready to accept connections": it listens before
// it has checked all its settings, a cluster's port among them).
bool ReadyInLog(const std::string& path, std::streamoff from) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(from);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.find("Ready to accept connections") != std::string::npos;
}

std::streamoff FileSize(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return in ? static_cast<std::streamoff>(in.tellg()) : 0;
}

// The CA and the certificate (for 127.0.0.1) of this test process's
// TLS-only redis-servers; null with *error set if openssl failed.
const TestPki* SharedPki(std::string* error) {
  static std::unique_ptr<TestPki> pki;
  static std::string failed;
  if (pki == nullptr && failed.empty()) {
    auto made = std::make_unique<TestPki>();
    if (made->Init(&failed) && made->Issue("redis", "IP:127.0.0.1", &failed)) pki = std::move(made);
  }
  if (pki == nullptr) *error = failed;
  return pki.get();
}

}  // namespace

bool RedisProcess::StartForDelayqd(std::string* error, std::vector<std::string>* args) {
  const TestPki* pki = nullptr;
  if (AgainstRedisTls()) {
    pki = SharedPki(error);
    if (pki == nullptr) return false;
    if (!tls_) {
      std::vector<std::string> flags = pki->RedisFlags("redis");
      flags.insert(flags.end(), {"--tls-auth-clients", "no"});
      UseTls(flags);
    }
  }
  if (!running() && !Start(error)) return false;
  args->insert(args->end(), {"--backend", url()});
  if (pki != nullptr) args->insert(args->end(), {"--redis-tls-ca-file", pki->ca()});
  return true;
}

bool RedisServerAvailable() { return access(kRedisServerPath, X_OK) == 0; }

RedisProcess::~RedisProcess() { Kill(); }

bool RedisProcess::Start(std::string* error, const std::vector<std::string>& extra,
                         milliseconds timeout) {
  if (!RedisServerAvailable()) {
    *error = std::string(kRedisServerPath) + " is missing (Debian: apt-get install redis-server)";
    return false;
  }
  if (running()) {
    *error = "already running";
    return false;
  }
  if (!extra.empty() || extra_.empty()) extra_ = extra;
  for (int attempt = 0; attempt < 5; ++attempt) {
    bool fresh = port_ == 0;
    if (fresh) port_ = FreeLoopbackPort();
    std::vector<std::string> args = {kRedisServerPath,
                                     "--port",
                                     tls_ ? "0" : std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--dir",
                                     dir_.path(),
                                     "--save",
                                     "",
                                     "--daemonize",
                                     "no",
                                     "--protected-mode",
                                     "no",
                                     "--logfile",
                                     dir_.path() + "/redis.log"};
    if (tls_) {
      args.insert(args.end(), {"--tls-port", std::to_string(port_)});
      args.insert(args.end(), tls_flags_.begin(), tls_flags_.end());
    }
    args.insert(args.end(), extra_.begin(), extra_.end());
    const std::streamoff log_from = FileSize(dir_.path() + "/redis.log");
    std::vector<char*> argv;
    for (std::string& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      dup2(null_fd, 0);
      dup2(null_fd, 1);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(null_fd);
    if (pid < 0) {
      *error = std::string("fork: ") + std::strerror(errno);
      return false;
    }
    pid_ = pid;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        break;  // exited: the port was taken meanwhile, most likely
      }
      if (tls_ ? ReadyInLog(dir_.path() + "/redis.log", log_from) : Pong(port_)) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    if (pid_ > 0) {
      Kill();
      *error = "redis-server did not answer PING in time (see " + dir_.path() + "/redis.log)";
      return false;
    }
    if (!fresh) {
      *error = "redis-server exited at start on port " + std::to_string(port_);
      return false;
    }
    port_ = 0;
  }
  *error = "redis-server exited at start five times";
  return false;
}

void RedisProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int st = 0;
  waitpid(pid_, &st, 0);
  pid_ = -1;
}

void RedisProcess::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int st = 0;
  waitpid(pid_, &st, 0);
  pid_ = -1;
}

}  // namespace delayq::testing
