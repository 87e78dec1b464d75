#include "backend/redis_client.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <cstring>

#include "backend/resp.h"

namespace delayq::backend {

// Watches the connection's socket for hiredis: its hooks ask for read and
// write readiness, and the watcher calls back into hiredis when it comes.
// Shared with the pending waits, so it outlives a context hiredis freed.
struct RedisClient::Io : std::enable_shared_from_this<RedisClient::Io> {
  Io(boost::asio::io_context& io, int fd) : sd(io, fd) {}
  boost::asio::posix::stream_descriptor sd;
  redisAsyncContext* ac = nullptr;  // null once hiredis cleaned up
  bool want_read = false, want_write = false;
  bool reading = false, writing = false;
  // Set while Send queues a command: it writes the command itself (WriteNow)
  // rather than wait for write readiness.
  bool direct = false;

  void ArmRead() {
    if (reading || ac == nullptr || !want_read) return;
    reading = true;
    sd.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                  [self = shared_from_this()](const boost::system::error_code& ec) {
                    self->reading = false;
                    if (ec || self->ac == nullptr || !self->want_read) return;
                    redisAsyncHandleRead(self->ac);
                    self->ArmRead();
                  });
  }
  void ArmWrite() {
    if (writing || ac == nullptr || !want_write) return;
    writing = true;
    sd.async_wait(boost::asio::posix::stream_descriptor::wait_write,
                  [self = shared_from_this()](const boost::system::error_code& ec) {
                    self->writing = false;
                    if (ec || self->ac == nullptr || !self->want_write) return;
                    redisAsyncHandleWrite(self->ac);
                    self->ArmWrite();
                  });
  }
  // Writes what hiredis has queued at once: waiting for write readiness
  // cost an epoll_ctl per command and held the command back until the
  // loop's next epoll_wait, behind every handler ready by then. What the
  // socket does not take, and any error, is left to ArmWrite (hiredis's
  // own write then sees the error and disconnects, as it would have).
  void WriteNow() {
    int done = 0;
    if (ac != nullptr && redisBufferWrite(&ac->c, &done) == REDIS_OK && done) {
      want_write = false;
      AddRead(this);  // as hiredis does after a write
      return;
    }
    ArmWrite();
  }
  static Io* From(void* p) { return static_cast<Io*>(p); }
  static void AddRead(void* p) {
    From(p)->want_read = true;
    From(p)->ArmRead();
  }
  static void DelRead(void* p) { From(p)->want_read = false; }
  static void AddWrite(void* p) {
    From(p)->want_write = true;
    if (!From(p)->direct) From(p)->ArmWrite();
  }
  static void DelWrite(void* p) { From(p)->want_write = false; }
  static void Cleanup(void* p) {
    Io* io = From(p);
    io->ac = nullptr;
    io->want_read = io->want_write = false;
    // hiredis closes the descriptor; Asio must only forget it.
    if (io->sd.is_open()) io->sd.release();
  }
};

// The reply objects hiredis's reader builds, carved out of blocks that are
// kept from reply to reply; a reply's whole tree goes at once when hiredis
// frees its root (after the reply's handler). hiredis's own objects cost a
// calloc per element and a malloc per string, and a free of each after
// every reply: with a batch's reply of a hundred elements that was a fifth
// of delayqd's time on the Redis backend (docs/redis-backend.md).
//
// The objects are redisReply structures, as hiredis's own. Each is preceded
// by a pointer to its arena: freeObject gets the object alone.
class RedisClient::ReplyArena {
 public:
  static const redisReplyObjectFunctions kFunctions;

  ~ReplyArena() { Reset(); }

 private:
  static constexpr size_t kBlock = 32 * 1024;
  static constexpr size_t kKeptBlocks = 8;  // kept after a reset: 256 KiB

  static ReplyArena* Of(const redisReadTask* task) {
    return static_cast<ReplyArena*>(task->privdata);
  }

  void* Alloc(size_t n) {
    n = (n + 7) & ~size_t{7};
    if (n > kBlock / 4) {
      large_.push_back(std::make_unique<char[]>(n));
      return large_.back().get();
    }
    if (blocks_.empty() || used_ + n > kBlock) {
      if (blocks_.empty() || ++current_ == blocks_.size()) {
        blocks_.push_back(std::make_unique<char[]>(kBlock));
        current_ = blocks_.size() - 1;
      }
      used_ = 0;
    }
    char* p = blocks_[current_].get() + used_;
    used_ += n;
    return p;
  }

  void Reset() {
    root_ = nullptr;
    current_ = 0;
    used_ = 0;
    large_.clear();
    if (blocks_.size() > kKeptBlocks) blocks_.resize(kKeptBlocks);
  }

