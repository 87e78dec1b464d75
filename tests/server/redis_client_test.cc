// RedisClient against a real redis-server: replies of every type and size
// come through whole, as hiredis's reader parses them into the client's
// reply arena (backend/redis_client.cc), also when a reply arrives in many
// reads and when replies follow each other in one read. Every test runs
// twice: over plain TCP, and over TLS (a redis-server serving TLS alone,
// with a certificate the test makes).
#include "backend/redis_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "server/io_wait.h"
#include "server/redis_process.h"
#include "server/test_pki.h"

namespace delayq::backend {
namespace {

using std::chrono::milliseconds;

// A reply copied out of hiredis's objects (they die with the handler).
struct Value {
  int type = 0;
  long long integer = 0;
  std::string str;
  std::vector<Value> elements;
  bool operator==(const Value&) const = default;
};

Value Copy(const redisReply* r) {
  Value v;
  v.type = r->type;
  if (r->type == REDIS_REPLY_INTEGER) v.integer = r->integer;
  if (r->str != nullptr) {
    v.str.assign(r->str, r->len);
    EXPECT_EQ(r->str[r->len], '\0');  // hiredis's strings end in a NUL
  }
  for (size_t i = 0; i < r->elements; ++i) v.elements.push_back(Copy(r->element[i]));
  return v;
}

Value Str(std::string s) { return Value{REDIS_REPLY_STRING, 0, std::move(s), {}}; }
Value Int(long long i) { return Value{REDIS_REPLY_INTEGER, i, "", {}}; }
Value Nil() { return Value{REDIS_REPLY_NIL, 0, "", {}}; }
Value Arr(std::vector<Value> e) { return Value{REDIS_REPLY_ARRAY, 0, "", std::move(e)}; }

class RedisClientTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::string error;
    if (GetParam()) {
      ASSERT_TRUE(pki_.Init(&error)) << error;
      ASSERT_TRUE(pki_.Issue("redis", "IP:127.0.0.1", &error)) << error;
      std::vector<std::string> flags = pki_.RedisFlags("redis");
      flags.insert(flags.end(), {"--tls-auth-clients", "no"});
      redis_.UseTls(flags);
      auto ctx = NewRedisTlsContext({.ca_file = pki_.ca()});
      ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
      tls_ = *ctx;
    }
    // A script that runs long on a loaded machine must not make Redis
    // answer BUSY to the other connections (ACommandTheSocketTakesIn...).
    ASSERT_TRUE(redis_.Start(&error, {"--busy-reply-threshold", "60000"})) << error;
    client_ = std::make_unique<RedisClient>(io_, Options());
    client_->Start();
    ASSERT_TRUE(testing::RunIoUntil(
        io_, [&] { return client_->connected(); }, milliseconds(5000)));
  }

  // Sends the commands at once (their replies may share a read) and
  // returns their replies.
  std::vector<Value> Run(const std::vector<std::vector<std::string_view>>& commands) {
    std::vector<Value> out(commands.size());
    size_t got = 0;
    for (size_t i = 0; i < commands.size(); ++i)
      client_->Command(commands[i], [&out, &got, i](const redisReply* r) {
        if (r != nullptr) out[i] = Copy(r);
        ++got;
      });
    EXPECT_TRUE(testing::RunIoUntil(
        io_, [&] { return got == commands.size(); }, milliseconds(10000)));
    return out;
  }

  // A subscriber's options for redis_ that note into `events` what it
  // hears: "+channel" for a subscription confirmed, "channel:message".
  RedisClient::Options SubscriberOptions(std::vector<std::string>* events) const {
    RedisClient::Options so = Options();
    so.subscriber = true;
    so.on_message = [events](std::string_view ch, std::string_view msg) {
      events->push_back(std::string(ch) + ":" + std::string(msg));
    };
    so.on_subscribed = [events](std::string_view ch) { events->push_back("+" + std::string(ch)); };
    return so;
  }

  // Sends on `busy` a script that holds Redis for 1.5 s, answering no
  // other connection meanwhile (stopped or wedged alike); *done once it
  // has ended.
  static void HoldRedis(RedisClient& busy, bool* done) {
    busy.Command({"EVAL",
                  "local a = redis.call('TIME') repeat local b = redis.call('TIME') "
                  "until (b[1] - a[1]) * 1000000 + b[2] - a[2] > 1500000 return 1",
                  "0"},
                 [done](const redisReply*) { *done = true; });
  }

