// The beanstalkd handler over a Local backend and a manual clock: commands,
// pipelining, blocking reserves woken by other connections, extensions.
// Byte-exact comparisons with beanstalkd itself live in tests/server/.
#include "server/beanstalk_handler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/forwarding_backend.h"
#include "backend/local_backend.h"
#include "delayq/operations.h"
#include "delayq/token.h"
#include "manual_clock.h"
#include "store/mem_store.h"

namespace delayq::server {
namespace {

using testing::ManualClock;

struct Conn {
  Conn(ServerContext& ctx) : h(ctx, [this] { wakes++; }) {}
  std::string Send(std::string_view bytes) {
    h.input().Append(bytes);
    h.Process();
    return Take();
  }
  std::string Take() {
    std::string out;
    out.swap(h.output());
    return out;
  }
  int wakes = 0;
  BeanstalkHandler h;
};

class HandlerTest : public ::testing::Test {
 protected:
  HandlerTest() : backend_(io_, backend::LocalBackend::Options{}, clock_), ctx_(backend_) {
    ctx_.started_ms = clock_.now;
  }
  std::unique_ptr<Conn> Connect() { return std::make_unique<Conn>(ctx_); }
  void Tick(TimeMs ms) {
    clock_.now += ms;
    backend_.Poll();
  }