  // A new object of the task's type, hung into its parent array.
  redisReply* Object(const redisReadTask* task, int type) {
    auto* slot = static_cast<ReplyArena**>(Alloc(sizeof(ReplyArena*) + sizeof(redisReply)));
    *slot = this;
    auto* r = new (slot + 1) redisReply{};
    r->type = type;
    if (task->parent == nullptr) {
      root_ = r;
    } else {
      auto* parent = static_cast<redisReply*>(task->parent->obj);
      parent->element[task->idx] = r;
    }
    return r;
  }

  static void* CreateString(const redisReadTask* task, char* str, size_t len) {
    ReplyArena* a = Of(task);
    redisReply* r = a->Object(task, task->type);
    auto* copy = static_cast<char*>(a->Alloc(len + 1));
    std::memcpy(copy, str, len);
    copy[len] = '\0';
    r->str = copy;
    r->len = len;
    return r;
  }
  static void* CreateArray(const redisReadTask* task, int elements) {
    ReplyArena* a = Of(task);
    redisReply* r = a->Object(task, REDIS_REPLY_ARRAY);
    if (elements > 0) {
      size_t n = static_cast<size_t>(elements);
      r->element = static_cast<redisReply**>(a->Alloc(n * sizeof(redisReply*)));
      std::fill_n(r->element, n, nullptr);
      r->elements = n;
    }
    return r;
  }
  static void* CreateInteger(const redisReadTask* task, long long value) {
    redisReply* r = Of(task)->Object(task, REDIS_REPLY_INTEGER);
    r->integer = value;
    return r;
  }
  static void* CreateNil(const redisReadTask* task) {
    return Of(task)->Object(task, REDIS_REPLY_NIL);
  }
  static void FreeObject(void* obj) {
    ReplyArena* a = *(static_cast<ReplyArena**>(obj) - 1);
    if (obj == a->root_) a->Reset();
  }

  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t current_ = 0, used_ = 0;
  std::vector<std::unique_ptr<char[]>> large_;
  redisReply* root_ = nullptr;
};

const redisReplyObjectFunctions RedisClient::ReplyArena::kFunctions = {
    &ReplyArena::CreateString, &ReplyArena::CreateArray, &ReplyArena::CreateInteger,
    &ReplyArena::CreateNil, &ReplyArena::FreeObject};

namespace {

RedisClient* ClientOf(const redisAsyncContext* ac) { return static_cast<RedisClient*>(ac->data); }

}  // namespace

RedisClient::RedisClient(boost::asio::io_context& io, Options options)
    : io_(io),
      options_(std::move(options)),
      arena_(std::make_unique<ReplyArena>()),
      reconnect_timer_(io) {}

RedisClient::~RedisClient() {
  stopping_ = true;
  reconnect_timer_.cancel();
  if (ctx_ != nullptr) {
    // Handlers still due are dropped, not called: their owner is going.
    ctx_->data = nullptr;
    redisAsyncFree(ctx_);
    ctx_ = nullptr;
  }
}

std::string RedisClient::address() const {
  return options_.host + ":" + std::to_string(options_.port);
}

void RedisClient::Start() { Connect(); }

void RedisClient::Connect() {
  if (stopping_ || ctx_ != nullptr) return;
  redisAsyncContext* ac = redisAsyncConnect(options_.host.c_str(), options_.port);
  if (ac == nullptr) {
    last_error_ = "out of memory";
    return ScheduleReconnect();
  }
  if (ac->err != 0) {
    last_error_ = ac->errstr;
    redisAsyncFree(ac);
    return ScheduleReconnect();
  }
  ctx_ = ac;
  ac->data = this;
  ac->c.reader->fn = const_cast<redisReplyObjectFunctions*>(&ReplyArena::kFunctions);
  ac->c.reader->privdata = arena_.get();
  watcher_ = std::make_shared<Io>(io_, ac->c.fd);
  watcher_->ac = ac;
  ac->ev.data = watcher_.get();
  ac->ev.addRead = &Io::AddRead;
  ac->ev.delRead = &Io::DelRead;
  ac->ev.addWrite = &Io::AddWrite;
  ac->ev.delWrite = &Io::DelWrite;
  ac->ev.cleanup = &Io::Cleanup;
  redisAsyncSetConnectCallback(ac, [](const redisAsyncContext* c, int status) {
    if (RedisClient* self = ClientOf(c)) self->OnConnected(status);
  });
  redisAsyncSetDisconnectCallback(ac, [](const redisAsyncContext* c, int status) {
    if (RedisClient* self = ClientOf(c)) self->OnDisconnected(status);
  });
  // The connection completes on the first write readiness.
  Io::AddWrite(watcher_.get());
}

void RedisClient::ScheduleReconnect() {
  if (stopping_) return;
  reconnect_timer_.expires_after(retry_);
  retry_ = std::min(retry_ * 2, std::chrono::milliseconds(2000));
  std::weak_ptr<bool> alive = alive_;
  reconnect_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (!ec && !alive.expired()) Connect();
  });
}