  // A client's options for redis_.
  RedisClient::Options Options() const {
    RedisClient::Options o;
    o.port = redis_.port();
    o.tls = tls_;
    return o;
  }

  testing::TestPki pki_;
  std::shared_ptr<boost::asio::ssl::context> tls_;  // null: plain TCP
  testing::RedisProcess redis_;
  boost::asio::io_context io_;
  std::unique_ptr<RedisClient> client_;
};

TEST_P(RedisClientTest, EveryReplyTypeComesThrough) {
  auto r = Run({{"SET", "k", "v"},
                {"GET", "k"},
                {"GET", "missing"},
                {"INCRBY", "n", "-42"},
                {"NOSUCHCOMMAND"},
                {"EVAL", "return {1, {2, {'a', 'b'}, {}}, 'x', false}", "0"}});
  EXPECT_EQ(r[0], (Value{REDIS_REPLY_STATUS, 0, "OK", {}}));
  EXPECT_EQ(r[1], Str("v"));
  EXPECT_EQ(r[2], Nil());
  EXPECT_EQ(r[3], Int(-42));
  EXPECT_EQ(r[4].type, REDIS_REPLY_ERROR);
  EXPECT_NE(r[4].str.find("unknown command"), std::string::npos) << r[4].str;
  EXPECT_EQ(r[5],
            Arr({Int(1), Arr({Int(2), Arr({Str("a"), Str("b")}), Arr({})}), Str("x"), Nil()}));
}

// A command is written when it is sent (RedisClient::Flush; over TLS, on
// the loop); what the socket does not take goes on write readiness. Redis, busy in a
// script on another connection, reads nothing meanwhile, so a command of
// 24 MB fills the socket's buffers and leaves in parts; the commands after
// it wait their turn, and all come back whole and in order.
TEST_P(RedisClientTest, ACommandTheSocketTakesInPartsGoesWhole) {
  RedisClient busy(io_, Options());
  busy.Start();
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return busy.connected(); }, milliseconds(5000)));
  bool script_done = false;
  busy.Command({"EVAL", "local t = 0 for i = 1, 40000000 do t = t + i end return 1", "0"},
               [&](const redisReply*) { script_done = true; });
  testing::RunIoFor(io_, milliseconds(50));  // the script runs
  std::mt19937 rng(5);
  std::string big(24'000'000, '\0');
  for (char& c : big) c = static_cast<char>(rng());
  auto r = Run({{"SET", "big", big}, {"SET", "small", "s"}, {"STRLEN", "big"}, {"GET", "small"}});
  EXPECT_TRUE(script_done);
  EXPECT_EQ(r[0], (Value{REDIS_REPLY_STATUS, 0, "OK", {}}));
  EXPECT_EQ(r[2], Int(24'000'000));
  EXPECT_EQ(r[3], Str("s"));
  EXPECT_EQ(Run({{"GET", "big"}})[0], Str(big));
}

TEST_P(RedisClientTest, LargeAndManyRepliesComeThroughWhole) {
  std::mt19937 rng(11);
  auto random_string = [&](size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());  // any byte, \r\n and \0 too
    return s;
  };
  // Strings below, at and far above the arena's block sizes, in one list,
  // and a big value alone: replies of many reads and many blocks.
  std::vector<std::string> items;
  for (size_t n : {0, 1, 100, 8191, 8192, 8193, 32767, 32768, 40000, 300000})
    items.push_back(random_string(n));
  for (int i = 0; i < 5000; ++i) items.push_back(random_string(rng() % 40));
  std::vector<std::string_view> rpush{"RPUSH", "list"};
  rpush.insert(rpush.end(), items.begin(), items.end());
  std::string big = random_string(3'000'000);
  auto r = Run({rpush, {"SET", "big", big}});
  ASSERT_EQ(r[0], Int(static_cast<long long>(items.size())));

  std::vector<Value> want_list;
  for (const std::string& s : items) want_list.push_back(Str(s));
  Value want = Arr(want_list);
  // Several rounds: the arena's blocks are reused from reply to reply.
  for (int round = 0; round < 5; ++round) {
    auto got = Run({{"LRANGE", "list", "0", "-1"},
                    {"GET", "big"},
                    {"LRANGE", "list", "0", "2"},
                    {"LLEN", "list"}});
    ASSERT_EQ(got[0], want) << "round " << round;
    ASSERT_EQ(got[1], Str(big)) << "round " << round;
    ASSERT_EQ(got[2], Arr({want_list[0], want_list[1], want_list[2]})) << "round " << round;
    ASSERT_EQ(got[3], Int(static_cast<long long>(items.size())));
  }
}