  boost::asio::io_context io_;
  ManualClock clock_;
  backend::LocalBackend backend_;
  ServerContext ctx_;
};

TEST_F(HandlerTest, PutReserveDelete) {
  auto c = Connect();
  EXPECT_EQ(c->Send("put 5 0 10 5\r\nhello\r\n"), "INSERTED 1\r\n");
  EXPECT_EQ(c->Send("reserve\r\n"), "RESERVED 1 5\r\nhello\r\n");
  EXPECT_EQ(c->Send("delete 1\r\n"), "DELETED\r\n");
  EXPECT_EQ(c->Send("delete 1\r\n"), "NOT_FOUND\r\n");
}

TEST_F(HandlerTest, PipelinedCommandsAnswerInOrder) {
  auto c = Connect();
  EXPECT_EQ(c->Send("put 1 0 10 1\r\na\r\nput 1 0 10 1\r\nb\r\nuse t\r\nlist-tube-used\r\n"
                    "peek-ready\r\nuse default\r\npeek-ready\r\n"),
            "INSERTED 1\r\nINSERTED 2\r\nUSING t\r\nUSING t\r\nNOT_FOUND\r\nUSING default\r\n"
            "FOUND 1 1\r\na\r\n");
}

TEST_F(HandlerTest, SplitInputIsReassembled) {
  auto c = Connect();
  std::string all = "put 1 0 10 3\r\nabc\r\npeek 1\r\n";
  std::string out;
  for (char ch : all) out += c->Send(std::string(1, ch));
  EXPECT_EQ(out, "INSERTED 1\r\nFOUND 1 3\r\nabc\r\n");
}

TEST_F(HandlerTest, BlockedReserveIsWokenByAPutElsewhere) {
  auto worker = Connect();
  auto producer = Connect();
  EXPECT_EQ(worker->Send("reserve\r\nstats-job 1\r\n"), "");
  EXPECT_TRUE(worker->h.blocked());
  EXPECT_EQ(producer->Send("put 1 0 10 2\r\nhi\r\n"), "INSERTED 1\r\n");
  EXPECT_EQ(worker->wakes, 1);
  EXPECT_FALSE(worker->h.blocked());
  EXPECT_EQ(worker->Take(), "RESERVED 1 2\r\nhi\r\n");
  // The pipelined command behind the reserve runs once the reserve is done.
  worker->h.Process();
  std::string stats = worker->Take();
  EXPECT_NE(stats.find("state: reserved"), std::string::npos) << stats;
}

TEST_F(HandlerTest, ReserveWithTimeoutTimesOutOnTheClock) {
  auto c = Connect();
  EXPECT_EQ(c->Send("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");
  EXPECT_EQ(c->Send("reserve-with-timeout 2\r\n"), "");
  Tick(1999);
  EXPECT_EQ(c->Take(), "");
  Tick(1);
  EXPECT_EQ(c->Take(), "TIMED_OUT\r\n");
}

TEST_F(HandlerTest, ClosingAWaitingConnectionIsSafe) {
  auto c = Connect();
  EXPECT_EQ(c->Send("reserve\r\n"), "");
  c.reset();
  auto p = Connect();
  EXPECT_EQ(p->Send("put 1 0 10 1\r\nx\r\nstats-job 1\r\n").substr(0, 12), "INSERTED 1\r\n");
}

TEST_F(HandlerTest, ReservedJobsOfAClosedConnectionReturn) {
  auto a = Connect();
  auto b = Connect();
  a->Send("put 1 0 100 1\r\nx\r\n");
  EXPECT_EQ(b->Send("reserve\r\n"), "RESERVED 1 1\r\nx\r\n");
  b.reset();
  EXPECT_EQ(a->Send("reserve-with-timeout 0\r\n"), "RESERVED 1 1\r\nx\r\n");
}

TEST_F(HandlerTest, DelayedPutFiresOnTheClock) {
  auto c = Connect();
  EXPECT_EQ(c->Send("put 1 2 10 1\r\nx\r\nreserve-with-timeout 0\r\n"),
            "INSERTED 1\r\nTIMED_OUT\r\n");
  Tick(2000);
  EXPECT_EQ(c->Send("reserve-with-timeout 0\r\n"), "RESERVED 1 1\r\nx\r\n");
}

TEST_F(HandlerTest, ExtensionsPutExKeysBatchClear) {
  auto c = Connect();
  EXPECT_EQ(c->Send("put-ex 1 250 5000 1 key=order-1\r\na\r\n"), "INSERTED 1\r\n");
  EXPECT_EQ(c->Send("put-ex 1 250 5000 1 key=order-1\r\na\r\n"), "EXISTS 1\r\n");
  EXPECT_EQ(c->Send("peek-key order-1\r\n"), "FOUND 1 1\r\na\r\n");
  EXPECT_EQ(c->Send("peek-delayed\r\n"), "FOUND 1 1\r\na\r\n");
  Tick(249);
  EXPECT_EQ(c->Send("peek-ready\r\n"), "NOT_FOUND\r\n");
  Tick(1);
  EXPECT_EQ(c->Send("peek-ready\r\n"), "FOUND 1 1\r\na\r\n");
  EXPECT_EQ(c->Send("delete-key order-1\r\n"), "DELETED\r\n");
  EXPECT_EQ(c->Send("put 1 0 10 1\r\nb\r\nput 1 0 10 1\r\nc\r\nput 1 0 10 1\r\nd\r\n"),
            "INSERTED 2\r\nINSERTED 3\r\nINSERTED 4\r\n");
  EXPECT_EQ(c->Send("reserve-batch 2 0\r\n"),
            "RESERVED_BATCH 2\r\nRESERVED 2 1\r\nb\r\nRESERVED 3 1\r\nc\r\n");
  EXPECT_EQ(c->Send("clear-tube default all\r\n"), "CLEARED 1\r\n");
  EXPECT_EQ(c->Send("clear-tube nosuch all\r\n"), "NOT_FOUND\r\n");
}

TEST_F(HandlerTest, BackoffAppliesToReleaseWithoutDelayAndTriesBury) {
  auto c = Connect();
  EXPECT_EQ(c->Send("put-ex 1 0 60000 1 tries=2 backoff=4m\r\nx\r\n"), "INSERTED 1\r\n");
  EXPECT_EQ(c->Send("reserve\r\n"), "RESERVED 1 1\r\nx\r\n");
  EXPECT_EQ(c->Send("release 1 1 0\r\n"), "RELEASED\r\n");
  std::string st = c->Send("stats-job 1\r\n");
  EXPECT_NE(st.find("state: delayed"), std::string::npos) << st;
  EXPECT_NE(st.find("delay: 240"), std::string::npos) << st;
  EXPECT_EQ(c->Send("kick-job 1\r\nreserve\r\nrelease 1 1 0\r\n"),
            "KICKED\r\nRESERVED 1 1\r\nx\r\nBURIED\r\n");
  EXPECT_EQ(c->Send("put-ex 1 0 60000 1 backoff=bogus\r\nx\r\n"), "BAD_FORMAT\r\n");
}

TEST_F(HandlerTest, DrainingRefusesPutsOnly) {
  auto c = Connect();
  ctx_.draining = true;
  EXPECT_EQ(c->Send("put 1 0 10 1\r\nx\r\nlist-tubes\r\n"),
            "DRAINING\r\nOK 14\r\n---\n- default\n\r\n");
}

TEST_F(HandlerTest, StatsCountCommandsConnectionsAndRoles) {
  auto a = Connect();
  auto b = Connect();
  a->Send("put 1 0 10 1\r\nx\r\n");
  b->Send("reserve\r\n");
  std::string s = a->Send("stats\r\n");
  EXPECT_NE(s.find("\ncmd-put: 1\n"), std::string::npos);
  EXPECT_NE(s.find("\ncmd-reserve: 1\n"), std::string::npos);
  EXPECT_NE(s.find("\ncurrent-connections: 2\n"), std::string::npos);
  EXPECT_NE(s.find("\ncurrent-producers: 1\n"), std::string::npos);
  EXPECT_NE(s.find("\ncurrent-workers: 1\n"), std::string::npos);
  EXPECT_NE(s.find("\ncurrent-jobs-reserved: 1\n"), std::string::npos);
  b.reset();
  s = a->Send("stats\r\n");
  EXPECT_NE(s.find("\ncurrent-workers: 0\n"), std::string::npos);
  EXPECT_NE(s.find("\ncurrent-jobs-ready: 1\n"), std::string::npos);
}

TEST_F(HandlerTest, QuitClosesWithoutReply) {
  auto c = Connect();
  EXPECT_EQ(c->Send("quit\r\nput 1 0 1 1\r\nx\r\n"), "");
  EXPECT_TRUE(c->h.want_close());
}

// `stats` shows a cmd-* line for each row of the operation table that
// has one, in the table's order, counting the commands of that row.
TEST_F(HandlerTest, StatsCountsEachCommandInItsRow) {
  auto c = Connect();
  c->Send("use a\r\nuse b\r\nput-ex 1 0 1000 1\r\nx\r\nput 1 0 1 1\r\ny\r\npeek-key k\r\n");
  std::string s = c->Send("stats\r\n");
  std::vector<std::string> lines;
  for (size_t at = s.find("\ncmd-"); at != std::string::npos; at = s.find("\ncmd-", at + 1))
    lines.push_back(s.substr(at + 1, s.find('\n', at + 1) - at - 1));
  std::vector<std::string> want;
  for (const Operation& o : kOperations) {
    if (o.stat.empty()) continue;
    uint64_t n = o.op == Op::kUse ? 2 : o.op == Op::kPut ? 2 : o.op == Op::kStats ? 1 : 0;
    want.push_back(std::string(o.stat) + ": " + std::to_string(n));
  }
  EXPECT_EQ(lines, want);
  // peek-key has no line of its own, but is counted.
  EXPECT_EQ(ctx_.counters.Of(Protocol::kBeanstalk, Op::kPeekKey), 1u);
}

// Over a store, each write of which is counted: the commands a connection
// pipelines run while the first one's change is on its way to the store,
// so their changes share its write; their replies leave in order, once
// the write is done; a reserve behind them runs only then.
// Its writes wait at a gate while it is closed (it is open by default).
class CountingWrites final : public store::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  Status Apply(const std::vector<Mutation>& batch) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      entered_++;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_ || passes_ > 0; });
      if (!open_) passes_--;
    }
    writes++;
    return inner_.Apply(batch);
  }
  void Close() { Set(false, 0); }
  void Open() { Set(true, 0); }
  void Pass() { Set(false, 1); }  // one write more through the closed gate
  // Writes that came to the gate, let through or not.
  int entered() {
    std::lock_guard<std::mutex> lock(mu_);
    return entered_;
  }
  std::atomic<int> writes{0};

 private:
  void Set(bool open, int more_passes) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = open;
    passes_ = more_passes == 0 ? 0 : passes_ + more_passes;
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int passes_ = 0;
  int entered_ = 0;
};

