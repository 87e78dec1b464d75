#include "app/settings.h"

#include <string_view>

#include "backend/redis_backend.h"
#include "delayq/duration.h"
#include "server/access.h"

namespace delayq::app {
namespace {

constexpr const char* kFsyncPolicies[] = {"always", "everysec", "no"};
constexpr const char* kLogLevels[] = {"trace", "debug", "info", "warn", "error", "off"};

// "local" names the default: the engine in this process.
// "none" or a comma-separated list of networks (server/access.h).
Status FinishTrustedNetworks(Config* c) {
  auto n = server::Networks::Parse(c->trusted_networks);
  if (!n.ok()) return n.status();
  c->trusted_networks = n->ToString();
  return Status::Ok();
}

Status FinishBackend(Config* c) {
  if (c->backend == "local") c->backend.clear();
  if (!c->backend.empty()) {
    if (auto a = backend::ParseRedisUrl(c->backend); !a.ok()) return a.status();
  }
  return Status::Ok();
}

using K = SettingKind;

// One row per setting. The defaults are Config's (config.h); `help` is
// --help's text, `doc` docs/configuration.md's (a test keeps that file's
// table equal to SettingsMarkdownTable()).
const Setting kSettings[] = {
    {.flags = "-l,--listen",
     .env = "DELAYQ_LISTEN",
     .toml = "listen",
     .metavar = "ADDR",
     .kind = K::kString,
     .field = &Config::listen,
     .help = "Listen on address ADDR (default 0.0.0.0)",
     .doc = "address of the beanstalkd-protocol listener"},
    {.flags = "-p,--port",
     .env = "DELAYQ_PORT",
     .toml = "port",
     .metavar = "PORT",
     .kind = K::kPort,
     .field = &Config::port,
     .lo = 0,
     .hi = 65535,
     .help = "Listen on TCP port PORT (default 11300)",
     .doc = "its TCP port (0: any free port, logged at start)"},
    {.flags = "-z,--max-job-size",
     .env = "DELAYQ_MAX_JOB_SIZE",
     .toml = "max_job_size",
     .metavar = "BYTES",
     .kind = K::kCount,
     .field = &Config::max_job_size,
     .lo = 0,
     .hi = kMaxJobSizeLimit,
     .help = "Maximum job body size in bytes (default 65535)",
     .doc = "largest job body, at most 1 GiB"},
    {.flags = "-b,--data-dir",
     .env = "DELAYQ_DATA_DIR",
     .toml = "data_dir",
     .metavar = "DIR",
     .kind = K::kString,
     .field = &Config::data_dir,
     .help = "Keep the jobs in directory DIR (default ./delayq-data)",
     .doc = "the directory of the durable store (RocksDB), made if missing; relative paths are "
            "relative to the working directory"},
    {.flags = "--fsync",
     .env = "DELAYQ_FSYNC",
     .toml = "fsync",
     .metavar = "POLICY",
     .kind = K::kEnum,
     .field = &Config::fsync,
     .values = kFsyncPolicies,
     .help = "When changes reach the disk before they are acknowledged: always (survives a\n"
             "power cut), everysec (default; survives a crash, a power cut loses up to 1 s),\n"
             "no (the OS decides)",
     .doc = "when a change reaches the disk before it is acknowledged: `always` (synced first: "
            "survives a power cut), `everysec` (written to the OS first — to the journal in "
            "`DIR/journal` — and synced every second: survives a crash of delayqd, a power cut "
            "loses at most about a second), `no` (written to the OS first; the OS syncs when it "
            "likes)"},
    {.flags = "--horizon",
     .env = "DELAYQ_HORIZON",
     .toml = "horizon",
     .metavar = "DURATION",
     .kind = K::kDuration,
     .field = &Config::horizon_ms,
     .lo = 1'000,
     .example = "5m",
     .help = "Keep delayed jobs due further ahead than this on disk only, loading them\n"
             "ahead of time (default 5m; off: every job in memory)",
     .doc = "delayed jobs due further ahead than this are kept on disk only and loaded into "
            "memory ahead of their time, so memory follows the near future, not how many jobs "
            "wait (`docs/storage.md`, \"The horizon\"); at least `1s`, or `off` to keep every "
            "job in memory. No effect with `--in-memory`"},
    {.flags = "--backend",
     .env = "DELAYQ_BACKEND",
     .toml = "backend",
     .metavar = "URL",
     .kind = K::kString,
     .field = &Config::backend,
     .finish = FinishBackend,
     .help = "Keep the queue in Redis instead: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or\n"
             "redis-cluster://[[USER]:PASSWORD@]HOST[:PORT],... (many delayqd may share it;\n"
             "rediss:// and rediss-cluster:// for TLS; docs/redis-backend.md)",
     .doc_default = "`local`",
     .doc = "where the queue lives: `local` (the engine in this process, over the store of "
            "`-b`), `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` or "
            "`redis-cluster://[[USER]:PASSWORD@]HOST[:PORT],...` (any reachable nodes; a "
            "password authenticates every connection, as the ACL user USER if given); "
            "`rediss://...` and `rediss-cluster://...` the same over TLS, the server's "
            "certificate verified (`--redis-tls-ca-file`). On Redis, "
            "any number of delayqd may serve one queue, and `-b`, `--fsync`, `--horizon` and "
            "`--in-memory` have no effect: durability is Redis's (use AOF). See "
            "`docs/redis-backend.md`. A malformed URL stops the start with a message; logs show "
            "the URL with its password as `***`"},
    {.flags = "--redis-password-file",
     .env = "DELAYQ_REDIS_PASSWORD_FILE",
     .toml = "redis_password_file",
     .metavar = "FILE",
     .kind = K::kString,
     .field = &Config::redis_password_file,
     .help = "The Redis password: the first line of FILE (kept out of the URL and the\n"
             "process list); the URL's user, if any, goes with it",
     .doc = "the Redis password, read from the first line of this file at start, for a URL "
            "that holds none (with `user@` in the URL, the ACL user it belongs to); a missing "
            "or empty file, or a URL with a password too, stops the start with a message"},
    {.flags = "--redis-tls-ca-file",
     .env = "DELAYQ_REDIS_TLS_CA_FILE",
     .toml = "redis_tls_ca_file",
     .metavar = "FILE",
     .kind = K::kString,
     .field = &Config::redis_tls_ca_file,
     .help = "rediss://: trust the CA certificates of FILE (PEM) for Redis's certificate\n"
             "(default: the system's CA store)",
     .doc_default = "the system's CA store",
     .doc = "with a `rediss://` backend: the CA certificates (PEM) that Redis's certificate "
            "must chain to. Redis's certificate must also name the host of the URL (or of each "
            "cluster node) as a DNS name or IP address; a connection that fails either check is "
            "refused (`TLS handshake failed: certificate verify failed (...)` in the log) and "
            "tried again. A file that cannot be read stops the start with a message"},
    {.flags = "--redis-tls-cert",
     .env = "DELAYQ_REDIS_TLS_CERT",
     .toml = "redis_tls_cert",
     .metavar = "FILE",
     .kind = K::kString,
     .field = &Config::redis_tls_cert,
     .help = "rediss://: show Redis this client certificate chain (PEM), for Redis's\n"
             "tls-auth-clients; with --redis-tls-key",
     .doc = "with a `rediss://` backend: the client certificate chain (PEM) delayqd shows "
            "Redis, for Redis's `tls-auth-clients yes` (its default); with `--redis-tls-key`"},
    {.flags = "--redis-tls-key",
     .env = "DELAYQ_REDIS_TLS_KEY",
     .toml = "redis_tls_key",
     .metavar = "FILE",
     .kind = K::kString,
     .field = &Config::redis_tls_key,
     .help = "rediss://: the private key (PEM, unencrypted) of --redis-tls-cert",
     .doc = "the private key (PEM, not encrypted) of `--redis-tls-cert`; a key that does not "
            "match the certificate stops the start with a message"},
    {.flags = "--redis-timeout",
     .env = "DELAYQ_REDIS_TIMEOUT",
     .toml = "redis_timeout",
     .metavar = "DURATION",
     .kind = K::kDuration,
     .field = &Config::redis_timeout_ms,
     .lo = 100,
     .hi = 86'400'000,
     .example = "10s",
     .help = "With Redis: give up a connection that sends nothing for this long while\n"
             "commands wait (default 10s; off: wait for ever)",
     .doc = "with a Redis backend: a connection that has sent nothing for this long while "
            "commands wait on it (a Redis that is stopped, wedged, or cut off while the socket "
            "stays open) is given up within a quarter more and made again; its commands are "
            "answered `INTERNAL_ERROR` (HTTP 503), their outcome unknown (Redis may still run "
            "them); the subscriber's connection sends a `PING` after half of it in silence, "
            "watched the same way; `off`: wait for ever"},
    {.flags = "--in-memory",
     .env = "DELAYQ_IN_MEMORY",
     .toml = "in_memory",
     .metavar = nullptr,
     .kind = K::kBool,
     .field = &Config::in_memory,
     .help = "Keep no store: jobs are lost when delayqd stops",
     .doc = "keep no store at all: jobs are lost when delayqd stops (beanstalkd without `-b`)"},
    {.flags = "--log-level",
     .env = "DELAYQ_LOG_LEVEL",
     .toml = "log_level",
     .metavar = "LEVEL",
     .kind = K::kEnum,
     .field = &Config::log_level,
     .values = kLogLevels,
     .help = "trace, debug, info (default), warn, error, off",
     .doc = "`trace debug info warn error off`"},
    {.flags = "--busy-poll-us",
     .env = "DELAYQ_BUSY_POLL_US",
     .toml = "busy_poll_us",
     .metavar = "N",
     .kind = K::kCount,
     .field = &Config::busy_poll_us,
     .lo = 0,
     .hi = 1'000'000,
     .help = "Poll up to N µs for more work before sleeping, while polls pay (default 200;\n"
             "0: never poll)",
     .doc = "when the loop runs out of work, poll the sockets for up to N µs before sleeping in "
            "the kernel, but only while recent polls found work in time (adaptive: an idle "
            "server or a trickle of requests costs no polling; docs/decisions.md). Saves a "
            "wake-up per request for clients that wait for each reply. 0: never poll"},
    {.flags = "--no-io-uring",
     .env = "DELAYQ_IO_URING",
     .toml = "io_uring",
     .metavar = nullptr,
     .kind = K::kBool,
     .field = &Config::io_uring,
     .help = "Make one system call per socket read and write instead of batching them\n"
             "through io_uring (which is used where the kernel allows it)",
     .doc = "make the beanstalkd connections' recv and send calls one system call each instead "
            "of in batches through io_uring (docs/decisions.md). io_uring is used only where "
            "the kernel allows it (Linux 5.18 or later, not forbidden by a seccomp profile); "
            "otherwise delayqd logs `event=io_uring_unavailable` with the reason and makes "
            "plain calls. The `started` line says which (`io_uring=on` / `off`)"},
    {.flags = "--http-port",
     .env = "DELAYQ_HTTP_PORT",
     .toml = "http_port",
     .metavar = "PORT",
     .kind = K::kPort,
     .field = &Config::http_port,
     .lo = 0,
     .hi = 65535,
     .help = "Serve the HTTP/JSON API on TCP port PORT (default 11380)",
     .doc = "TCP port of the HTTP/JSON API (`docs/http-api.md`); 0: any free port, logged at "
            "start (`http=ADDR:PORT` in the `started` line)"},
    {.flags = "--http-listen",
     .env = "DELAYQ_HTTP_LISTEN",
     .toml = "http_listen",
     .metavar = "ADDR",
     .kind = K::kString,
     .field = &Config::http_listen,
     .help = "Serve the HTTP/JSON API on address ADDR (default: the --listen address)",
     .doc_default = "the `--listen` address",
     .doc = "address of the HTTP listener"},
    {.flags = "--no-http",
     .env = "DELAYQ_HTTP",
     .toml = "http",
     .metavar = nullptr,
     .kind = K::kBool,
     .field = &Config::http,
     .help = "Serve no HTTP/JSON API",
     .doc = "serve no HTTP API"},
    {.flags = "--http-max-body",
     .env = "DELAYQ_HTTP_MAX_BODY",
     .toml = "http_max_body",
     .metavar = "BYTES",
     .kind = K::kCount,
     .field = &Config::http_max_body,
     .lo = 1024,
     .hi = kMaxHttpBodyLimit,
     .help = "Largest HTTP request body in bytes (default 8388608); larger: 413",
     .doc = "largest HTTP request body (1024 .. 4294967295); a larger one is answered `413 "
            "payload_too_large` and the connection closed. A job body sent as JSON or base64 "
            "needs room beyond `-z`"},
    {.flags = "--http-idle-timeout",
     .env = "DELAYQ_HTTP_IDLE_TIMEOUT",
     .toml = "http_idle_timeout",
     .metavar = "DURATION",
     .kind = K::kDuration,
     .field = &Config::http_idle_timeout_ms,
     .example = "60s",
     .help = "Close an HTTP connection idle this long (default 60s; off: never)",
     .doc_default = "`60s`",
     .doc = "close an HTTP keep-alive connection with nothing in flight for this long (a "
            "waiting long-poll is not idle); `off`: never"},
    {.flags = "--max-connections",
     .env = "DELAYQ_MAX_CONNECTIONS",
     .toml = "max_connections",
     .metavar = "N",
     .kind = K::kCount,
     .field = &Config::max_connections,
     .lo = 0,
     .hi = kMaxConnectionsLimit,
     .help = "Connections each listener (beanstalkd, HTTP) holds at once (default 10000;\n"
             "0: no limit); past it a new connection is told so and closed. Needs a\n"
             "file descriptor each: delayqd raises its soft limit (ulimit -n) to fit",
     .doc = "connections each listener (beanstalkd, HTTP) holds at once, 0 .. 10,000,000 (0: no "
            "limit). Past it a new connection is accepted, sent one line (`SERVER_BUSY too many "
            "connections`, or HTTP `503 too_many_connections`) and closed (`docs/limits.md`). "
            "Each connection takes a file descriptor: at start delayqd raises its soft limit "
            "(`ulimit -n`) up to the hard limit to fit this on each listener plus 1,024 "
            "(`event=fd_limit_raised`), and says when the hard limit is lower "
            "(`event=fd_limit_low`, a warning when not even one listener's connections fit: "
            "raise `ulimit -Hn` or systemd's `LimitNOFILE=`); connections past the descriptors "
            "there are get the same refusal"},
    {.flags = "--max-reply-memory",
     .env = "DELAYQ_MAX_REPLY_MEMORY",
     .toml = "max_reply_memory",
     .metavar = "BYTES",
     .kind = K::kCount,
     .field = &Config::max_reply_memory,
     .lo = 0,
     .hi = kMaxReplyMemoryLimit,
     .min_nonzero = kMinReplyMemory,
     .help = "Bytes of replies held in all for beanstalkd clients that have not read them\n"
             "(default 67108864; 0: no limit); past it, connections that hold some run\n"
             "no command until their clients read",
     .doc_default = "`67108864` (64 MiB)",
     .doc = "replies held in all for clients (beanstalkd and HTTP) that have not read them: "
            "past it, a connection that holds replies runs no further command until its client "
            "reads, one that holds none runs one command at a time (`event=reply_memory_full`). "
            "0: no limit; else 1048576 .. 1099511627776"},
    {.flags = "--http-header-timeout",
     .env = "DELAYQ_HTTP_HEADER_TIMEOUT",
     .toml = "http_header_timeout",
     .metavar = "DURATION",
     .kind = K::kDuration,
     .field = &Config::http_header_timeout_ms,
     .example = "60s",
     .help = "Answer 408 and close when a request's header takes longer than this from\n"
             "its first byte (default 10s; off: no limit)",
     .doc = "a request's header must arrive whole within this of its first byte, or the client "
            "is answered `408 request_timeout` and the connection closed (a client that "
            "trickles its header a byte at a time keeps no connection); `off`: no limit"},
    {.flags = "--http-body-timeout",
     .env = "DELAYQ_HTTP_BODY_TIMEOUT",
     .toml = "http_body_timeout",
     .metavar = "DURATION",
     .kind = K::kDuration,
     .field = &Config::http_body_timeout_ms,
     .example = "60s",
     .help = "Answer 408 and close when a request's body takes longer than this after\n"
             "its header (default 60s; off: no limit)",
     .doc_default = "`60s`",
     .doc = "a request's body must arrive whole within this of the header's end, or `408 "
            "request_timeout` and the connection closed (8 MiB at 60 s needs about 1.1 "
            "Mbit/s); `off`: no limit"},
    {.flags = "--ui-read-only",
     .env = "DELAYQ_UI_READ_ONLY",
     .toml = "ui_read_only",
     .metavar = nullptr,
     .kind = K::kBool,
     .field = &Config::ui_read_only,
     .help = "The dashboard (/ui) offers no action that changes the queue",
     .doc = "the dashboard at `/ui` shows no pause, kick, clear or delete (`docs/operations.md`, "
            "\"Dashboard\"); the API is not restricted by it: tokens are (`docs/security.md`)"},
    {.flags = "--push-allow-private",
     .env = "DELAYQ_PUSH_ALLOW_PRIVATE",
     .toml = "push_allow_private",
     .metavar = nullptr,
     .kind = K::kBool,
     .field = &Config::push_allow_private,
     .help = "Push targets may be loopback, private or link-local addresses",
     .doc = "pushes (`docs/push.md`) may connect to loopback, private, link-local and other "
            "non-public addresses, which are refused otherwise, whatever name they were reached "
            "by (\"Outbound safety\")"},
    {.flags = "--max-memory",
     .env = "DELAYQ_MAX_MEMORY",
     .toml = "max_memory",
     .metavar = "BYTES",
     .kind = K::kMemory,
     .field = &Config::max_memory,
     .min_nonzero = uint64_t{1} << 20,
     .example = "512mb",
     .help = "Refuse puts while delayqd uses more memory than this (bytes, or with kb,\n"
             "mb, gb: 512mb); reserves, finishes and deletes go on (default 0: no limit)",
     .doc_default = "`0` (no limit)",
     .doc = "past this much memory in use (what malloc handed out: jobs, buffers, RocksDB's "
            "memtables and caches; looked at every 100 ms), puts are refused on both protocols "
            "(`OUT_OF_MEMORY`; HTTP `503 resource_exhausted`) while reserves, finishes, deletes "
            "and reads go on, as Redis's `maxmemory` with `noeviction`; they are taken again "
            "once use falls below it. Bytes, or with `kb`, `mb`, `gb` (powers of 1024: "
            "`512mb`); at least `1mb`"},
    {.flags = "--max-topics",
     .env = "DELAYQ_MAX_TOPICS",
     .toml = "max_topics",
     .metavar = "N",
     .kind = K::kCount,
     .field = &Config::max_topics,
     .lo = 0,
     .hi = 100'000'000,
     .help = "The most topics at once; a use, watch or put of one more is refused\n"
             "(OUT_OF_MEMORY; HTTP 503) (default 100000; 0: no limit)",
     .doc = "the most topics at once (a topic lasts while it has jobs, watchers, users or a "
            "pause); a `use`, `watch` or put that would make one more is refused: "
            "`OUT_OF_MEMORY` on the beanstalkd protocol (as beanstalkd answers when it cannot "
            "make a tube), HTTP `503 resource_exhausted`. Topics that exist go on. 0: no limit. "
            "On the Redis backend it bounds the topics with jobs or a pause across the "
            "instances (the registry) and each instance's own table of used and watched topics"},
    {.flags = "--max-waiting",
     .env = "DELAYQ_MAX_WAITING",
     .toml = "max_waiting",
     .metavar = "N",
     .kind = K::kCount,
     .field = &Config::max_waiting,
     .lo = 0,
     .hi = kMaxConnectionsLimit,
     .help = "Reserves that wait at once, both protocols (default 10000; 0: no limit);\n"
             "past it a reserve takes a ready job or is answered at once as timed out",
     .doc = "reserves that wait at once, on both protocols: past it a reserve does not wait, it "
            "takes a ready job or is answered at once as if its timeout had passed "
            "(`TIMED_OUT`; HTTP `{\"jobs\":[]}`), logged `event=max_waiting` once per 10 s. 0: "
            "no limit"},
    {.flags = "--metrics-max-topics",
     .env = "DELAYQ_METRICS_MAX_TOPICS",
     .toml = "metrics_max_topics",
     .metavar = "N",
     .kind = K::kCount,
     .field = &Config::metrics_max_topics,
     .lo = 0,
     .hi = 100'000'000,
     .help = "Topics GET /metrics labels one by one in delayq_topic_jobs, those with the\n"
             "most jobs; the rest are summed under topic=\"*other*\" (default 100)",
     .doc = "topics that `GET /metrics` shows one by one in `delayq_topic_jobs` "
            "(`docs/operations.md`, "
            "\"Metrics\"): the N with the most jobs, ties by name; the jobs of the rest are summed "
            "under the label `topic=\"*other*\"` (no topic name holds a `*`), so that many topics "
            "cannot blow up a scrape. 0: every topic in `*other*`"},
    {.flags = "--auth-file",
     .env = "DELAYQ_AUTH_FILE",
     .toml = "auth_file",
     .metavar = "FILE",
     .kind = K::kString,
     .field = &Config::auth_file,
     .help = "Tokens (TOML: name, sha256 of the secret, topic patterns, rights, rate):\n"
             "clients outside --trusted-networks must authenticate with one; read again\n"
             "on SIGHUP (docs/security.md; make one with `delayq token new`)",
     .doc_default = "none",
     .doc = "the access tokens (docs/security.md, \"The token file\"): each a name, the SHA-256 "
            "of its secret, topic patterns and rights (`produce`, `consume`, `admin`), and "
            "optionally a request rate. A client outside `--trusted-networks` must present one "
            "(beanstalkd `auth`, HTTP `Authorization: Bearer`). Read at start (a bad file stops "
            "it with a message naming the line) and again on SIGHUP (a bad file is logged and "
            "the tokens in force stay); open connections keep going, held to the new tokens"},
    {.flags = "--trusted-networks",
     .env = "DELAYQ_TRUSTED_NETWORKS",
     .toml = "trusted_networks",
     .metavar = "CIDRS",
     .kind = K::kString,
     .field = &Config::trusted_networks,
     .finish = FinishTrustedNetworks,
     .help = "Clients from these networks need no token and may do everything:\n"
             "comma-separated, e.g. 10.0.0.0/8,fd00::/8; `none` for none (default\n"
             "loopback: 127.0.0.0/8,::1/128)",
     .doc_default = "`127.0.0.0/8,::1/128`",
     .doc = "clients connecting from these networks (comma-separated `ADDRESS[/PREFIX]`, IPv4 or "
            "IPv6) need no token and may do everything, as before tokens existed; any other "
            "client must authenticate first. `none`: every client must. The default trusts "
            "loopback only, so a delayqd listening on other addresses refuses their clients "
            "(`UNAUTHORIZED`; HTTP 401) until they authenticate, or until their network is "
            "listed here"},
    {.flags = "--tls-cert",
     .env = "DELAYQ_TLS_CERT",
     .toml = "tls_cert",
     .metavar = "FILE",
     .kind = K::kString,
     .field = &Config::tls_cert,
     .help = "Serve TLS on both listeners with this certificate (PEM, then its chain);\n"
             "plaintext still works on the same ports. Read again on SIGHUP",
     .doc_default = "none",
     .doc = "the server's certificate (PEM), followed by its intermediate CAs: with it and "
            "`--tls-key`, both listeners serve TLS 1.2 or later beside plaintext on the same "
            "port (a client's first byte tells which: docs/security.md, \"TLS\"). One without "
            "the other, an unreadable file, or a key that is not the certificate's stops the "
            "start with a message. Read again on SIGHUP for new connections (a bad file is "
            "logged and the files in force stay)"},
    {.flags = "--tls-key",
     .env = "DELAYQ_TLS_KEY",
     .toml = "tls_key",
     .metavar = "FILE",
     .kind = K::kString,
     .field = &Config::tls_key,
     .help = "The private key (PEM, unencrypted) of --tls-cert",
     .doc_default = "none",
     .doc = "the private key of `--tls-cert` (PEM, not encrypted; keep it readable by delayqd "
            "only)"},
    {.flags = "--tls-client-ca",
     .env = "DELAYQ_TLS_CLIENT_CA",
     .toml = "tls_client_ca",
     .metavar = "FILE",
     .kind = K::kString,
     .field = &Config::tls_client_ca,
     .help = "Require a client certificate on TLS connections, verified against these\n"
             "CAs (PEM)",
     .doc_default = "none",
     .doc = "with TLS on, every TLS client must present a certificate that chains to one of "
            "these CAs (PEM), or its handshake fails. Plaintext clients are not asked: use "
            "`--tls-required` to refuse them"},
    {.flags = "--tls-required",
     .env = "DELAYQ_TLS_REQUIRED",
     .toml = "tls_required",
     .metavar = nullptr,
     .kind = K::kBool,
     .field = &Config::tls_required,
     .help = "Refuse plaintext from clients outside --trusted-networks (TLS only for them)",
     .doc = "with TLS on, a plaintext client from outside `--trusted-networks` is refused: "
            "beanstalkd `TLS_REQUIRED ...`, HTTP `403 tls_required`, then closed; trusted "
            "networks may still speak plaintext"},
    {.flags = "--tls-handshake-timeout",
     .env = "DELAYQ_TLS_HANDSHAKE_TIMEOUT",
     .toml = "tls_handshake_timeout",
     .metavar = "DURATION",
     .kind = K::kDuration,
     .field = &Config::tls_handshake_timeout_ms,
     .lo = 100,
     .example = "10s",
     .help = "Close a TLS connection whose handshake takes longer than this (default 10s)",
     .doc = "a TLS client must finish its handshake within this of its first byte, or it is "
            "closed (logged `event=tls_handshake_timeout`, at most once per 10 s); `off`: no "
            "limit"},
    {.flags = "-V,--verbose",
     .env = nullptr,
     .toml = nullptr,
     .metavar = nullptr,
     .kind = K::kVerbose,
     .field = &Config::verbose,
     .help = "Log more (level debug)",
     .doc_default = "",
     .doc = "log level `debug`"},
    {.flags = "-c,--config",
     .env = "DELAYQ_CONFIG",
     .toml = nullptr,
     .metavar = "FILE",
     .kind = K::kConfigFile,
     .field = &Config::config_file,
     .help = "Read settings from TOML file FILE",
     .doc_default = "none",
     .doc = "the TOML file"},
    {.flags = "-v,--version",
     .env = nullptr,
     .toml = nullptr,
     .metavar = nullptr,
     .kind = K::kVersion,
     .field = std::monostate{},
     .help = "Print the version and exit",
     .doc = "print the version and exit"},
    {.flags = "-h,--help",
     .env = nullptr,
     .toml = nullptr,
     .metavar = nullptr,
     .kind = K::kHelp,
     .field = std::monostate{},
     .help = "Print this help and exit",
     .doc = "print the flags and exit"},
};

std::string Code(std::string_view text) { return "`" + std::string(text) + "`"; }

// The row's flags as the docs write them: "-l, --listen ADDR".
std::string FlagsText(const Setting& s) {
  std::string out;
  for (char ch : std::string_view(s.flags)) {
    out += ch;
    if (ch == ',') out += ' ';
  }
  if (s.metavar != nullptr) out += std::string(" ") + s.metavar;
  return out;
}

bool Negated(const Setting& s) { return std::string_view(s.flags).starts_with("--no-"); }

}  // namespace

std::span<const Setting> Settings() { return kSettings; }

const Setting* FindSettingByToml(std::string_view key) {
  for (const Setting& s : kSettings)
    if (s.toml != nullptr && key == s.toml) return &s;
  return nullptr;
}

std::string SettingWhat(const Setting& s) {
  std::string what = s.toml != nullptr ? s.toml : s.flags;
  for (char& ch : what)
    if (ch == '_') ch = ' ';
  return what;
}

std::string SettingValueText(const Setting& s, const Config& c) {
  return std::visit(
      [&](auto field) -> std::string {
        using F = decltype(field);
        if constexpr (std::is_same_v<F, std::monostate>) {
          return "";
        } else if constexpr (std::is_same_v<F, std::string Config::*>) {
          return c.*field;
        } else if constexpr (std::is_same_v<F, bool Config::*>) {
          return c.*field ? "on" : "off";
        } else if constexpr (std::is_same_v<F, TimeMs Config::*>) {
          return c.*field == 0 ? "off" : FormatDuration(c.*field);
        } else {
          return std::to_string(c.*field);
        }
      },
      s.field);
}

std::string SettingsMarkdownTable() {
  std::string out =
      "| flag | TOML key | environment | default | meaning |\n"
      "|---|---|---|---|---|\n";
  const Config defaults;
  for (const Setting& s : kSettings) {
    std::string toml, env, def;
    if (s.toml != nullptr) {
      toml = Code(s.toml);
      if (s.kind == SettingKind::kDuration) toml += " (string)";
      if (s.kind == SettingKind::kMemory) toml += " (number or string)";
      if (s.kind == SettingKind::kBool)
        toml += Negated(s) ? " (bool, `false` for none)" : " (bool)";
    }
    if (s.env != nullptr) {
      env = Code(s.env);
      if (s.kind == SettingKind::kBool) env += " (`1/0`, `true/false`, `yes/no`, `on/off`)";
    }
    if (s.doc_default != nullptr) {
      def = s.doc_default;
    } else if (s.kind == SettingKind::kBool) {
      def = SettingValueText(s, defaults);
    } else if (!std::holds_alternative<std::monostate>(s.field)) {
      def = Code(SettingValueText(s, defaults));
    }
    out += "|";
    for (const std::string& cell : {Code(FlagsText(s)), toml, env, def, std::string(s.doc)})
      out += cell.empty() ? " |" : " " + cell + " |";
    out += "\n";
  }
  return out;
}

std::string SettingsHelpFooter() {
  std::string out, line = "Environment:";
  auto add = [&](const std::string& word) {
    if (line.size() + 1 + word.size() > 90) {
      out += line + "\n";
      line.clear();
    } else {
      line += ' ';
    }
    line += word;
  };
  std::vector<std::string> names;
  for (const Setting& s : kSettings)
    if (s.env != nullptr) names.push_back(s.env);
  for (size_t i = 0; i < names.size(); ++i) add(names[i] + (i + 1 < names.size() ? "," : "."));
  for (const char* word : {"Documentation:", "docs/configuration.md,", "docs/limits.md."})
    add(word);
  return out + line;
}

}  // namespace delayq::app
