// Black-box test helpers: a server process on a free loopback port, and a
// small blocking beanstalkd-protocol client over a raw socket.
//
// ServerProcess starts a server binary (build/delayqd of this build tree, or
// /usr/bin/beanstalkd as the oracle) as `<binary> -l 127.0.0.1 -p <port>
// <extra args>`, with its stderr in a temporary file (delayqd also gets a
// fresh temporary data directory, `-b`, unless the args name one or say
// --in-memory; it is removed with the object), waits until the port
// accepts connections, and stops it (SIGTERM, then SIGKILL after a grace
// period) when it is destroyed. The child also gets SIGKILL if the test
// process dies first (PR_SET_PDEATHSIG), so a crashing test leaves no server
// behind.
//
// RawClient is one TCP connection with a deadline on every read. Replies are
// returned as the exact bytes received; a read that runs out of time or hits
// the end of the stream returns what it got followed by the marker
// kTimeoutMark or kEofMark, so that an EXPECT_EQ on a reply shows what
// happened.
//
// Thread: each object belongs to one thread.
#ifndef DELAYQ_TESTS_SERVER_SERVER_PROCESS_H_
#define DELAYQ_TESTS_SERVER_SERVER_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "temp_dir.h"

struct ssl_st;  // OpenSSL's SSL

namespace delayq::testing {

using std::chrono::milliseconds;

// build/delayqd of the tree the tests were built in (DELAYQ_BINARY_DIR), or
// the binary $DELAYQ_DELAYQD names.
std::string DelayqdPath();

// Whether the black-box fixtures run delayqd on the Redis backend
// (DELAYQ_TEST_AGAINST=redis: the ctest entries *_on_redis).
inline bool AgainstRedis() {
  const char* e = std::getenv("DELAYQ_TEST_AGAINST");
  return e != nullptr && std::string_view(e) == "redis";
}
// Whether the beanstalkd-protocol black-box tests talk TLS
// (DELAYQ_TEST_TLS=1: the ctest entry protocol_over_tls): the fixture
// starts delayqd with a certificate of a test CA (TlsServerArgs), and every
// RawClient makes a TLS handshake first, verifying the server against that
// CA, then sends and reads through it. Its fd() is the TCP socket still:
// what a test writes there bypasses TLS.
bool OverTls();
// delayqd's flags to serve TLS with the test CA's certificate; empty with
// *error set when the openssl tool could not make it.
std::vector<std::string> TlsServerArgs(std::string* error);

// Debian's beanstalkd 1.12, the reference for byte-exact replies.
inline constexpr const char* kBeanstalkdPath = "/usr/bin/beanstalkd";
bool BeanstalkdAvailable();

class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Starts `binary -l 127.0.0.1 -p <free port> args...` and waits until the
  // port accepts a connection. Retries with another port when the server
  // exits early (another process took the port meanwhile). Returns false
  // with *error set when the server does not come up within `timeout`.
  // REQUIRES: not running.
  bool Start(const std::string& binary, const std::vector<std::string>& args, std::string* error,
             milliseconds timeout = milliseconds(20000));

  // Sends SIGTERM, waits up to `grace` for the exit, then SIGKILLs.
  // Returns the wait status (as from waitpid), or -1 when not running.
  int Stop(milliseconds grace = milliseconds(10000));

  // Sends `sig` (e.g. SIGUSR1). REQUIRES: running.
  void Signal(int sig) const;
  // True while the process has not exited (reaps it when it has).
  bool Alive();
  // The wait status once the process has exited (Alive() false), else -1.
  int exit_status() const { return status_; }

  uint16_t port() const { return port_; }
  // The temporary data directory made for delayqd, if any.
  const std::string& data_dir() const { return data_dir_; }
  pid_t pid() const { return pid_; }
  // Everything the server wrote to stderr so far.
  std::string Log() const;

 private:
  bool Spawn(const std::string& binary, const std::vector<std::string>& args, uint16_t port);

  pid_t pid_ = -1;
  int status_ = -1;
  uint16_t port_ = 0;
  std::string log_path_;
  std::string data_dir_;  // made by Start, removed by the destructor
};

// Asks the kernel for a free TCP port on 127.0.0.1 (bind to port 0).
uint16_t FreeLoopbackPort();

inline constexpr std::string_view kTimeoutMark = "<timeout>";
inline constexpr std::string_view kEofMark = "<eof>";

class RawClient {
 public:
  // Connects to 127.0.0.1:port; ok() tells whether it worked. `timeout` is
  // the default deadline of each read.
  explicit RawClient(uint16_t port, milliseconds timeout = milliseconds(10000));
  ~RawClient();
  RawClient(RawClient&& other) noexcept;
  RawClient& operator=(RawClient&& other) noexcept;
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& error() const { return error_; }