// A handler's world over a store whose writes are counted. Pump runs the
// backend's completions and the connection until `done` holds of what it
// answered, or 10 s pass, and returns the answers.
struct OverAStore {
  static backend::LocalBackend::Options With(store::Store* s) {
    backend::LocalBackend::Options o;
    o.store = s;
    return o;
  }
  std::string Pump(Conn& c, const std::function<bool(const std::string&)>& done) {
    std::string out;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done(out) && std::chrono::steady_clock::now() < deadline) {
      io.restart();
      io.run_for(std::chrono::milliseconds(1));
      c.h.Process();
      out += c.Take();
    }
    return out;
  }
  boost::asio::io_context io;
  ManualClock clock;
  store::MemStore mem;
  CountingWrites counting{mem};
  backend::LocalBackend local{io, With(&counting), clock};
  // Before the backend goes (its writer may wait at the gate).
  struct OpenAtEnd {
    CountingWrites& gate;
    ~OpenAtEnd() { gate.Open(); }
  } open_at_end{counting};
};

// Pipelined puts of jobs first..last (ids as a fresh backend hands them
// out), and the replies they get.
struct Puts {
  Puts(int first, int last) {
    for (int i = first; i <= last; ++i) {
      in += "put 0 0 10 1\r\nx\r\n";
      want += "INSERTED " + std::to_string(i) + "\r\n";
    }
  }
  std::string in, want;
};

