// The delayq command-line client's view of a server: one Client interface
// over two transports, the HTTP/JSON API (http_client.cc) and the
// beanstalkd protocol with delayq's extensions (beanstalk_client.cc).
//
// Every operation answers a JSON document shaped as the HTTP API's reply to
// it (docs/http-api.md), so that output does not depend on the transport.
// The beanstalkd transport builds those documents from its replies; where
// the protocol reports times in whole seconds it names them `*_s` instead
// of the HTTP API's `*_ms` fields, and fields it cannot tell are absent
// (docs/cli.md, "JSON output").
//
// Errors are values (Failure), each with the exit code the command ends
// with. A Client connects on its first call; a call that the transport
// cannot express fails with Exit::kUsage before anything is sent.
//
// Thread: a Client belongs to one thread.
#ifndef DELAYQ_CLI_CLIENT_H_
#define DELAYQ_CLI_CLIENT_H_

#include <rapidjson/document.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "cli/util.h"
#include "delayq/types.h"

namespace delayq::cli {

// The exit codes of delayq (docs/cli.md, "Exit codes").
enum class Exit : int {
  kOk = 0,
  kServer = 1,    // the server refused or failed (DRAINING, BAD_FORMAT, HTTP 4xx but 404, 5xx)
  kUsage = 2,     // bad arguments, or a feature the transport does not have
  kNotFound = 3,  // no such job, key or topic
  kTimedOut = 4,  // reserve: no job was ready within the timeout
  kIo = 5,        // cannot connect, no reply in time, connection lost, malformed reply
};

struct Failure {
  Exit exit = Exit::kServer;
  std::string message;
};

// A value or a Failure.
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Failure f) : v_(std::move(f)) {}    // NOLINT
  bool ok() const { return v_.index() == 0; }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }
  const Failure& failure() const { return std::get<1>(v_); }

 private:
  std::variant<T, Failure> v_;
};

using Reply = Expected<rapidjson::Document>;

// A put. Unset fields take the server's defaults (priority 1024, TTR 60 s,
// ready at once, no key, unlimited tries, no back-off).
struct PutArgs {
  std::string topic = "default";
  std::string body;
  std::optional<uint32_t> priority;
  std::optional<TimeMs> delay_ms;
  std::optional<TimeMs> run_at;  // epoch ms
  std::optional<TimeMs> ttr_ms;
  std::string key;  // empty: none
  std::optional<uint32_t> max_tries;
  std::string backoff;  // a spec ("4m,10m,1h", "exp:1s:1h", "none"); empty: none
};

enum class PeekWhat : uint8_t { kId, kKey, kReady, kDelayed, kBuried };

struct PeekArgs {
  PeekWhat what = PeekWhat::kId;
  JobId id = 0;
  std::string topic = "default";
  std::string key;
};

// A page of a topic's jobs in one state (GET /topics/{topic}/jobs).
struct ListArgs {
  std::string topic = "default";
  std::string state = "ready";  // ready, delayed, reserved or buried
  uint32_t limit = 50;
  bool desc = false;
  std::string after;  // a reply's "next"; empty: from the start
};

class Client {
 public:
  virtual ~Client() = default;

  // {"id","created","state"[,"due_ms"]}
  virtual Reply Put(const PutArgs& args) = 0;
  // {"jobs":[job, ...]}: empty when none came within `timeout_ms`.
  virtual Reply Reserve(const std::vector<std::string>& topics, TimeMs timeout_ms,
                        uint32_t count) = 0;
  // {"id","deleted":true}
  // `lease`: the reservation's (HTTP; the beanstalkd protocol has none).
  virtual Reply Finish(JobId id, const std::string& lease) = 0;
  virtual Reply Delete(JobId id) = 0;
  virtual Reply DeleteByKey(const std::string& topic, const std::string& key) = 0;
  // {"id","state"[,"due_ms"|"deadline_ms"]}
  virtual Reply Release(JobId id, const std::string& lease, std::optional<TimeMs> delay_ms,
                        std::optional<uint32_t> priority) = 0;
  virtual Reply Bury(JobId id, const std::string& lease, std::optional<uint32_t> priority) = 0;
  virtual Reply Touch(JobId id, const std::string& lease) = 0;
  virtual Reply KickJob(JobId id) = 0;
  // {"kicked":n}
  virtual Reply Kick(const std::string& topic, uint64_t bound) = 0;
  // A job object, with its body.
  virtual Reply Peek(const PeekArgs& args) = 0;
  virtual Reply Stats() = 0;
  virtual Reply TopicStats(const std::string& topic) = 0;
  // {"topics":[...]}
  virtual Reply Topics() = 0;
  // {"cleared":n}; `states` empty: ready, delayed and buried.
  virtual Reply Clear(const std::string& topic, const std::vector<std::string>& states) = 0;
  // {"topic","pause_ms"}
  virtual Reply Pause(const std::string& topic, TimeMs delay_ms) = 0;
  // {"jobs":[job without its body, ...][,"next"]}; the HTTP API only.
  virtual Reply ListJobs(const ListArgs& args) = 0;
  // {"jobs":[...]}: the job with `key` in each topic; the HTTP API only.
  virtual Reply FindKey(const std::string& key) = 0;
  // A topic's push target (docs/push.md): set from its JSON, shown (without
  // the secret), ended. The HTTP API only.
  virtual Reply SetPush(const std::string& topic, const std::string& target_json) = 0;
  virtual Reply GetPush(const std::string& topic) = 0;
  virtual Reply DeletePush(const std::string& topic) = 0;
  // Schedules (docs/schedules.md): one set from its JSON (as PUT
  // /schedules/{name} takes it), shown with its next fire times, all of
  // them listed ({"schedules":[...]}), paused or resumed ({...,"paused"}),
  // deleted ({"deleted":name}). The HTTP API only.
  virtual Reply SetSchedule(const std::string& name, const std::string& schedule_json) = 0;
  virtual Reply GetSchedule(const std::string& name) = 0;
  virtual Reply ListSchedules() = 0;
  virtual Reply PauseSchedule(const std::string& name, bool pause) = 0;
  virtual Reply DeleteSchedule(const std::string& name) = 0;
};

// A client of the server at `address`. `io_timeout` bounds connecting and
// every wait for the server (a reserve's own timeout comes on top).
std::unique_ptr<Client> MakeHttpClient(const ServerAddress& address,
                                       std::chrono::milliseconds io_timeout);
std::unique_ptr<Client> MakeBeanstalkClient(const ServerAddress& address,
                                            std::chrono::milliseconds io_timeout);
inline std::unique_ptr<Client> MakeClient(const ServerAddress& address,
                                          std::chrono::milliseconds io_timeout) {
  return address.protocol == ServerAddress::Protocol::kHttp
             ? MakeHttpClient(address, io_timeout)
             : MakeBeanstalkClient(address, io_timeout);
}

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_CLIENT_H_
