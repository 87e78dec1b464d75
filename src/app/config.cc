#include "app/config.h"

#include <toml++/toml.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <sstream>

#include "backend/redis_backend.h"
#include "delayq/duration.h"
#include "server/server_context.h"

namespace delayq::app {
namespace {

constexpr const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "off"};

Status CheckFsync(const std::string& fsync) {
  if (fsync == "always" || fsync == "everysec" || fsync == "no") return Status::Ok();
  return Status::InvalidArgument("fsync must be one of always, everysec, no (not '" + fsync + "')");
}

// "5m", "90s", ... at least a second, or "0" / "off": every job in memory.
Status ParseHorizon(const std::string& text, TimeMs* out) {
  if (text == "off") return *out = 0, Status::Ok();
  auto d = ParseDuration(text);
  if (!d.ok() || (*d > 0 && *d < 1'000))
    return Status::InvalidArgument(
        "horizon must be a duration of at least 1s (like 5m), or off (not '" + text + "')");
  *out = *d;
  return Status::Ok();
}

// The HTTP connection's timeouts: each a duration ("60s", "5m", ...), or
// "0" / "off" for none. One row each: its TOML key, flag, variable, name in
// errors, help and field.
struct HttpTimeout {
  const char* key;
  const char* flag;
  const char* env;
  const char* what;
  const char* help;
  TimeMs Config::*field;
};
constexpr HttpTimeout kHttpTimeouts[] = {
    {"http_idle_timeout", "--http-idle-timeout", "DELAYQ_HTTP_IDLE_TIMEOUT", "http idle timeout",
     "Close an HTTP connection idle this long (default 60s; off: never)",
     &Config::http_idle_timeout_ms},
    {"http_header_timeout", "--http-header-timeout", "DELAYQ_HTTP_HEADER_TIMEOUT",
     "http header timeout",
     "Answer 408 and close when a request's header takes longer than this from\n"
     "its first byte (default 10s; off: no limit)",
     &Config::http_header_timeout_ms},
    {"http_body_timeout", "--http-body-timeout", "DELAYQ_HTTP_BODY_TIMEOUT", "http body timeout",
     "Answer 408 and close when a request's body takes longer than this after\n"
     "its header (default 60s; off: no limit)",
     &Config::http_body_timeout_ms},
};

Status ParseHttpTimeout(const HttpTimeout& t, const std::string& text, Config* c) {
  if (text == "off") return c->*t.field = 0, Status::Ok();
  auto d = ParseDuration(text);
  if (!d.ok())
    return Status::InvalidArgument(std::string(t.what) +
                                   " must be a duration (like 60s), or off (not '" + text + "')");
  c->*t.field = *d;
  return Status::Ok();
}

constexpr int64_t kMaxTopicsLimit = 100'000'000;

// "0", "1048576", "512mb", "2gb" (k, m, g: powers of 1024, as Redis reads
// its maxmemory), at least 1 MiB unless 0.
Status ParseMemory(const std::string& text, uint64_t* out) {
  Status bad = Status::InvalidArgument(
      "max memory must be a number of bytes, optionally with kb, mb or gb (like 512mb), at "
      "least 1mb, or 0 for no limit (not '" +
      text + "')");
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 15) return bad;
  uint64_t n = std::stoull(text.substr(0, digits));
  std::string unit = text.substr(digits);
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  uint64_t scale = 1;
  if (unit == "k" || unit == "kb") {
    scale = 1ull << 10;
  } else if (unit == "m" || unit == "mb") {
    scale = 1ull << 20;
  } else if (unit == "g" || unit == "gb") {
    scale = 1ull << 30;
  } else if (!unit.empty() && unit != "b") {
    return bad;
  }
  if (n > UINT64_MAX / scale) return bad;
  uint64_t bytes = n * scale;
  if (bytes != 0 && bytes < (1ull << 20)) return bad;
  *out = bytes;
  return Status::Ok();
}

const HttpTimeout* FindHttpTimeout(std::string_view key) {
  for (const HttpTimeout& t : kHttpTimeouts)
    if (key == t.key) return &t;
  return nullptr;
}

// "1", "true", "yes", "on" / "0", "false", "no", "off".
bool ParseBool(const std::string& v, bool* out) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return *out = true, true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return *out = false, true;
  return false;
}

Status CheckLevel(const std::string& level) {
  for (const char* l : kLevels)
    if (level == l) return Status::Ok();
  return Status::InvalidArgument("log level must be one of trace, debug, info, warn, error, off");
}

std::string EnvValue(const std::vector<std::string>& env, const std::string& name) {
  std::string prefix = name + "=";
  for (const std::string& e : env)
    if (e.compare(0, prefix.size(), prefix) == 0) return e.substr(prefix.size());
  return {};
}

// --max-reply-memory: 0 (no limit) or at least kMinReplyMemory.
Status CheckReplyMemory(uint64_t bytes) {
  if (bytes == 0 || (bytes >= kMinReplyMemory && bytes <= kMaxReplyMemoryLimit))
    return Status::Ok();
  return Status::InvalidArgument(
      "max reply memory must be 0 (no limit) or 1048576..1099511627776 bytes (not " +
      std::to_string(bytes) + ")");
}

// An unsigned number in lo..hi from the environment variable `name`, if it
// is set.
Status EnvUint(const std::vector<std::string>& env, const std::string& name, uint64_t lo,
               uint64_t hi, uint64_t* out) {
  const std::string v = EnvValue(env, name);
  if (v.empty()) return Status::Ok();
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (*end != '\0' || errno != 0 || v[0] == '-' || n < lo || n > hi)
    return Status::InvalidArgument(name + " must be " + std::to_string(lo) + ".." +
                                   std::to_string(hi));
  *out = n;
  return Status::Ok();
}

// Applies the TOML file's keys to `c`. Unknown keys and wrong types are errors.
Status LoadToml(const std::string& path, Config* c) {
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {  // toml++ reports by exception; it stops here
    std::ostringstream os;
    os << "config file " << path << ": " << e.description() << " (line " << e.source().begin.line
       << ")";
    return Status::InvalidArgument(os.str());
  }
  for (const auto& [key, node] : t) {
    std::string k(key.str());
    auto bad = [&](const char* want) {
      return Status::InvalidArgument("config file " + path + ": '" + k + "' must be " + want);
    };
    if (k == "listen") {
      auto v = node.value<std::string>();
      if (!v) return bad("a string");
      c->listen = *v;
    } else if (k == "port") {
      auto v = node.value<int64_t>();
      if (!v || *v < 0 || *v > 65535) return bad("an integer 0..65535");
      c->port = static_cast<uint16_t>(*v);
    } else if (k == "max_job_size") {
      auto v = node.value<int64_t>();
      if (!v || *v < 0 || static_cast<uint64_t>(*v) > kMaxJobSizeLimit)
        return bad("an integer 0..1073741824");
      c->max_job_size = static_cast<uint64_t>(*v);
    } else if (k == "data_dir") {
      auto v = node.value<std::string>();
      if (!v) return bad("a string");
      c->data_dir = *v;
    } else if (k == "backend") {
      auto v = node.value<std::string>();
      if (!v) return bad("a string");
      c->backend = *v;
    } else if (k == "in_memory") {
      auto v = node.value<bool>();
      if (!v) return bad("true or false");
      c->in_memory = *v;
    } else if (k == "fsync") {
      auto v = node.value<std::string>();
      if (!v) return bad("a string");
      c->fsync = *v;
    } else if (k == "horizon") {
      auto v = node.value<std::string>();
      if (!v) return bad("a string (like \"5m\", or \"off\")");
      if (Status st = ParseHorizon(*v, &c->horizon_ms); !st.ok())
        return Status::InvalidArgument("config file " + path + ": " + st.message());
    } else if (k == "busy_poll_us") {
      auto v = node.value<int64_t>();
      if (!v || *v < 0 || *v > 1'000'000) return bad("an integer 0..1000000");
      c->busy_poll_us = static_cast<uint32_t>(*v);
    } else if (k == "io_uring") {
      auto v = node.value<bool>();
      if (!v) return bad("true or false");
      c->io_uring = *v;
    } else if (k == "http") {
      auto v = node.value<bool>();
      if (!v) return bad("true or false");
      c->http = *v;
    } else if (k == "http_listen") {
      auto v = node.value<std::string>();
      if (!v) return bad("a string");
      c->http_listen = *v;
    } else if (k == "http_port") {
      auto v = node.value<int64_t>();
      if (!v || *v < 0 || *v > 65535) return bad("an integer 0..65535");
      c->http_port = static_cast<uint16_t>(*v);
    } else if (k == "http_max_body") {
      auto v = node.value<int64_t>();
      if (!v || *v < 1024 || static_cast<uint64_t>(*v) > kMaxHttpBodyLimit)
        return bad("an integer 1024..4294967295");
      c->http_max_body = static_cast<uint64_t>(*v);
    } else if (k == "max_topics") {
      auto v = node.value<int64_t>();
      if (!v || *v < 0 || *v > kMaxTopicsLimit) return bad("an integer 0..100000000");
      c->max_topics = static_cast<uint64_t>(*v);
    } else if (k == "max_memory") {
      std::string text;
      if (auto n = node.value<int64_t>(); n && *n >= 0) {
        text = std::to_string(*n);
      } else if (auto v = node.value<std::string>(); v) {
        text = *v;
      } else {
        return bad("a number of bytes or a string like \"512mb\"");
      }
      if (Status st = ParseMemory(text, &c->max_memory); !st.ok())
        return Status::InvalidArgument("config file " + path + ": " + st.message());
    } else if (const HttpTimeout* t = FindHttpTimeout(k); t != nullptr) {
      auto v = node.value<std::string>();
      if (!v) return bad("a string (like \"60s\", or \"off\")");
      if (Status st = ParseHttpTimeout(*t, *v, c); !st.ok())
        return Status::InvalidArgument("config file " + path + ": " + st.message());
    } else if (k == "max_connections") {
      auto v = node.value<int64_t>();
      if (!v || *v < 0 || static_cast<uint64_t>(*v) > kMaxConnectionsLimit)
        return bad("an integer 0..10000000");
      c->max_connections = static_cast<uint64_t>(*v);
    } else if (k == "max_waiting") {
      auto v = node.value<int64_t>();
      if (!v || *v < 0 || static_cast<uint64_t>(*v) > kMaxConnectionsLimit)
        return bad("an integer 0..10000000");
      c->max_waiting = static_cast<uint64_t>(*v);
    } else if (k == "max_reply_memory") {
      auto v = node.value<int64_t>();
      if (!v || *v < 0 || !CheckReplyMemory(static_cast<uint64_t>(*v)).ok())
        return bad("0 or an integer 1048576..1099511627776");
      c->max_reply_memory = static_cast<uint64_t>(*v);
    } else if (k == "log_level") {
      auto v = node.value<std::string>();
      if (!v) return bad("a string");
      c->log_level = *v;
    } else {
      return Status::InvalidArgument("config file " + path + ": unknown setting '" + k + "'");
    }
  }
  return Status::Ok();
}

}  // namespace