TEST(HandlerOverAStore, PipelinedChangesShareOneWriteAndAnswerInOrder) {
  OverAStore w;
  ServerContext ctx(w.local);
  Conn c(ctx);
  const Puts puts(1, 20);
  std::string in = puts.in, want = puts.want;
  in += "list-tube-used\r\nbogus\r\ndelete 3\r\nreserve-with-timeout 0\r\nstats-job 9\r\n";
  want += "USING default\r\nUNKNOWN_COMMAND\r\nDELETED\r\nRESERVED 1 1\r\nx\r\n";
  // Nothing is answered before the write, and the commands up to the
  // reserve ran: their changes are in the one batch it will write.
  EXPECT_EQ(c.Send(in), "");
  EXPECT_TRUE(c.h.reply_pending());
  EXPECT_FALSE(c.h.blocked()) << "later commands may come, and join";
  std::string out =
      w.Pump(c, [](const std::string& o) { return o.find("id: 9\n") != std::string::npos; });
  ASSERT_EQ(out.substr(0, want.size()), want) << out;
  EXPECT_NE(out.find("id: 9\n"), std::string::npos) << out;
  EXPECT_EQ(w.counting.writes.load(), 1) << "20 puts and a delete, one write";
  EXPECT_EQ(w.mem.size(), 19u);
  EXPECT_FALSE(c.h.reply_pending());
}

// While the store is behind (Backend::StoreBehind: the writer slower than
// the clients), a connection runs no command past one whose change found
// it behind until a reply of its own has left: from nothing on its way,
// what it pipelines joins the store's queue one change at a time, not all
// at once.
class BehindBackend final : public backend::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  bool StoreBehind() const override { return behind; }
  bool behind = true;
};

