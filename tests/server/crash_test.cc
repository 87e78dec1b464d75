// Crash test: delayqd is killed with SIGKILL at a random moment while eight
// connections put, reserve, delete, release, bury and kick jobs (two of them
// pipelining: up to 64 puts and deletes sent at once, their replies read
// after, so that the kill finds changes of one connection sharing a write,
// some acknowledged and some not), then started
// again on the same data directory, several times in a row. After every
// restart, every put the server acknowledged (INSERTED) and whose delete it
// never acknowledged must be there with its exact body, no acknowledged
// delete (DELETED) may come back, and new ids must be above every id
// acknowledged before. Runs for --fsync always and everysec: both promise to
// survive a crash of the process (everysec only loses data on a power cut,
// which a SIGKILL does not simulate); and for always with one connection
// alone, one command at a time (always_one) or 64 in flight
// (always_one_pipelined), whose changes the event loop syncs itself instead
// of the writer thread (docs/decisions.md).
//
// What a client cannot know is kept out of the expectations: a request whose
// reply was not read in full when the server died may or may not have taken
// effect. Puts like that are only counted (they bound the job total from
// above); a delete like that makes its job "uncertain" until the next
// restart, where peek settles it (there with the right body, or gone).
//
// A job reserved when the server died comes back ready (reservations are not
// stored); peek finds a job in any state, so that changes nothing here.
//
// Environment: DELAYQ_CRASH_ROUNDS (kills per fsync policy, default 5),
// DELAYQ_CRASH_SEED (the seed of the random choices; printed at the start).
// Thread timing makes a run unrepeatable even with the same seed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <latch>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "server/http_client.h"
#include "server/server_process.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kThreads = 8;
// Connections 2 and 5 pipeline (one of each tube).
bool Pipelines(int thread) { return thread == 2 || thread == 5; }
constexpr int kMaxPipelined = 64;
constexpr int kDefaultRounds = 5;
// The kill comes this long after every connection is ready.
constexpr int kMinKillMs = 100;
constexpr int kMaxKillMs = 600;
// A connection that owns this many jobs mostly deletes: that bounds the job
// count (and with it recovery and verification time) however fast the
// server is.
constexpr size_t kOwnedSoftCap = 250;
// Odd connections use and watch this tube, so that recovery has two tubes
// to rebuild.
constexpr std::string_view kTube = "crash";
// At most this many mismatches are described one by one; the rest are only
// counted.
constexpr int kMaxDescribed = 10;

int Rounds() {
  const char* e = std::getenv("DELAYQ_CRASH_ROUNDS");
  int n = e != nullptr ? std::atoi(e) : 0;
  return n > 0 ? n : kDefaultRounds;
}

