// delayqd's settings: defaults, then a TOML file, then DELAYQ_* environment
// variables, then command-line flags (beanstalkd's short flags and long
// ones); each later source overrides the earlier. src/app/settings.cc has
// one row per setting (its flags, variable, TOML key, range and help), and
// docs/configuration.md's table is made from those rows. The defaults are
// the member initializers below.
#ifndef DELAYQ_APP_CONFIG_H_
#define DELAYQ_APP_CONFIG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "delayq/status.h"
#include "delayq/types.h"

namespace delayq::app {

struct Config {
  std::string listen = "0.0.0.0";        // -l
  uint16_t port = 11300;                 // -p
  uint64_t max_job_size = 65535;         // -z, bytes
  std::string data_dir = "delayq-data";  // -b; relative to the working directory
  // Empty (or "local"): the Local backend (the engine, over the store).
  // redis://... or redis-cluster://...: the Redis backend (docs/redis-backend.md).
  std::string backend;
  // The Redis password's file (its first line), when the URL holds none.
  std::string redis_password_file;
  // TLS to Redis (rediss://): the CA file that verifies its certificate
  // (empty: the system's store), and a client certificate and key.
  std::string redis_tls_ca_file;
  std::string redis_tls_cert;
  std::string redis_tls_key;
  TimeMs redis_timeout_ms = 10'000;  // --redis-timeout; 0: none
  bool in_memory = false;            // --in-memory: no store, nothing survives a restart
  std::string fsync = "everysec";    // always | everysec | no
  // Delayed jobs due later than this are kept on disk only, and loaded
  // ahead of their time (docs/storage.md, "The horizon"); 0: all in memory.
  TimeMs horizon_ms = 300'000;
  std::string log_level = "info";  // trace debug info warn error off
  std::string config_file;         // -c / --config / DELAYQ_CONFIG
  bool verbose = false;            // -V: log level debug
  // When the loop runs out of work, poll the sockets for up to this long
  // before sleeping in the kernel, while recent polls found work in time
  // (server/event_loop.h); 0: never poll.
  uint32_t busy_poll_us = 200;
  // Make the beanstalkd connections' recv and send calls in batches through
  // io_uring, where the kernel allows it (server/io_batch.h); false: one
  // system call each.
  bool io_uring = true;
  // The HTTP/JSON API (docs/http-api.md).
  bool http = true;                      // --no-http: no HTTP listener
  std::string http_listen;               // empty: the beanstalkd listener's address
  uint16_t http_port = 11380;            // 0: any free port (logged at start)
  uint64_t http_max_body = 8u << 20;     // bytes of one request body
  TimeMs http_idle_timeout_ms = 60'000;  // 0: never close idle connections
  // Limits (docs/limits.md). Connections each listener holds at once (0: no
  // limit); past it a new one is told so and closed.
  uint64_t max_connections = 10'000;
  // Reserves that wait at once, both protocols (0: no limit): past it a
  // reserve takes a ready job or is answered at once (docs/limits.md).
  uint64_t max_waiting = 10'000;
  // Topics GET /metrics labels one by one (the rest: topic="*other*").
  uint64_t metrics_max_topics = 100;
  // Replies held for beanstalkd clients that have not read them, in all
  // (0: no limit); past it, connections that hold some run no command.
  uint64_t max_reply_memory = uint64_t{64} << 20;
  // A request's header must arrive within this of its first byte, its body
  // within http_body_timeout_ms of the header (408; 0: no limit).
  TimeMs http_header_timeout_ms = 10'000;
  // Past this much memory in use (bytes; 0: no limit) puts are refused
  // while every other operation goes on (docs/limits.md).
  uint64_t max_memory = 0;
  // The most topics at once (0: no limit): a use, watch or put of one more
  // is refused (docs/limits.md).
  uint64_t max_topics = 100'000;
  TimeMs http_body_timeout_ms = 60'000;
  bool ui_read_only = false;  // the dashboard offers no action that changes the queue
  // Pushes (docs/push.md) may go to loopback, private and link-local
  // addresses too.
  bool push_allow_private = false;
  // Access (docs/security.md): the token file (empty: no tokens), and the
  // networks whose clients need no token ("none": no network).
  std::string auth_file;
  std::string trusted_networks = "127.0.0.0/8,::1/128";
  // TLS (docs/security.md, "TLS"): the certificate chain and key (both or
  // neither; empty: TLS off), the CA client certificates must chain to
  // (empty: none asked for), whether plaintext is refused from outside the
  // trusted networks, and how long a handshake may take.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  bool tls_required = false;
  TimeMs tls_handshake_timeout_ms = 10'000;
  // The config file's [push."topic"] tables (docs/push.md): each topic and
  // its target as JSON, as PUT /topics/{topic}/push takes it; delayqd sets
  // them at start. Not a row of the settings table: no flag or variable.
  std::vector<std::pair<std::string, std::string>> push_targets;
  // The config file's [schedule."name"] tables (docs/schedules.md): each
  // schedule's name and its JSON, as PUT /schedules/{name} takes it;
  // delayqd checks them at start and stores them as PUTs would.
  std::vector<std::pair<std::string, std::string>> schedules;
};

// What to do after parsing: run, or exit with `exit_code` having printed
// `text` (help, version, or an error) to stdout (code 0) or stderr.
struct ParseOutcome {
  bool run = false;
  int exit_code = 0;
  std::string text;
};

// Parses argv (argv[0] is the program name) with `env` as the environment
// (NAME=value strings). Never throws; never exits.
ParseOutcome ParseConfig(const std::vector<std::string>& args, const std::vector<std::string>& env,
                         Config* config);

// Largest -z accepted, as beanstalkd: 1 GiB.
inline constexpr uint64_t kMaxJobSizeLimit = 1u << 30;
// Largest --max-connections accepted.
inline constexpr uint64_t kMaxConnectionsLimit = 10'000'000;
// Smallest --max-reply-memory accepted (other than 0: no limit).
inline constexpr uint64_t kMinReplyMemory = 1u << 20;
// Largest --max-reply-memory accepted: 1 TiB.
inline constexpr uint64_t kMaxReplyMemoryLimit = uint64_t{1} << 40;
// Largest --http-max-body accepted.
inline constexpr uint64_t kMaxHttpBodyLimit = 0xffffffffu;

}  // namespace delayq::app

#endif  // DELAYQ_APP_CONFIG_H_
