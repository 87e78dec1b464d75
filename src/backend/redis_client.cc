#include "backend/redis_client.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>

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
  static Io* From(void* p) { return static_cast<Io*>(p); }
  static void AddRead(void* p) {
    From(p)->want_read = true;
    From(p)->ArmRead();
  }
  static void DelRead(void* p) { From(p)->want_read = false; }
  static void AddWrite(void* p) {
    From(p)->want_write = true;
    From(p)->ArmWrite();
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

namespace {

RedisClient* ClientOf(const redisAsyncContext* ac) { return static_cast<RedisClient*>(ac->data); }

}  // namespace

RedisClient::RedisClient(boost::asio::io_context& io, Options options)
    : io_(io), options_(std::move(options)), reconnect_timer_(io) {}

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
  connected_ = true;
  retry_ = std::chrono::milliseconds(100);
  if (options_.on_connect) options_.on_connect();
  if (options_.subscriber)
    for (const std::string& ch : channels_) SendSubscribe("SUBSCRIBE", ch);
}

void RedisClient::OnDisconnected(int status) {
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
  if (!connected_ || ctx_ == nullptr) {
    boost::asio::post(io_, [done = std::move(done)] { done(nullptr); });
    return;
  }
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (std::string_view a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* h = new Handler(std::move(done));
  if (redisAsyncCommandArgv(ctx_, &RedisClient::OnReply, h, static_cast<int>(argv.size()),
                            ptrs.data(), lens.data()) != REDIS_OK) {
    std::unique_ptr<Handler> owned(h);
    boost::asio::post(io_, [done = std::move(*owned)] { done(nullptr); });
  }
}

void RedisClient::OnPubSub(redisAsyncContext* ac, void* reply, void*) {
  RedisClient* self = ClientOf(ac);
  const auto* r = static_cast<const redisReply*>(reply);
  if (self == nullptr || r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements < 3) return;
  std::string_view kind(r->element[0]->str, r->element[0]->len);
  if (kind != "message" || !self->options_.on_message) return;
  const redisReply* ch = r->element[1];
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