void RedisClient::OnConnected(int status) {
  if (status != REDIS_OK) {
    // hiredis frees the context after this returns.
    last_error_ = ctx_ != nullptr && ctx_->errstr != nullptr ? ctx_->errstr : "connect failed";
    ctx_ = nullptr;
    return ScheduleReconnect();
  }
  retry_ = std::chrono::milliseconds(100);
  if (!options_.auth.password.empty()) return SendAuth();  // Ready once it is accepted
  Ready();
}

void RedisClient::Ready() {
  connected_ = true;
  if (options_.on_connect) options_.on_connect();
  if (options_.subscriber)
    for (const std::string& ch : channels_) SendSubscribe("SUBSCRIBE", ch);
}

void RedisClient::SendAuth() {
  std::vector<std::string_view> argv = {"AUTH"};
  if (!options_.auth.user.empty()) argv.push_back(options_.auth.user);
  argv.push_back(options_.auth.password);
  redisAsyncContext* sent_on = ctx_;
  SendNow(resp::Format(argv), [this, sent_on](const redisReply* r) {
    if (r == nullptr || ctx_ != sent_on || ctx_ == nullptr) return;  // lost meanwhile
    if (r->type != REDIS_REPLY_ERROR) {
      last_error_.clear();
      return Ready();
    }
    // Redis's words ("WRONGPASS invalid username-password pair or user is
    // disabled.") name no secret. The connection goes; it is tried again.
    last_error_ = "AUTH refused: " + std::string(r->str, r->len);
    redisAsyncDisconnect(ctx_);
  });
}

void RedisClient::OnDisconnected(int status) {
  // A refused AUTH closed it: keep saying so.
  if (!last_error_.starts_with("AUTH refused: "))
    last_error_ = status == REDIS_OK                           ? "disconnected"
                  : ctx_ != nullptr && ctx_->errstr != nullptr ? ctx_->errstr
                                                               : "connection lost";
  // hiredis frees the context after this returns.
  ctx_ = nullptr;
  bool was = connected_;
  connected_ = false;
  if (was && options_.on_disconnect) options_.on_disconnect(last_error_);
  ScheduleReconnect();
}

void RedisClient::OnReply(redisAsyncContext* ac, void* reply, void* privdata) {
  std::unique_ptr<Handler> h(static_cast<Handler*>(privdata));
  if (ac->data == nullptr || !*h) return;  // the client is going away
  (*h)(static_cast<const redisReply*>(reply));
}

void RedisClient::Command(const std::vector<std::string_view>& argv, Handler done) {
  Send(resp::Format(argv), std::move(done));
}

void RedisClient::Send(std::string_view command, Handler done) {
  if (!connected_ || ctx_ == nullptr) {
    boost::asio::post(io_, [done = std::move(done)] { done(nullptr); });
    return;
  }
  SendNow(command, std::move(done));
}

void RedisClient::SendNow(std::string_view command, Handler done) {
  auto* h = new Handler(std::move(done));
  std::shared_ptr<Io> io = watcher_;
  io->direct = true;
  int rc =
      redisAsyncFormattedCommand(ctx_, &RedisClient::OnReply, h, command.data(), command.size());
  io->direct = false;
  if (rc != REDIS_OK) {
    std::unique_ptr<Handler> owned(h);
    boost::asio::post(io_, [done = std::move(*owned)] { done(nullptr); });
  }
  if (io->want_write) io->WriteNow();
}

void RedisClient::OnPubSub(redisAsyncContext* ac, void* reply, void*) {
  RedisClient* self = ClientOf(ac);
  const auto* r = static_cast<const redisReply*>(reply);
  if (self == nullptr || r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements < 3) return;
  std::string_view kind(r->element[0]->str, r->element[0]->len);
  const redisReply* ch = r->element[1];
  if (kind == "subscribe" && ch->str != nullptr && self->options_.on_subscribed) {
    self->options_.on_subscribed(std::string_view(ch->str, ch->len));
    return;
  }
  if (kind != "message" || !self->options_.on_message) return;
  const redisReply* msg = r->element[2];
  self->options_.on_message(std::string_view(ch->str, ch->len),
                            msg->str != nullptr ? std::string_view(msg->str, msg->len) : "");
}

void RedisClient::SendSubscribe(const char* verb, const std::string& channel) {
  if (!connected_ || ctx_ == nullptr) return;
  const char* argv[2] = {verb, channel.data()};
  size_t lens[2] = {std::char_traits<char>::length(verb), channel.size()};
  redisAsyncCommandArgv(ctx_, &RedisClient::OnPubSub, nullptr, 2, argv, lens);
}

void RedisClient::Subscribe(const std::string& channel) {
  if (!channels_.insert(channel).second) return;
  SendSubscribe("SUBSCRIBE", channel);
}

void RedisClient::Unsubscribe(const std::string& channel) {
  if (channels_.erase(channel) == 0) return;
  SendSubscribe("UNSUBSCRIBE", channel);
}

}  // namespace delayq::backend