TEST(HandlerOverAStore, WhileTheStoreIsBehindPipelinedChangesWaitForTheReplyAhead) {
  OverAStore w;
  BehindBackend backend(w.local);
  ServerContext ctx(backend);
  Conn c(ctx);
  const Puts puts(1, 5);
  std::string in = puts.in, want = puts.want;
  in += "list-tube-used\r\n";
  want += "USING default\r\n";
  EXPECT_EQ(c.Send(in), "");
  EXPECT_TRUE(c.h.blocked()) << "the second put must wait for the first one's reply";
  EXPECT_EQ(w.Pump(c, [&](const std::string& o) { return o.size() >= want.size(); }), want);
  EXPECT_EQ(w.counting.writes.load(), 5) << "one put a write";
  // Caught up: pipelined changes share a write again.
  backend.behind = false;
  const Puts more(6, 7);
  EXPECT_EQ(c.Send(more.in), "");
  EXPECT_FALSE(c.h.blocked());
  EXPECT_EQ(w.Pump(c, [&](const std::string& o) { return o.size() >= more.want.size(); }),
            more.want);
  EXPECT_EQ(w.counting.writes.load(), 6);
}

// A connection that had changes on their way when the store fell behind
// runs one command more, which finds it behind; then none until replies of
// its own have left, and one command each time: what it has on its way
// does not grow.
TEST(HandlerOverAStore, FallenBehindWithChangesOnTheirWayAConnectionAddsNoMoreThanLeave) {
  OverAStore w;
  BehindBackend backend(w.local);
  backend.behind = false;
  ServerContext ctx(backend);
  Conn c(ctx);
  auto puts = [&] { return ctx.counters.Of(Protocol::kBeanstalk, Op::kPut); };
  w.counting.Close();
  EXPECT_EQ(c.Send("put 0 0 10 1\r\na\r\nput 0 0 10 1\r\nb\r\nput 0 0 10 1\r\nc\r\n"), "");
  EXPECT_FALSE(c.h.blocked());
  // The writer takes the three puts' batch and waits at the gate.
  w.Pump(c, [&](const std::string&) { return w.counting.entered() == 1; });
  ASSERT_EQ(w.counting.entered(), 1);
  backend.behind = true;
  std::string in;
  for (int i = 4; i <= 7; ++i) in += "put 0 0 10 1\r\n" + std::to_string(i) + "\r\n";
  EXPECT_EQ(c.Send(in + "list-tube-used\r\n"), "");
  EXPECT_TRUE(c.h.blocked());
  EXPECT_EQ(puts(), 4u) << "the fourth put runs, the others wait";
  // The three are written and answered: one more put runs.
  w.counting.Pass();
  EXPECT_EQ(
      w.Pump(c, [](const std::string& o) { return o.find("INSERTED 3") != std::string::npos; }),
      "INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\n");
  EXPECT_EQ(puts(), 5u);
  EXPECT_TRUE(c.h.blocked());
  w.counting.Open();
  EXPECT_EQ(w.Pump(c, [](const std::string& o) { return o.find("USING") != std::string::npos; }),
            "INSERTED 4\r\nINSERTED 5\r\nINSERTED 6\r\nINSERTED 7\r\nUSING default\r\n");
  EXPECT_EQ(w.mem.size(), 7u);
}