// A subscriber hears Redis confirm each subscription before any message of
// the channel, and again for each channel it renews after Redis restarted.
TEST_P(RedisClientTest, SubscriberHearsConfirmationsAndRenewsThemAfterARestart) {
  std::vector<std::string> events;
  RedisClient sub(io_, SubscriberOptions(&events));
  sub.Start();
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return sub.connected(); }, milliseconds(5000)));
  sub.Subscribe("a");
  sub.Subscribe("b");
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return events.size() == 2; }, milliseconds(5000)));
  Run({{"PUBLISH", "a", "1"}, {"PUBLISH", "b", "2"}, {"PUBLISH", "c", "3"}});
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return events.size() == 4; }, milliseconds(5000)));
  EXPECT_EQ(events, (std::vector<std::string>{"+a", "+b", "a:1", "b:2"}));

  events.clear();
  redis_.Kill();
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return !sub.connected(); }, milliseconds(5000)));
  std::string error;
  ASSERT_TRUE(redis_.Start(&error)) << error;
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return sub.connected() && client_->connected() && events.size() == 2; },
      milliseconds(10000)));
  std::sort(events.begin(), events.end());
  EXPECT_EQ(events, (std::vector<std::string>{"+a", "+b"}));
  Run({{"PUBLISH", "b", "after"}});
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return events.size() == 3; }, milliseconds(5000)));
  EXPECT_EQ(events.back(), "b:after");
}

// A Redis that keeps the connection open and answers nothing (here busy
// in a script for 1.5 s; stopped or wedged alike): a command waits no
// longer than the reply timeout and a quarter, the connection is made
// again, and commands run once Redis answers.
TEST_P(RedisClientTest, ACommandWithNoReplyFailsItsConnectionAfterTheReplyTimeout) {
  RedisClient busy(io_, Options());
  busy.Start();
  RedisClient::Options o = Options();
  o.reply_timeout = milliseconds(400);
  RedisClient watched(io_, o);
  watched.Start();
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return busy.connected() && watched.connected(); }, milliseconds(5000)));
  // The reply timeout only counts from a command: an idle connection stays.
  testing::RunIoFor(io_, milliseconds(600));
  EXPECT_TRUE(watched.connected()) << watched.last_error();
  bool script_done = false;
  HoldRedis(busy, &script_done);
  testing::RunIoFor(io_, milliseconds(50));  // the script runs
  const auto sent = std::chrono::steady_clock::now();
  bool answered = false, null_reply = false;
  watched.Command({"PING"}, [&](const redisReply* r) {
    answered = true;
    null_reply = r == nullptr;
  });
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return answered; }, milliseconds(5000)));
  const auto waited = std::chrono::steady_clock::now() - sent;
  EXPECT_TRUE(null_reply);
  EXPECT_FALSE(script_done) << "the reply came only after the script";
  EXPECT_GE(waited, milliseconds(400));
  EXPECT_LT(waited, milliseconds(1200));
  EXPECT_NE(watched.last_error().find("sent nothing for 400 ms"), std::string::npos)
      << watched.last_error();
  // Made again once Redis answers.
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return script_done && watched.connected(); }, milliseconds(10000)))
      << watched.last_error();
  bool pong = false;
  watched.Command({"PING"}, [&](const redisReply* r) { pong = r != nullptr; });
  EXPECT_TRUE(testing::RunIoUntil(
      io_, [&] { return pong; }, milliseconds(5000)));
}