  // Writes all of `bytes` in one send() loop. False on error (peer gone).
  bool Send(std::string_view bytes);
  // Writes one byte per send(), pausing `gap` between them so that the
  // server sees them in separate reads.
  bool SendByteByByte(std::string_view bytes, std::chrono::microseconds gap);

  // One complete reply: a line through "\r\n", plus, for "OK <n>",
  // "FOUND <id> <n>" and "RESERVED <id> <n>", the <n>+2 bytes that follow.
  // On timeout or EOF: the bytes received so far + kTimeoutMark / kEofMark.
  std::string ReadReply();
  std::string ReadReply(milliseconds timeout);
  // `n` replies, concatenated (stops at the first incomplete one).
  std::string ReadReplies(size_t n);
  // Send(request), then ReadReply().
  std::string Call(std::string_view request);
  // Everything that arrives until nothing has come for `quiet` (no marker).
  std::string ReadFor(milliseconds quiet);
  // True when the server closes the connection (EOF or reset) within
  // `timeout`; data that arrives meanwhile is appended to *data if given.
  bool WaitClosed(milliseconds timeout, std::string* data = nullptr);
  // What has come, appended to *out, reading once (waiting until
  // `deadline`) when nothing waits here: 1 got data, 0 the deadline
  // passed, -1 EOF or error. (For clients of another protocol over this
  // connection and its TLS: http_client.h.)
  int ReadInto(std::string* out, std::chrono::steady_clock::time_point deadline);

  void ShutdownWrite();
  void Close();
  // Over TLS: sends the client's close_notify, then reads until the
  // connection ends (within `timeout`); true when the server answered with
  // its own close_notify before it closed.
  bool CloseNotifyAnswered(milliseconds timeout);

 private:
  // Reads into buf_ until it holds `n` bytes or the deadline passes.
  // Returns 1 when it does, 0 on timeout, -1 on EOF or error.
  int FillTo(size_t n, std::chrono::steady_clock::time_point deadline);
  // Reads once (waiting until the deadline). Same return values, 1 = got data.
  int ReadSome(std::chrono::steady_clock::time_point deadline);

  // Over TLS (OverTls()): the handshake, within `deadline`. False with
  // error_ set when it fails.
  bool StartTls(std::chrono::steady_clock::time_point deadline);
  // Waits until the socket is ready for `events`, or the deadline: 1, 0
  // (the deadline passed) or -1.
  int Wait(short events, std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  ::ssl_st* ssl_ = nullptr;  // over TLS
  milliseconds timeout_;
  std::string buf_;  // received, not yet returned
  std::string error_;
};

// The value of `key` in a YAML reply (stats, stats-job, stats-tube), or
// "<missing>".
std::string YamlValue(std::string_view reply, std::string_view key);

// `s`, `n` times over (a pipeline of one request).
std::string Repeated(std::string_view s, int n);

// A beanstalkd put of `body`, its body and CRLFs included.
std::string PutCmd(std::string_view body, uint32_t pri = 0, uint32_t delay = 0, uint32_t ttr = 60);

// A client that sends and does not read: sends `chunk` on the socket `fd`
// over and over for `d`, without blocking (a full buffer waits 10 ms).
// Returns how many bytes the kernel took; sets *error on a failed send.
uint64_t SendWithoutReading(int fd, std::string_view chunk, milliseconds d, std::string* error);

// Replaces the values of time-, pid- and host-dependent keys of a YAML reply
// ("OK <n>\r\n---\n...\r\n") by "*" and fixes <n>, so that the replies of two
// servers can be compared byte for byte. `keys` lists the keys to mask.
std::string MaskYamlValues(std::string_view reply, const std::vector<std::string>& keys);

// The resident memory of process `pid` in KiB, from /proc (0 if unreadable);
// PeakRssKb: the most it has had (VmHWM).
uint64_t RssKb(pid_t pid);
uint64_t PeakRssKb(pid_t pid);
// The CPU time process `pid` has used, user + system, in seconds, from
// /proc (-1 if unreadable).
double CpuSeconds(pid_t pid);

// Elapsed time since `start`, in milliseconds.
int64_t MillisSince(std::chrono::steady_clock::time_point start);

// Runs `command` with /bin/sh (popen); returns what it wrote on stdout and
// sets *status to its wait status.
std::string RunShell(const std::string& command, int* status);

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_SERVER_SERVER_PROCESS_H_