uint64_t Seed() {
  if (const char* e = std::getenv("DELAYQ_CRASH_SEED"); e != nullptr && *e != '\0')
    return std::strtoull(e, nullptr, 10);
  std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

std::optional<uint64_t> ParseUint(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// "INSERTED <id>\r\n" -> id.
std::optional<uint64_t> ParseInserted(std::string_view r) {
  constexpr std::string_view kWord = "INSERTED ";
  if (!r.starts_with(kWord) || !r.ends_with("\r\n")) return std::nullopt;
  return ParseUint(r.substr(kWord.size(), r.size() - kWord.size() - 2));
}

// "<word> <id> <n>\r\n<body>\r\n" (RESERVED, FOUND) -> id and body.
std::optional<std::pair<uint64_t, std::string>> ParseJob(std::string_view word,
                                                         std::string_view r) {
  size_t eol = r.find("\r\n");
  if (eol == std::string_view::npos || !r.starts_with(word) || r.size() <= word.size() ||
      r[word.size()] != ' ')
    return std::nullopt;
  std::string_view line = r.substr(word.size() + 1, eol - word.size() - 1);
  size_t sp = line.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  auto id = ParseUint(line.substr(0, sp));
  auto n = ParseUint(line.substr(sp + 1));
  if (!id || !n || r.size() != eol + 2 + *n + 2 || !r.ends_with("\r\n")) return std::nullopt;
  return std::make_pair(*id, std::string(r.substr(eol + 2, *n)));
}

std::string Found(uint64_t id, std::string_view body) {
  return "FOUND " + std::to_string(id) + " " + std::to_string(body.size()) + "\r\n" +
         std::string(body) + "\r\n";
}

// The value of `key` in a YAML reply, if there.
std::optional<uint64_t> YamlUint(std::string_view reply, std::string_view key) {
  return ParseUint(YamlValue(reply, key));
}

// A body that can be checked on its own: a header that is unique in the
// whole test, then padding that follows from the header's sequence number
// and the position. A body served for the wrong job, or damaged, fails the
// check even where the test does not know which job it is.
char PadChar(uint64_t seq, size_t i) { return static_cast<char>('a' + (seq + i) % 26); }

std::string MakeBody(std::string_view prefix, int round, int thread, uint64_t seq, size_t size) {
  std::string b = std::string(prefix) + std::to_string(round) + "-t" + std::to_string(thread) +
                  "-s" + std::to_string(seq) + ":";
  for (size_t i = b.size(); i < size; ++i) b.push_back(PadChar(seq, i));
  return b;
}

bool WellFormedBody(std::string_view b) {
  size_t s = b.find("-s");
  size_t colon = b.find(':');
  if (s == std::string_view::npos || colon == std::string_view::npos || colon < s) return false;
  auto seq = ParseUint(b.substr(s + 2, colon - s - 2));
  if (!seq) return false;
  for (size_t i = colon + 1; i < b.size(); ++i)
    if (b[i] != PadChar(*seq, i)) return false;
  return true;
}

// Mostly small bodies, some of a few KB, a few of tens of KB (the limit is
// 65535): large values take another path through RocksDB's log.
size_t BodySize(std::mt19937_64& rng) {
  uint64_t x = rng() % 100;
  if (x < 60) return 24 + rng() % 200;
  if (x < 90) return 200 + rng() % 1800;
  if (x < 98) return 2000 + rng() % 6000;
  return 8000 + rng() % 24000;
}

// What is known, across rounds, of the jobs in the data directory.
struct Ledger {
  std::map<uint64_t, std::string> live;  // put acknowledged, no delete acknowledged
  std::set<uint64_t> deleted;            // delete acknowledged
  // A delete was sent but its reply never read: the job may be there or
  // not. The body when the put was acknowledged (else the job came from a
  // put of unknown outcome, seen through a reserve).
  std::map<uint64_t, std::optional<std::string>> uncertain;
  uint64_t unknown_puts = 0;  // since the start: puts whose reply was never read
  uint64_t max_acked_id = 0;  // highest id of an acknowledged put or delete
};

// What one connection learned in one round.
struct Outcome {
  std::map<uint64_t, std::string> acked_puts;
  std::vector<uint64_t> acked_deletes;
  std::vector<uint64_t> uncertain_deletes;
  uint64_t unknown_puts = 0;
  uint64_t unknown_other = 0;  // reserve, release, bury, kick: no change in which jobs exist
  uint64_t requests = 0;
  uint64_t max_reserved_id = 0;
  std::vector<std::string> errors;  // replies no server state explains
};

// One connection's traffic until the server goes away. `owned` are jobs this
// connection may delete by id (its share of the ledger's live jobs, then
// its own puts). Reads `ledger` (not changed while the round runs) to check
// the bodies of jobs it reserves.
void Traffic(int round, int thread, uint16_t port, std::vector<uint64_t> owned,
             const Ledger& ledger, uint64_t seed, const std::atomic<bool>& stop, std::latch& ready,
             Outcome* out) {
  std::mt19937_64 rng(seed);
  RawClient c(port);
  auto fail = [out](std::string what) { out->errors.push_back(std::move(what)); };
  // The reply, or nothing when it was not read in full (the server died):
  // the request's outcome is then unknown.
  auto request = [&](const std::string& req) -> std::optional<std::string> {
    ++out->requests;
    if (!c.Send(req)) return std::nullopt;
    std::string r = c.ReadReply();
    if (r.ends_with(kEofMark) || r.ends_with(kTimeoutMark)) return std::nullopt;
    return r;
  };
  bool setup_ok = c.ok();
  if (!setup_ok) fail("connect: " + c.error());
  if (setup_ok && thread % 2 == 1) {
    std::string tube(kTube);
    auto u = request("use " + tube + "\r\n");
    auto w = request("watch " + tube + "\r\n");
    setup_ok = u == "USING " + tube + "\r\n" && w == "WATCHING 2\r\n";
    if (!setup_ok) fail("use/watch: " + u.value_or("<none>") + " / " + w.value_or("<none>"));
  }
  ready.count_down();
  if (!setup_ok) return;

  uint64_t seq = 0;
  // Deletes `id`; false when the connection is gone.
  auto remove = [&](uint64_t id, bool reserved_here) {
    auto r = request("delete " + std::to_string(id) + "\r\n");
    if (!r) {
      out->uncertain_deletes.push_back(id);
      return false;
    }
    if (*r == "DELETED\r\n") {
      out->acked_deletes.push_back(id);
    } else if (*r == "NOT_FOUND\r\n" && !reserved_here) {
      // Deleted by another connection, or reserved by one: nothing learnt.
    } else {
      fail("delete " + std::to_string(id) + ": " + *r);
      return false;
    }
    return true;
  };

  while (!stop.load(std::memory_order_relaxed)) {
    // Over the cap, deletes by id take the place of most puts and
    // reserves: `owned` also holds ids others have deleted meanwhile, so
    // deleting through reserves instead would drain the jobs of everyone.
    const bool over = owned.size() >= kOwnedSoftCap;
    const uint64_t put_below = over ? 10 : 50;
    const uint64_t reserve_below = over ? 30 : 80;
    uint64_t x = rng() % 100;
    if (x < put_below) {
      uint32_t pri = static_cast<uint32_t>(rng() % 2000);
      uint64_t d = rng() % 100;
      // Some jobs become ready during the round or just after a restart,
      // some stay delayed through every later round.
      uint32_t delay = d < 75 ? 0 : d < 90 ? 1 : 3600;
      std::string body = MakeBody("r", round, thread, seq++, BodySize(rng));
      auto r = request(PutCmd(body, pri, delay, 60));
      if (!r) {
        ++out->unknown_puts;
        return;
      }
      auto id = ParseInserted(*r);
      if (!id) return fail("put: " + *r);
      out->acked_puts.emplace(*id, std::move(body));
      owned.push_back(*id);
    } else if (x < reserve_below) {
      auto r = request("reserve-with-timeout 0\r\n");
      if (!r) {
        ++out->unknown_other;
        return;
      }
      if (*r == "TIMED_OUT\r\n") continue;
      auto job = ParseJob("RESERVED", *r);
      if (!job) return fail("reserve-with-timeout 0: " + *r);
      auto [id, body] = *job;
      out->max_reserved_id = std::max(out->max_reserved_id, id);
      if (!WellFormedBody(body))
        return fail("reserved job " + std::to_string(id) +
                    " has a damaged body: " + body.substr(0, 200));
      auto known = ledger.live.find(id);
      if (known != ledger.live.end() && known->second != body)
        return fail("reserved job " + std::to_string(id) + " has another job's body: " +
                    body.substr(0, 200) + " (expected " + known->second.substr(0, 200) + ")");
      auto mine = out->acked_puts.find(id);
      if (mine != out->acked_puts.end() && mine->second != body)
        return fail("reserved job " + std::to_string(id) + " has another job's body: " +
                    body.substr(0, 200) + " (expected " + mine->second.substr(0, 200) + ")");
      uint64_t what = rng() % 100;
      if (what < 60) {
        if (!remove(id, true)) return;
      } else if (what < 80) {
        std::string req = "release " + std::to_string(id) + " " + std::to_string(rng() % 2000) +
                          " " + std::to_string(rng() % 2) + "\r\n";
        auto rr = request(req);
        if (!rr) {
          ++out->unknown_other;
          return;
        }
        if (*rr != "RELEASED\r\n") return fail(req + " -> " + *rr);
      } else {
        std::string req =
            "bury " + std::to_string(id) + " " + std::to_string(rng() % 2000) + "\r\n";
        auto rr = request(req);
        if (!rr) {
          ++out->unknown_other;
          return;
        }
        if (*rr != "BURIED\r\n") return fail(req + " -> " + *rr);
      }
    } else if (x < 97) {
      if (owned.empty()) continue;
      size_t i = rng() % owned.size();
      uint64_t id = owned[i];
      owned[i] = owned.back();
      owned.pop_back();
      if (!remove(id, false)) return;
    } else {
      auto r = request("kick 10\r\n");
      if (!r) {
        ++out->unknown_other;
        return;
      }
      if (!r->starts_with("KICKED ") || !r->ends_with("\r\n")) return fail("kick 10: " + *r);
    }
  }
}

// A pipelining connection's traffic until the server goes away: batches of
// 1 to kMaxPipelined puts and deletes of `owned` jobs, each batch sent in
// one write, then its replies read in order. A reply not read in full (the
// server died) leaves that request and every one after it in the batch of
// unknown outcome.
void PipelinedTraffic(int round, int thread, uint16_t port, std::vector<uint64_t> owned,
                      uint64_t seed, const std::atomic<bool>& stop, std::latch& ready,
                      Outcome* out) {
  std::mt19937_64 rng(seed);
  RawClient c(port);
  auto fail = [out](std::string what) { out->errors.push_back(std::move(what)); };
  bool setup_ok = c.ok();
  if (!setup_ok) fail("connect: " + c.error());
  if (setup_ok && thread % 2 == 1) {
    std::string tube(kTube);
    setup_ok = c.Send("use " + tube + "\r\nwatch " + tube + "\r\n") &&
               c.ReadReply() == "USING " + tube + "\r\n" && c.ReadReply() == "WATCHING 2\r\n";
    if (!setup_ok) fail("use/watch");
  }
  ready.count_down();
  if (!setup_ok) return;

  uint64_t seq = 0;
  struct Sent {
    uint64_t delete_id = 0;  // 0: a put
    std::string body;
  };
  std::vector<Sent> sent;
  while (!stop.load(std::memory_order_relaxed)) {
    sent.clear();
    std::string batch;
    const int n = 1 + static_cast<int>(rng() % kMaxPipelined);
    for (int i = 0; i < n; ++i) {
      if (!owned.empty() && rng() % 100 < (owned.size() >= kOwnedSoftCap ? 80u : 30u)) {
        size_t k = rng() % owned.size();
        sent.push_back(Sent{owned[k], {}});
        owned[k] = owned.back();
        owned.pop_back();
        batch += "delete " + std::to_string(sent.back().delete_id) + "\r\n";
      } else {
        uint64_t d = rng() % 100;
        uint32_t delay = d < 75 ? 0 : d < 90 ? 1 : 3600;
        sent.push_back(Sent{0, MakeBody("p", round, thread, seq++, BodySize(rng))});
        batch += PutCmd(sent.back().body, static_cast<uint32_t>(rng() % 2000), delay, 60);
      }
    }
    out->requests += sent.size();
    const bool all_sent = c.Send(batch);
    for (size_t i = 0; i < sent.size(); ++i) {
      std::string r = all_sent ? c.ReadReply() : std::string(kEofMark);
      const bool lost = r.ends_with(kEofMark) || r.ends_with(kTimeoutMark);
      Sent& q = sent[i];
      if (lost) {
        for (size_t j = i; j < sent.size(); ++j) {
          if (sent[j].delete_id != 0) {
            out->uncertain_deletes.push_back(sent[j].delete_id);
          } else {
            ++out->unknown_puts;
          }
        }
        return;
      }
      if (q.delete_id != 0) {
        if (r == "DELETED\r\n") {
          out->acked_deletes.push_back(q.delete_id);
        } else if (r != "NOT_FOUND\r\n") {  // deleted or reserved by another: nothing learnt
          return fail("pipelined delete " + std::to_string(q.delete_id) + ": " + r);
        }
      } else {
        auto id = ParseInserted(r);
        if (!id) return fail("pipelined put: " + r);
        out->acked_puts.emplace(*id, std::move(q.body));
        owned.push_back(*id);
      }
    }
  }
}

// Figures of one round, printed once its restart has been checked.
struct RoundFigures {
  int kill_after_ms = 0;
  uint64_t requests = 0;
  size_t acked_puts = 0;
  size_t acked_deletes = 0;
  uint64_t unknown_puts = 0;
  size_t uncertain_deletes = 0;
  uint64_t unknown_other = 0;
  uint64_t max_reserved_id = 0;
};

class CrashTest : public ::testing::TestWithParam<const char*> {
 protected:
  // The --fsync policy, and how many connections make traffic.
  std::string Fsync() const {
    return std::string_view(GetParam()).starts_with("always_one") ? "always" : GetParam();
  }
  int Connections() const {
    return std::string_view(GetParam()).starts_with("always_one") ? 1 : kThreads;
  }
  // Whether connection `t` pipelines.
  bool Pipelining(int t) const {
    if (Connections() == 1) return std::string_view(GetParam()) == "always_one_pipelined";
    return Pipelines(t);
  }

  void TearDown() override {
    if (HasFailure()) {
      std::string log = server_.Log();
      if (log.size() > 6000) log = "..." + log.substr(log.size() - 6000);
      std::cerr << "---- delayqd stderr, every start (last 6000 bytes) ----\n" << log << "----\n";
    }
  }

  void StartServer() {
    log_from_ = server_.Log().size();
    std::string error;
    ASSERT_TRUE(server_.Start(DelayqdPath(), {"-b", dir_.path(), "--fsync", Fsync()}, &error))
        << error;
  }

  // SIGKILL, then waits until the process is reaped.
  void Kill() {
    server_.Signal(SIGKILL);
    auto deadline = Clock::now() + 10s;
    while (server_.Alive() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
    ASSERT_FALSE(server_.Alive()) << "delayqd outlived SIGKILL by 10 s";
    int st = server_.Stop();  // reaped already: forgets the pid, returns the status
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
        << "delayqd died by itself before the kill; wait status " << st;
  }

  RoundFigures RunRound(int round, std::mt19937_64& rng);
  void Merge(const std::vector<Outcome>& outcomes);
  void Verify(int round, const RoundFigures& f);

  // delayq_store_loop_syncs_total of the running server (0 if unread).
  uint64_t LoopSyncs() {
    const uint16_t port = HttpPortOf(server_, 10s, log_from_);
    if (port == 0) return 0;
    HttpClient c(port);
    return static_cast<uint64_t>(
        MetricValue(c.Call("GET", "/metrics").body, "delayq_store_loop_syncs_total").value_or(0));
  }

  TempDir dir_;  // the data directory, kept across restarts
  ServerProcess server_;
  size_t log_from_ = 0;      // where the running server's log starts
  uint64_t loop_syncs_ = 0;  // one connection: the loop's own syncs, every round
  Ledger ledger_;
};

RoundFigures CrashTest::RunRound(int round, std::mt19937_64& rng) {
  RoundFigures f;
  // The jobs still alive are shared out, so that later rounds delete
  // earlier rounds' jobs too.
  const int connections = Connections();
  std::vector<std::vector<uint64_t>> owned(connections);
  size_t k = 0;
  for (const auto& [id, body] : ledger_.live) owned[k++ % connections].push_back(id);

  std::vector<Outcome> outcomes(connections);
  std::atomic<bool> stop{false};
  std::latch ready(connections);
  std::vector<std::thread> threads;
  for (int t = 0; t < connections; ++t) {
    if (Pipelining(t)) {
      threads.emplace_back(PipelinedTraffic, round, t, server_.port(), std::move(owned[t]), rng(),
                           std::cref(stop), std::ref(ready), &outcomes[t]);
    } else {
      threads.emplace_back(Traffic, round, t, server_.port(), std::move(owned[t]),
                           std::cref(ledger_), rng(), std::cref(stop), std::ref(ready),
                           &outcomes[t]);
    }
  }
  ready.wait();
  // Pacing only: when to kill. The threads run flat out meanwhile.
  f.kill_after_ms = kMinKillMs + static_cast<int>(rng() % (kMaxKillMs - kMinKillMs + 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(f.kill_after_ms));
  // One connection alone: its changes are synced by the loop (counted
  // here, while the traffic goes on, so that the kill still finds some).
  if (connections == 1) loop_syncs_ += LoopSyncs();
  Kill();
  // Every connection ends on its own once the server is gone; `stop` only
  // ends them should Kill have failed.
  stop = true;
  for (std::thread& t : threads) t.join();
  if (::testing::Test::HasFatalFailure()) return f;

  int described = 0;
  for (const Outcome& o : outcomes) {
    for (const std::string& e : o.errors)
      if (described++ < kMaxDescribed) ADD_FAILURE() << "round " << round << ": " << e;
    f.requests += o.requests;
    f.acked_puts += o.acked_puts.size();
    f.acked_deletes += o.acked_deletes.size();
    f.unknown_puts += o.unknown_puts;
    f.uncertain_deletes += o.uncertain_deletes.size();
    f.unknown_other += o.unknown_other;
    f.max_reserved_id = std::max(f.max_reserved_id, o.max_reserved_id);
  }
  EXPECT_GT(f.acked_puts, 0u) << "round " << round
                              << ": no put was acknowledged before the kill, nothing is checked";
  Merge(outcomes);
  return f;
}

// Adds what the connections learnt to the ledger: acknowledged puts first,
// then acknowledged deletes (a job put and deleted in the same round ends up
// deleted), then deletes of unknown outcome.
void CrashTest::Merge(const std::vector<Outcome>& outcomes) {
  const uint64_t before = ledger_.max_acked_id;
  int described = 0;
  auto describe = [&described] { return described++ < kMaxDescribed; };
  for (const Outcome& o : outcomes) {
    for (const auto& [id, body] : o.acked_puts) {
      // Ids are never reused: everything acknowledged before the restart
      // that this round follows has a lower id.
      if (id <= before || ledger_.deleted.count(id) != 0 || ledger_.live.count(id) != 0) {
        if (describe())
          ADD_FAILURE() << "INSERTED " << id
                        << " reuses an id (highest acknowledged before: " << before << ")";
      }
      ledger_.live[id] = body;
      ledger_.max_acked_id = std::max(ledger_.max_acked_id, id);
    }
  }
  for (const Outcome& o : outcomes) {
    for (uint64_t id : o.acked_deletes) {
      // A second DELETED for one id means the job came back after its
      // delete was acknowledged.
      if (!ledger_.deleted.insert(id).second && describe())
        ADD_FAILURE() << "job " << id << " was deleted (DELETED) twice";
      ledger_.live.erase(id);
      ledger_.max_acked_id = std::max(ledger_.max_acked_id, id);
    }
  }
  for (const Outcome& o : outcomes) {
    for (uint64_t id : o.uncertain_deletes) {
      if (ledger_.deleted.count(id) != 0) continue;
      auto it = ledger_.live.find(id);
      if (it != ledger_.live.end()) {
        ledger_.uncertain[id] = std::move(it->second);
        ledger_.live.erase(it);
      } else {
        ledger_.uncertain.emplace(id, std::nullopt);
      }
    }
    ledger_.unknown_puts += o.unknown_puts;
  }
}

// Checks the restarted server against the ledger, settles the uncertain
// jobs, and puts one job to see where ids continue.
void CrashTest::Verify(int round, const RoundFigures& f) {
  RawClient c(server_.port());
  ASSERT_TRUE(c.ok()) << c.error();

  // Acknowledged jobs are all there; jobs of unknown outcome may be too.
  std::string stats = c.Call("stats\r\n");
  uint64_t total = 0;
  for (const char* key : {"current-jobs-ready", "current-jobs-delayed", "current-jobs-buried",
                          "current-jobs-reserved"}) {
    auto v = YamlUint(stats, key);
    ASSERT_TRUE(v.has_value()) << "no " << key << " in stats: " << stats;
    total += *v;
  }
  EXPECT_EQ(YamlUint(stats, "current-jobs-reserved").value_or(~uint64_t{0}), 0u)
      << "reservations do not survive a restart";
  const uint64_t upper = ledger_.live.size() + ledger_.uncertain.size() + ledger_.unknown_puts;
  EXPECT_GE(total, ledger_.live.size()) << "round " << round << ": stats count fewer jobs than "
                                        << ledger_.live.size() << " acknowledged ones";
  EXPECT_LE(total, upper) << "round " << round << ": stats count more jobs than were ever put "
                          << "(acknowledged " << ledger_.live.size() << ", uncertain "
                          << ledger_.uncertain.size() << ", unknown puts " << ledger_.unknown_puts
                          << ")";

  // Peeks in pipelined chunks: thousands of round trips one by one would
  // dominate the test's time.
  auto peek_all = [&c](const std::vector<uint64_t>& ids) {
    std::vector<std::string> replies;
    constexpr size_t kChunk = 200;
    for (size_t i = 0; i < ids.size(); i += kChunk) {
      size_t n = std::min(kChunk, ids.size() - i);
      std::string req;
      for (size_t j = 0; j < n; ++j) req += "peek " + std::to_string(ids[i + j]) + "\r\n";
      if (!c.Send(req)) {
        replies.resize(ids.size(), "<send failed: " + c.error() + ">");
        return replies;
      }
      for (size_t j = 0; j < n; ++j) {
        replies.push_back(c.ReadReply());
        // A stalled or dead server: the rest would each wait a full timeout.
        if (replies.back().ends_with(kTimeoutMark) || replies.back().ends_with(kEofMark)) {
          replies.resize(ids.size(), replies.back());
          return replies;
        }
      }
    }
    return replies;
  };

  int described = 0;
  auto describe = [&described] { return described++ < kMaxDescribed; };

  std::vector<uint64_t> ids;
  for (const auto& [id, body] : ledger_.live) ids.push_back(id);
  std::vector<std::string> replies = peek_all(ids);
  const size_t live_checked = ids.size();
  size_t missing = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& body = ledger_.live[ids[i]];
    if (replies[i] == Found(ids[i], body)) continue;
    ++missing;
    if (describe())
      ADD_FAILURE() << "acknowledged job " << ids[i] << " (" << body.size() << "-byte body "
                    << body.substr(0, 40) << "...) after restart: peek gave "
                    << replies[i].substr(0, 200);
  }
  EXPECT_EQ(missing, 0u) << "round " << round << " fsync=" << GetParam() << ": " << missing
                         << " of " << ids.size() << " acknowledged jobs lost or changed";

  ids.assign(ledger_.deleted.begin(), ledger_.deleted.end());
  replies = peek_all(ids);
  const size_t deleted_checked = ids.size();
  size_t resurrected = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (replies[i] == "NOT_FOUND\r\n") continue;
    ++resurrected;
    if (describe())
      ADD_FAILURE() << "job " << ids[i] << ", deleted with DELETED, after restart: peek gave "
                    << replies[i].substr(0, 200);
  }
  EXPECT_EQ(resurrected, 0u) << "round " << round << " fsync=" << GetParam() << ": " << resurrected
                             << " of " << ids.size() << " acknowledged deletes came back";

  // Settles the uncertain jobs: there (with the right body) or gone.
  ids.clear();
  for (const auto& [id, body] : ledger_.uncertain) ids.push_back(id);
  replies = peek_all(ids);
  size_t settled_found = 0, settled_gone = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::optional<std::string>& body = ledger_.uncertain[ids[i]];
    if (replies[i] == "NOT_FOUND\r\n") {
      ++settled_gone;
      // An acknowledged put was durable, so its id is never handed out
      // again: the job now counts as deleted. A job of a put of unknown
      // outcome may never have been stored at all; it is simply forgotten.
      if (body) ledger_.deleted.insert(ids[i]);
      continue;
    }
    auto job = ParseJob("FOUND", replies[i]);
    bool ok =
        job && job->first == ids[i] && (body ? job->second == *body : WellFormedBody(job->second));
    if (!ok) {
      if (describe())
        ADD_FAILURE() << "job " << ids[i]
                      << " (delete of unknown outcome) after restart: peek gave "
                      << replies[i].substr(0, 200)
                      << (body ? " (expected body " + body->substr(0, 40) + "...)" : "");
      continue;
    }
    ++settled_found;
    ledger_.live[ids[i]] = job->second;
    ledger_.max_acked_id = std::max(ledger_.max_acked_id, ids[i]);
  }
  ledger_.uncertain.clear();

  // Ids continue above everything acknowledged before the crash.
  std::string body = MakeBody("probe", round, 0, 0, 64);
  std::string r = c.Call(PutCmd(body, 0, 0, 60));
  auto id = ParseInserted(r);
  ASSERT_TRUE(id.has_value()) << "put after restart: " << r;
  EXPECT_GT(*id, ledger_.max_acked_id)
      << "round " << round << ": an id was handed out again after the restart";
  ledger_.live[*id] = body;
  ledger_.max_acked_id = std::max(ledger_.max_acked_id, *id);

  std::printf(
      "crash round %d fsync=%s: kill_after_ms=%d requests=%llu acked_puts=%zu "
      "acked_deletes=%zu unknown=%llu (puts %llu, deletes %zu, other %llu); after restart: "
      "verified live=%zu deleted=%zu uncertain_found=%zu uncertain_gone=%zu stats_jobs=%llu "
      "next_id=%llu\n",
      round, GetParam(), f.kill_after_ms, static_cast<unsigned long long>(f.requests), f.acked_puts,
      f.acked_deletes,
      static_cast<unsigned long long>(f.unknown_puts + f.uncertain_deletes + f.unknown_other),
      static_cast<unsigned long long>(f.unknown_puts), f.uncertain_deletes,
      static_cast<unsigned long long>(f.unknown_other), live_checked, deleted_checked,
      settled_found, settled_gone, static_cast<unsigned long long>(total),
      static_cast<unsigned long long>(*id));
  // A job is handed to a worker only once its put is written, so no id a
  // worker saw can name another job after a crash.
  EXPECT_GT(*id, f.max_reserved_id)
      << "round " << round << ": id " << *id
      << " after the restart was already handed to a worker before the crash";
  std::fflush(stdout);
}

TEST_P(CrashTest, AcknowledgedChangesSurviveSigkillUnderLoad) {
  ASSERT_FALSE(dir_.path().empty()) << "cannot make a temporary directory";
  const int rounds = Rounds();
  const uint64_t seed = Seed();
  std::printf("crash fsync=%s: %d rounds, %d connections, DELAYQ_CRASH_SEED=%llu\n", GetParam(),
              rounds, Connections(), static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  auto start = Clock::now();
  RoundFigures last;
  for (int round = 1; round <= rounds; ++round) {
    ASSERT_NO_FATAL_FAILURE(StartServer());
    if (round > 1) ASSERT_NO_FATAL_FAILURE(Verify(round - 1, last));
    // Once the server and the ledger disagree, later rounds would only
    // repeat the same failure.
    if (HasFailure()) return;
    last = RunRound(round, rng);
    if (HasFailure()) return;
  }
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_NO_FATAL_FAILURE(Verify(rounds, last));
  int st = server_.Stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "SIGTERM: wait status " << st;
  if (Connections() == 1)
    EXPECT_GT(loop_syncs_, 0u) << "the loop never synced a lone connection's changes itself";
  std::printf("crash fsync=%s: %d rounds in %lld ms, %zu jobs live, %zu deleted at the end\n",
              GetParam(), rounds, static_cast<long long>(MillisSince(start)), ledger_.live.size(),
              ledger_.deleted.size());
}

// A power cut cannot be made here; what one leaves can. Writeback goes in
// any order, so a page of the journal's part not yet synced may never reach
// the disk while later ones do: it reads as zeros, with records after it.
// delayqd then starts with the jobs before the hole, says where it cut
// (none of the records lost was synced: under `no` none ever is), and takes
// puts again with ids above every one given before.
TEST(PowerCutTest, DelayqdStartsFromAJournalWithAHoleInWhatWasNotSynced) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  ServerProcess server;
  std::string error;
  const std::vector<std::string> args = {"-b", dir.path(), "--fsync", "no"};
  ASSERT_TRUE(server.Start(DelayqdPath(), args, &error)) << error;
  constexpr int kJobs = 200;
  auto body_of = [](int n) { return std::string(200, static_cast<char>('a' + n % 26)); };
  std::vector<uint64_t> ids;
  {
    RawClient c(server.port());
    ASSERT_TRUE(c.ok());
    for (int n = 0; n < kJobs; ++n) {
      const std::string body = body_of(n);
      std::string r = c.Call("put 0 0 60 " + std::to_string(body.size()) + "\r\n" + body + "\r\n");
      uint64_t id = 0;
      ASSERT_EQ(std::sscanf(r.c_str(), "INSERTED %llu", reinterpret_cast<unsigned long long*>(&id)),
                1)
          << r;
      ids.push_back(id);
    }
  }
  server.Signal(SIGKILL);
  (void)server.Stop();
  std::vector<std::filesystem::path> segments;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/journal"))
    segments.push_back(e.path());
  ASSERT_EQ(segments.size(), 1u);
  std::string journal;
  {
    std::ifstream in(segments[0], std::ios::binary);
    journal.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(journal.size(), 5u * 4096) << "the puts did not reach the journal";
  std::fill(journal.begin() + 2 * 4096, journal.begin() + 3 * 4096, '\0');
  std::ofstream(segments[0], std::ios::binary | std::ios::trunc)
      .write(journal.data(), static_cast<std::streamsize>(journal.size()));

  ASSERT_TRUE(server.Start(DelayqdPath(), args, &error)) << error;
  const std::string log = server.Log();
  const size_t at = log.find("event=journal_cut first_lost=");
  ASSERT_NE(at, std::string::npos) << log;
  const uint64_t first_lost = std::stoull(log.substr(at + 29));
  // One put, one record: the jobs before the hole's first record are back,
  // with their bodies, and none from it on.
  ASSERT_GT(first_lost, 10u);
  ASSERT_LT(first_lost, 60u);
  RawClient c(server.port());
  ASSERT_TRUE(c.ok());
  for (int n = 0; n < kJobs; ++n) {
    const std::string r = c.Call("peek " + std::to_string(ids[n]) + "\r\n");
    if (static_cast<uint64_t>(n) + 1 < first_lost) {
      EXPECT_EQ(r, "FOUND " + std::to_string(ids[n]) + " 200\r\n" + body_of(n) + "\r\n") << n;
    } else {
      EXPECT_EQ(r, "NOT_FOUND\r\n") << n;
    }
  }
  std::string r = c.Call("put 0 0 60 5\r\nafter\r\n");
  uint64_t id = 0;
  ASSERT_EQ(std::sscanf(r.c_str(), "INSERTED %llu", reinterpret_cast<unsigned long long*>(&id)), 1)
      << r;
  EXPECT_GT(id, ids.back());
  c.Close();
  int st = server.Stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "SIGTERM: wait status " << st;
  // After a clean stop ids go on from the last one handed out, not from
  // the end of what was leased ahead.
  ASSERT_TRUE(server.Start(DelayqdPath(), args, &error)) << error;
  RawClient again(server.port());
  ASSERT_TRUE(again.ok());
  r = again.Call("put 0 0 60 5\r\nlater\r\n");
  EXPECT_EQ(r, "INSERTED " + std::to_string(id + 1) + "\r\n");
  again.Close();
  st = server.Stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "SIGTERM: wait status " << st;
}

// SIGTERM, then SIGHUP, SIGUSR1 and SIGTERM again in turn, 20 µs apart,
// until delayqd is gone: the first stops it, the others are ignored at
// every moment of the stop (or reload and drain while it still runs), and
// it exits with 0 (before, the moment its signal sets were cleared left
// the signals' default action in place, and a storm like this one ended it
// by a signal in some rounds).
TEST(StopTest, ASigtermStormEndsDelayqdWithZero) {
  for (int round = 0; round < 20; ++round) {
    TempDir dir;
    ServerProcess server;
    std::string error;
    ASSERT_TRUE(server.Start(DelayqdPath(), {"-b", dir.path()}, &error)) << error;
    {
      RawClient c(server.port());
      ASSERT_TRUE(c.ok());
      ASSERT_EQ(c.Call("put 0 0 60 3\r\nabc\r\n").rfind("INSERTED", 0), 0u);
    }
    const pid_t pid = server.pid();
    const auto deadline = Clock::now() + 20s;
    const int storm[] = {SIGTERM, SIGHUP, SIGUSR1};
    for (size_t i = 0; ::kill(pid, storm[i % 3]) == 0 && Clock::now() < deadline; ++i) {
      if (!server.Alive()) break;  // reaped: the pid is no longer its
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    while (server.Alive() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
    ASSERT_FALSE(server.Alive()) << "round " << round << ": delayqd did not stop";
    const int st = server.exit_status();
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << "round " << round << ": wait status " << st << "\n"
        << server.Log();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Crash, CrashTest, ::testing::Values("always", "everysec", "always_one", "always_one_pipelined"),
    [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace delayq::testing