// A subscriber has no command in flight between messages: when it has
// heard nothing for half the reply timeout it sends a PING, which keeps
// an idle subscription up while Redis answers, and gives it up when Redis
// is silent (busy in a script for 1.5 s here; stopped or cut off alike).
// It is made again once Redis answers, with its subscriptions.
TEST_P(RedisClientTest, ASubscriberAsksASilentRedisAndIsMadeAgain) {
  RedisClient busy(io_, Options());
  busy.Start();
  std::vector<std::string> events;
  RedisClient::Options so = SubscriberOptions(&events);
  so.reply_timeout = milliseconds(400);
  RedisClient sub(io_, so);
  sub.Start();
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return busy.connected() && sub.connected(); }, milliseconds(5000)));
  sub.Subscribe("a");
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return events.size() == 1; }, milliseconds(5000)));
  // Idle for five timeouts: its PINGs are answered, it stays.
  testing::RunIoFor(io_, milliseconds(2000));
  EXPECT_TRUE(sub.connected()) << sub.last_error();
  EXPECT_EQ(events, (std::vector<std::string>{"+a"}));
  bool script_done = false;
  HoldRedis(busy, &script_done);
  const auto started = std::chrono::steady_clock::now();
  // Silent from the script's start: a PING within 200 ms and a quarter,
  // given up 400 ms and a quarter after it.
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return !sub.connected(); }, milliseconds(5000)));
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(1400));
  EXPECT_FALSE(script_done) << "given up only after the script";
  EXPECT_NE(sub.last_error().find("sent nothing for 400 ms"), std::string::npos)
      << sub.last_error();
  // Made again once Redis answers: subscribed again, and it hears.
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return script_done && sub.connected() && events.size() == 2; },
      milliseconds(10000)))
      << sub.last_error();
  EXPECT_EQ(events.back(), "+a");
  Run({{"PUBLISH", "a", "after"}});
  ASSERT_TRUE(testing::RunIoUntil(
      io_, [&] { return events.size() == 3; }, milliseconds(5000)));
  EXPECT_EQ(events.back(), "a:after");
}

INSTANTIATE_TEST_SUITE_P(PlainAndTls, RedisClientTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Tls" : "Plain";
                         });

// A server that answers the client's first command (PING) with +PONG and
// its second with `script` (a byte each `gap` when not 0), then reads and
// drops whatever comes, keeping the connection open until the test ends: a
// broken or hostile Redis, or a slow link.
class ScriptedRedis {
 public:
  explicit ScriptedRedis(std::string script, milliseconds gap = milliseconds(0))
      : script_(std::move(script)), gap_(gap) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener_, 1) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      ADD_FAILURE() << "cannot listen: " << std::strerror(errno);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedRedis() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    if (conn_ >= 0) ::shutdown(conn_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
    if (conn_ >= 0) ::close(conn_);
  }
  int port() const { return port_; }

 private:
  void Serve() {
    conn_ = ::accept(listener_, nullptr, nullptr);
    if (conn_ < 0) return;
    std::string in;
    char buf[4096];
    int commands = 0;
    while (!stop_) {
      ssize_t n = ::recv(conn_, buf, sizeof buf, 0);
      if (n <= 0) return;
      in.append(buf, static_cast<size_t>(n));
      // The client sends its second command only once the first is
      // answered, and these are short: a read that ends a line ends one.
      if (commands == 2 || !in.ends_with("\r\n")) continue;
      const std::string out = commands++ == 0 ? std::string("+PONG\r\n") : script_;
      in.clear();
      for (size_t off = 0; off < out.size() && !stop_;) {
        if (gap_.count() > 0 && off > 0) std::this_thread::sleep_for(gap_);
        const size_t len = gap_.count() > 0 ? 1 : out.size() - off;
        ssize_t w = ::send(conn_, out.data() + off, len, MSG_NOSIGNAL);
        if (w <= 0) return;
        off += static_cast<size_t>(w);
      }
    }
  }

  std::string script_;
  milliseconds gap_;
  int listener_ = -1, conn_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Resident memory of this process.
size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// Sends one command to `server` (after the client's PING) and runs the
// loop until its handler ran or `wait` passed; the client is returned
// through `client` to be looked at.
bool AskScripted(boost::asio::io_context& io, const ScriptedRedis& server, size_t max_reply,
                 std::unique_ptr<RedisClient>* client, bool* got_null,
                 milliseconds wait = milliseconds(10000)) {
  RedisClient::Options o;
  o.port = server.port();
  o.max_reply = max_reply;
  *client = std::make_unique<RedisClient>(io, o);
  (*client)->Start();
  if (!testing::RunIoUntil(
          io, [&] { return (*client)->connected(); }, milliseconds(5000)))
    return false;
  bool done = false;
  (*client)->Command({"GET", "k"}, [&](const redisReply* r) {
    done = true;
    *got_null = r == nullptr;
  });
  return testing::RunIoUntil(
      io, [&] { return done; }, wait);
}