// A reserve served by a put whose write is still on its way (its answer
// waits for the store) is no longer cancelled: neither by its client's
// half-close or full input (CancelReserve), nor by a reload that takes the
// token's right (the job was taken before it). Its one answer comes once
// the write is done: no TIMED_OUT or UNAUTHORIZED ahead of it.
TEST(HandlerOverAStore, AReserveServedWhileItsPutIsWrittenIsAnsweredOnce) {
  for (const bool by_reload : {false, true}) {
    SCOPED_TRACE(by_reload ? "reload" : "cancel");
    boost::asio::io_context io;
    ManualClock clock;
    store::MemStore mem;
    backend::LocalBackend::Options options;
    options.store = &mem;
    backend::LocalBackend backend(io, options, clock);
    ServerContext ctx(backend);
    Token token;
    token.name = "worker";
    token.sha256 = Sha256("dq_worker");
    token.topics = {"*"};
    token.rights = kRightProduce | kRightConsume;
    auto policy = AccessPolicy::Make({token}, *Networks::Parse("none"));
    ASSERT_TRUE(policy.ok());
    ctx.access.Reload(*policy);
    BeanstalkHandler worker(
        ctx, [] {}, boost::asio::ip::make_address("10.0.0.1"));
    auto take = [&] {
      std::string out;
      out.swap(worker.output());
      return out;
    };
    auto send = [&](std::string_view bytes) {
      worker.input().Append(bytes);
      worker.Process();
      return take();
    };
    EXPECT_EQ(send("auth dq_worker\r\n"), "AUTHENTICATED\r\n");
    EXPECT_EQ(send("reserve-with-timeout 60\r\n"), "");
    Conn producer(ctx);  // in this process: trusted
    producer.h.input().Append("put 0 0 10 1\r\nx\r\n");
    producer.h.Process();
    ASSERT_TRUE(worker.reserving());
    // A connection whose client half-closed now waits for this answer
    // instead of closing (BeanstalkConnection::Settle).
    EXPECT_TRUE(worker.reply_pending());
    if (by_reload) {
      auto none = AccessPolicy::Make({}, *Networks::Parse("none"));
      ASSERT_TRUE(none.ok());
      ctx.ReloadAccess(*none);
    } else {
      EXPECT_FALSE(worker.CancelReserve());
    }
    EXPECT_EQ(take(), "") << "answered before the job's write";
    std::string out;
    for (int i = 0; i < 10'000 && out.empty(); ++i) {
      io.restart();
      io.run_for(std::chrono::milliseconds(1));
      worker.Process();
      out += take();
    }
    EXPECT_EQ(out, "RESERVED 1 1\r\nx\r\n");
    EXPECT_EQ(send("touch 1\r\n"), by_reload ? "UNAUTHORIZED\r\n" : "TOUCHED\r\n");
  }
}

// A token's reserve leaves out the watched topics it may not consume
// without counting a refusal for each; one that may consume none of them
// is refused, and counted, once.
TEST_F(HandlerTest, AReserveCountsOneRefusalNotOnePerTopicLeftOut) {
  Token token;
  token.name = "worker";
  token.sha256 = Sha256("dq_worker");
  token.topics = {"orders.*"};
  token.rights = kRightConsume;
  auto policy = AccessPolicy::Make({token}, *Networks::Parse("none"));
  ASSERT_TRUE(policy.ok());
  ctx_.access.Reload(*policy);
  auto worker = [&] {
    auto h = std::make_unique<BeanstalkHandler>(
        ctx_, [] {}, boost::asio::ip::make_address("10.0.0.1"));
    h->input().Append("auth dq_worker\r\n");
    h->Process();
    h->output().clear();
    return h;
  };
  auto send = [](BeanstalkHandler& h, std::string_view bytes) {
    h.input().Append(bytes);
    h.Process();
    std::string out;
    out.swap(h.output());
    return out;
  };
  auto some = worker();
  EXPECT_EQ(send(*some, "watch orders.eu\r\nwatch a\r\nwatch b\r\n"),
            "WATCHING 2\r\nFORBIDDEN\r\nFORBIDDEN\r\n");
  const uint64_t before = ctx_.access.forbidden;
  EXPECT_EQ(send(*some, "reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");
  EXPECT_EQ(ctx_.access.forbidden, before) << "default, left out, counted as refused";
  auto none = worker();  // watches default alone
  EXPECT_EQ(send(*none, "reserve-with-timeout 0\r\n"), "FORBIDDEN\r\n");
  EXPECT_EQ(ctx_.access.forbidden, before + 1);
}

}  // namespace
}  // namespace delayq::server