ParseOutcome ParseConfig(const std::vector<std::string>& args, const std::vector<std::string>& env,
                         Config* c) {
  ParseOutcome out;
  CLI::App app{
      "delayqd — a delay-queue server that speaks the beanstalkd protocol.\n"
      "Settings come from defaults, a TOML file (-c), DELAYQ_* environment\n"
      "variables and these flags, each overriding the one before.",
      "delayqd"};
  app.set_help_flag("-h,--help", "Print this help and exit");
  bool version = false;
  std::string listen, log_level, data_dir, config_file, fsync, horizon;
  bool in_memory = false;
  int64_t port = -1, max_job_size = -1, busy_poll_us = -1;
  app.add_option("-l,--listen", listen, "Listen on address ADDR (default 0.0.0.0)")
      ->option_text("ADDR");
  app.add_option("-p,--port", port, "Listen on TCP port PORT (default 11300)")
      ->option_text("PORT")
      ->check(CLI::Range(0, 65535));
  app.add_option("-z,--max-job-size", max_job_size,
                 "Maximum job body size in bytes (default 65535)")
      ->option_text("BYTES")
      ->check(CLI::Range(int64_t{0}, static_cast<int64_t>(kMaxJobSizeLimit)));
  app.add_option("-b,--data-dir", data_dir,
                 "Keep the jobs in directory DIR (default ./delayq-data)")
      ->option_text("DIR");
  app.add_option("--fsync", fsync,
                 "When changes reach the disk before they are acknowledged: always (survives a\n"
                 "power cut), everysec (default; survives a crash, a power cut loses up to 1 s),\n"
                 "no (the OS decides)")
      ->option_text("POLICY");
  app.add_option("--horizon", horizon,
                 "Keep delayed jobs due further ahead than this on disk only, loading them\n"
                 "ahead of time (default 5m; off: every job in memory)")
      ->option_text("DURATION");
  app.add_flag("--in-memory", in_memory, "Keep no store: jobs are lost when delayqd stops");
  std::string backend_url;
  app.add_option(
         "--backend", backend_url,
         "Keep the queue in Redis instead: redis://HOST[:PORT][/DB] or\n"
         "redis-cluster://HOST[:PORT],... (many delayqd may share it; docs/redis-backend.md)")
      ->option_text("URL");
  app.add_option("-c,--config", config_file, "Read settings from TOML file FILE")
      ->option_text("FILE");
  app.add_option("--log-level", log_level, "trace, debug, info (default), warn, error, off")
      ->option_text("LEVEL");
  app.add_option("--busy-poll-us", busy_poll_us,
                 "Poll up to this long for more work before sleeping, while polls pay "
                 "(default 200; 0: never poll)")
      ->option_text("MICROSECONDS")
      ->check(CLI::Range(0, 1'000'000));
  bool no_io_uring = false;
  app.add_flag("--no-io-uring", no_io_uring,
               "Make one system call per socket read and write instead of batching them\n"
               "through io_uring (which is used where the kernel allows it)");
  std::string http_listen, max_memory;
  int64_t max_topics = -1;
  app.add_option("--max-topics", max_topics,
                 "The most topics at once; a use, watch or put of one more is refused\n"
                 "(OUT_OF_MEMORY; HTTP 503) (default 100000; 0: no limit)")
      ->option_text("N")
      ->check(CLI::Range(int64_t{0}, kMaxTopicsLimit));
  std::string http_timeouts[std::size(kHttpTimeouts)];
  app.add_option("--max-memory", max_memory,
                 "Refuse puts while delayqd uses more memory than this (bytes, or with kb,\n"
                 "mb, gb: 512mb); reserves, finishes and deletes go on (default 0: no limit)")
      ->option_text("BYTES");
  int64_t http_port = -1, http_max_body = -1;
  bool no_http = false;
  app.add_option("--http-listen", http_listen,
                 "Serve the HTTP/JSON API on address ADDR (default: the --listen address)")
      ->option_text("ADDR");
  app.add_option("--http-port", http_port,
                 "Serve the HTTP/JSON API on TCP port PORT (default 11380)")
      ->option_text("PORT")
      ->check(CLI::Range(0, 65535));
  app.add_flag("--no-http", no_http, "Serve no HTTP/JSON API");
  app.add_option("--http-max-body", http_max_body,
                 "Largest HTTP request body in bytes (default 8388608); larger: 413")
      ->option_text("BYTES")
      ->check(CLI::Range(int64_t{1024}, static_cast<int64_t>(kMaxHttpBodyLimit)));
  for (size_t i = 0; i < std::size(kHttpTimeouts); ++i)
    app.add_option(kHttpTimeouts[i].flag, http_timeouts[i], kHttpTimeouts[i].help)
        ->option_text("DURATION");
  int64_t max_connections = -1, max_reply_memory = -1, max_waiting = -1;
  app.add_option("--max-waiting", max_waiting,
                 "Reserves that wait at once, both protocols (default 10000; 0: no limit);\n"
                 "past it a reserve takes a ready job or is answered at once as timed out")
      ->option_text("N")
      ->check(CLI::Range(int64_t{0}, static_cast<int64_t>(kMaxConnectionsLimit)));
  app.add_option("--max-connections", max_connections,
                 "Connections each listener (beanstalkd, HTTP) holds at once (default 10000;\n"
                 "0: no limit); past it a new connection is told so and closed. Needs a\n"
                 "file descriptor each: delayqd raises its soft limit (ulimit -n) to fit")
      ->option_text("N")
      ->check(CLI::Range(int64_t{0}, static_cast<int64_t>(kMaxConnectionsLimit)));
  app.add_option("--max-reply-memory", max_reply_memory,
                 "Bytes of replies held in all for beanstalkd clients that have not read them\n"
                 "(default 67108864; 0: no limit); past it, connections that hold some run\n"
                 "no command until their clients read")
      ->option_text("BYTES")
      ->check(CLI::Range(int64_t{0}, static_cast<int64_t>(kMaxReplyMemoryLimit)));
  app.add_flag("-V,--verbose", c->verbose, "Log more (level debug)");
  app.add_flag("-v,--version", version, "Print the version and exit");
  app.footer(
      "Environment: DELAYQ_CONFIG, DELAYQ_LISTEN, DELAYQ_PORT, DELAYQ_MAX_JOB_SIZE,\n"
      "DELAYQ_BACKEND, DELAYQ_DATA_DIR, DELAYQ_FSYNC, DELAYQ_HORIZON, DELAYQ_IN_MEMORY, "
      "DELAYQ_LOG_LEVEL,\n"
      "DELAYQ_BUSY_POLL_US, DELAYQ_IO_URING, DELAYQ_HTTP, DELAYQ_HTTP_LISTEN, DELAYQ_HTTP_PORT,\n"
      "DELAYQ_HTTP_MAX_BODY, DELAYQ_HTTP_IDLE_TIMEOUT, DELAYQ_HTTP_HEADER_TIMEOUT,\n"
      "DELAYQ_HTTP_BODY_TIMEOUT, DELAYQ_MAX_MEMORY, DELAYQ_MAX_TOPICS, DELAYQ_MAX_CONNECTIONS,\n"
      "DELAYQ_MAX_REPLY_MEMORY, DELAYQ_MAX_WAITING. Documentation: docs/configuration.md, "
      "docs/limits.md.");

  std::vector<std::string> rev(args.rbegin(), args.rend());
  if (!rev.empty()) rev.pop_back();  // program name
  try {
    app.parse(rev);
  } catch (const CLI::CallForHelp&) {
    out.text = app.help();
    return out;
  } catch (const CLI::ParseError& e) {
    out.exit_code = 2;
    out.text = std::string("delayqd: ") + e.what() + "\nRun 'delayqd --help' for the flags.\n";
    return out;
  }
  if (version) {
    out.text = "delayqd " + std::string(server::kVersion) + "\n";
    return out;
  }
  auto fail = [&out](const Status& st) {
    out.exit_code = 2;
    out.text = "delayqd: " + st.message() + "\n";
    return out;
  };

  // 1. The TOML file.
  c->config_file = !config_file.empty() ? config_file : EnvValue(env, "DELAYQ_CONFIG");
  if (!c->config_file.empty()) {
    if (Status st = LoadToml(c->config_file, c); !st.ok()) return fail(st);
  }
  // 2. The environment.
  if (auto v = EnvValue(env, "DELAYQ_LISTEN"); !v.empty()) c->listen = v;
  if (auto v = EnvValue(env, "DELAYQ_PORT"); !v.empty()) {
    char* end = nullptr;
    long p = std::strtol(v.c_str(), &end, 10);
    if (*end != '\0' || p < 0 || p > 65535)
      return fail(Status::InvalidArgument("DELAYQ_PORT must be 0..65535"));
    c->port = static_cast<uint16_t>(p);
  }
  if (auto v = EnvValue(env, "DELAYQ_MAX_JOB_SIZE"); !v.empty()) {
    char* end = nullptr;
    unsigned long long z = std::strtoull(v.c_str(), &end, 10);
    if (*end != '\0' || z > kMaxJobSizeLimit)
      return fail(Status::InvalidArgument("DELAYQ_MAX_JOB_SIZE must be 0..1073741824"));
    c->max_job_size = z;
  }
  if (auto v = EnvValue(env, "DELAYQ_DATA_DIR"); !v.empty()) c->data_dir = v;
  if (auto v = EnvValue(env, "DELAYQ_FSYNC"); !v.empty()) c->fsync = v;
  if (auto v = EnvValue(env, "DELAYQ_HORIZON"); !v.empty()) {
    if (Status st = ParseHorizon(v, &c->horizon_ms); !st.ok())
      return fail(Status::InvalidArgument("DELAYQ_HORIZON: " + st.message()));
  }
  if (auto v = EnvValue(env, "DELAYQ_BACKEND"); !v.empty()) c->backend = v;
  if (auto v = EnvValue(env, "DELAYQ_IN_MEMORY"); !v.empty()) {
    if (!ParseBool(v, &c->in_memory))
      return fail(
          Status::InvalidArgument("DELAYQ_IN_MEMORY must be 1/0, true/false, yes/no or on/off"));
  }
  if (auto v = EnvValue(env, "DELAYQ_LOG_LEVEL"); !v.empty()) c->log_level = v;
  if (auto v = EnvValue(env, "DELAYQ_BUSY_POLL_US"); !v.empty()) {
    char* end = nullptr;
    unsigned long b = std::strtoul(v.c_str(), &end, 10);
    if (*end != '\0' || b > 1'000'000)
      return fail(Status::InvalidArgument("DELAYQ_BUSY_POLL_US must be 0..1000000"));
    c->busy_poll_us = static_cast<uint32_t>(b);
  }
  if (auto v = EnvValue(env, "DELAYQ_IO_URING"); !v.empty()) {
    if (!ParseBool(v, &c->io_uring))
      return fail(
          Status::InvalidArgument("DELAYQ_IO_URING must be 1/0, true/false, yes/no or on/off"));
  }
  if (auto v = EnvValue(env, "DELAYQ_HTTP"); !v.empty()) {
    if (!ParseBool(v, &c->http))
      return fail(Status::InvalidArgument("DELAYQ_HTTP must be 1/0, true/false, yes/no or on/off"));
  }
  if (auto v = EnvValue(env, "DELAYQ_HTTP_LISTEN"); !v.empty()) c->http_listen = v;
  if (auto v = EnvValue(env, "DELAYQ_HTTP_PORT"); !v.empty()) {
    char* end = nullptr;
    long p = std::strtol(v.c_str(), &end, 10);
    if (*end != '\0' || p < 0 || p > 65535)
      return fail(Status::InvalidArgument("DELAYQ_HTTP_PORT must be 0..65535"));
    c->http_port = static_cast<uint16_t>(p);
  }
  if (auto v = EnvValue(env, "DELAYQ_HTTP_MAX_BODY"); !v.empty()) {
    char* end = nullptr;
    unsigned long long z = std::strtoull(v.c_str(), &end, 10);
    if (*end != '\0' || z < 1024 || z > kMaxHttpBodyLimit)
      return fail(Status::InvalidArgument("DELAYQ_HTTP_MAX_BODY must be 1024..4294967295"));
    c->http_max_body = z;
  }
  if (auto v = EnvValue(env, "DELAYQ_MAX_TOPICS"); !v.empty()) {
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (*end != '\0' || n < 0 || n > kMaxTopicsLimit)
      return fail(Status::InvalidArgument("DELAYQ_MAX_TOPICS must be 0..100000000"));
    c->max_topics = static_cast<uint64_t>(n);
  }
  if (auto v = EnvValue(env, "DELAYQ_MAX_MEMORY"); !v.empty()) {
    if (Status st = ParseMemory(v, &c->max_memory); !st.ok())
      return fail(Status::InvalidArgument("DELAYQ_MAX_MEMORY: " + st.message()));
  }
  for (const HttpTimeout& t : kHttpTimeouts) {
    if (auto v = EnvValue(env, t.env); !v.empty()) {
      if (Status st = ParseHttpTimeout(t, v, c); !st.ok())
        return fail(Status::InvalidArgument(std::string(t.env) + ": " + st.message()));
    }
  }
  if (Status st =
          EnvUint(env, "DELAYQ_MAX_CONNECTIONS", 0, kMaxConnectionsLimit, &c->max_connections);
      !st.ok())
    return fail(st);
  if (Status st =
          EnvUint(env, "DELAYQ_MAX_REPLY_MEMORY", 0, kMaxReplyMemoryLimit, &c->max_reply_memory);
      !st.ok())
    return fail(st);
  if (Status st = EnvUint(env, "DELAYQ_MAX_WAITING", 0, kMaxConnectionsLimit, &c->max_waiting);
      !st.ok())
    return fail(st);
  // 3. The flags.
  if (!listen.empty()) c->listen = listen;
  if (port >= 0) c->port = static_cast<uint16_t>(port);
  if (max_job_size >= 0) c->max_job_size = static_cast<uint64_t>(max_job_size);
  if (!data_dir.empty()) c->data_dir = data_dir;
  if (!log_level.empty()) c->log_level = log_level;
  if (!fsync.empty()) c->fsync = fsync;
  if (!horizon.empty()) {
    if (Status st = ParseHorizon(horizon, &c->horizon_ms); !st.ok()) return fail(st);
  }
  if (in_memory) c->in_memory = true;
  if (!backend_url.empty()) c->backend = backend_url == "local" ? std::string() : backend_url;
  if (busy_poll_us >= 0) c->busy_poll_us = static_cast<uint32_t>(busy_poll_us);
  if (no_io_uring) c->io_uring = false;
  if (!http_listen.empty()) c->http_listen = http_listen;
  if (http_port >= 0) c->http_port = static_cast<uint16_t>(http_port);
  if (no_http) c->http = false;
  if (http_max_body >= 0) c->http_max_body = static_cast<uint64_t>(http_max_body);
  if (!max_memory.empty()) {
    if (Status st = ParseMemory(max_memory, &c->max_memory); !st.ok()) return fail(st);
  }
  if (max_topics >= 0) c->max_topics = static_cast<uint64_t>(max_topics);
  for (size_t i = 0; i < std::size(kHttpTimeouts); ++i) {
    if (http_timeouts[i].empty()) continue;
    if (Status st = ParseHttpTimeout(kHttpTimeouts[i], http_timeouts[i], c); !st.ok())
      return fail(st);
  }
  if (max_connections >= 0) c->max_connections = static_cast<uint64_t>(max_connections);
  if (max_waiting >= 0) c->max_waiting = static_cast<uint64_t>(max_waiting);
  if (max_reply_memory >= 0) c->max_reply_memory = static_cast<uint64_t>(max_reply_memory);
  if (Status st = CheckReplyMemory(c->max_reply_memory); !st.ok()) return fail(st);
  if (c->verbose && log_level.empty()) c->log_level = "debug";
  if (Status st = CheckLevel(c->log_level); !st.ok()) return fail(st);
  if (Status st = CheckFsync(c->fsync); !st.ok()) return fail(st);
  if (c->backend == "local") c->backend.clear();
  if (!c->backend.empty()) {
    if (auto a = backend::ParseRedisUrl(c->backend); !a.ok()) return fail(a.status());
  }
  if (!c->in_memory && c->backend.empty() && c->data_dir.empty())
    return fail(
        Status::InvalidArgument("the data directory is empty (use --in-memory to keep no store)"));
  out.run = true;
  return out;
}

}  // namespace delayq::app