// "*100000000\r\n" announces 100 million elements in 12 bytes: the client
// must not set aside their 800 MB before they come (the element table
// grows as they arrive), and goes on waiting for them.
TEST(RedisClientHostileServer, AnArraysAnnouncedLengthCostsNothingUntilItsElementsCome) {
  ScriptedRedis server("*100000000\r\n:1\r\n:2\r\n");
  boost::asio::io_context io;
  std::unique_ptr<RedisClient> client;
  bool got_null = false;
  const size_t before = ResidentBytes();
  EXPECT_FALSE(AskScripted(io, server, size_t{1} << 30, &client, &got_null, milliseconds(500)));
  EXPECT_TRUE(client->connected());  // still waiting: the reply is not over
  const size_t grew = ResidentBytes() - std::min(before, ResidentBytes());
  EXPECT_LT(grew, size_t{64} << 20) << "resident memory grew by " << grew << " bytes";
}

// A string, or an array of small elements, past the client's limit fails
// the connection with a message that says so; the command gets no reply.
TEST(RedisClientHostileServer, AReplyPastTheLimitFailsTheConnection) {
  const std::string long_string = "$10000000\r\n" + std::string(size_t{2} << 20, 'x');
  std::string many = "*1000000\r\n";
  for (int i = 0; i < 400000; ++i) many += ":1\r\n";
  for (const std::string& script : {long_string, many}) {
    SCOPED_TRACE(script.substr(0, 12));
    ScriptedRedis server(script);
    boost::asio::io_context io;
    std::unique_ptr<RedisClient> client;
    bool got_null = false;
    ASSERT_TRUE(AskScripted(io, server, size_t{1} << 20, &client, &got_null));
    EXPECT_TRUE(got_null);
    EXPECT_FALSE(client->connected());
    EXPECT_NE(client->last_error().find("a reply of more than 1048576 bytes"), std::string::npos)
        << client->last_error();
  }
}

// A reply that arrives slowly (a large one, a slow link) is no silence:
// the reply timeout counts from the last bytes heard, not from the
// command's sending.
TEST(RedisClientHostileServer, ASlowReplyThatKeepsComingIsNotGivenUp) {
  ScriptedRedis server("$20\r\n01234567890123456789\r\n", milliseconds(40));  // ~1 s in all
  boost::asio::io_context io;
  RedisClient::Options o;
  o.port = server.port();
  o.reply_timeout = milliseconds(300);
  RedisClient client(io, o);
  client.Start();
  ASSERT_TRUE(testing::RunIoUntil(
      io, [&] { return client.connected(); }, milliseconds(5000)));
  std::optional<std::string> got;
  client.Command({"GET", "k"}, [&](const redisReply* r) {
    got = r == nullptr ? "<null>" : std::string(r->str, r->len);
  });
  ASSERT_TRUE(testing::RunIoUntil(
      io, [&] { return got.has_value(); }, milliseconds(5000)));
  EXPECT_EQ(*got, "01234567890123456789") << client.last_error();
  EXPECT_TRUE(client.connected()) << client.last_error();
}

// A server that takes the connection and never answers its first command
// (a wedged Redis, a port that is something else): the connect timeout
// covers that command too, and the connection is given up and tried again.
TEST(RedisClientHostileServer, AServerThatNeverAnswersIsGivenUp) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 8), 0);  // the kernel takes the connections; nobody reads
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  boost::asio::io_context io;
  RedisClient::Options o;
  o.port = ntohs(a.sin_port);
  o.connect_timeout = milliseconds(300);
  RedisClient client(io, o);
  client.Start();
  EXPECT_TRUE(testing::RunIoUntil(
      io, [&] { return !client.last_error().empty(); }, milliseconds(5000)));
  EXPECT_NE(client.last_error().find("did not answer"), std::string::npos) << client.last_error();
  EXPECT_FALSE(client.connected());
  ::close(listener);
}

}  // namespace
}  // namespace delayq::backend
