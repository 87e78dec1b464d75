#include "backend/redis_router.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>
#include <set>

#include "backend/resp.h"

namespace delayq::backend {

namespace {

constexpr size_t kSlots = 16384;
// MOVED / ASK hops one command may take before its error is passed on.
constexpr int kMaxRedirects = 3;

// A node's name: its key in clients_, and how the seeds are listed.
std::string NodeKey(const std::string& host, int port) { return host + ":" + std::to_string(port); }

uint16_t Crc16(std::string_view s) {
  // CRC-16/XMODEM (polynomial 0x1021, initial value 0), as Redis Cluster uses.
  uint16_t crc = 0;
  for (unsigned char c : s) {
    crc ^= static_cast<uint16_t>(c) << 8;
    for (int i = 0; i < 8; ++i)
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
  }
  return crc;
}

int64_t IntOf(const redisReply* r) {
  if (r == nullptr) return 0;
  if (r->type == REDIS_REPLY_INTEGER) return r->integer;
  int64_t v = 0;
  if (r->str != nullptr) std::from_chars(r->str, r->str + r->len, v);
  return v;
}

}  // namespace

uint16_t RedisRouter::KeySlot(std::string_view key) {
  // Only the part between the first '{' and the next '}' counts, if it is
  // not empty.
  if (size_t open = key.find('{'); open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  return Crc16(key) % kSlots;
}

RedisRouter::RedisRouter(boost::asio::io_context& io, Options options)
    : io_(io), options_(std::move(options)), refresh_(io) {}

RedisRouter::~RedisRouter() = default;

void RedisRouter::Start() {
  for (const Node& n : options_.seeds) ClientFor(n.host, n.port);
  if (options_.cluster) ArmRefresh();
}

void RedisRouter::ArmRefresh() {
  refresh_.expires_after(std::chrono::seconds(1));
  std::weak_ptr<bool> alive = alive_;
  refresh_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    if (!connected()) LoadSlots();
    ArmRefresh();
  });
}

RedisClient& RedisRouter::ClientFor(const std::string& host, int port) {
  std::string key = NodeKey(host, port);
  auto it = clients_.find(key);
  if (it != clients_.end()) return *it->second;
  RedisClient::Options co;
  co.host = host;
  co.port = port;
  co.auth = options_.auth;
  co.tls = options_.tls;
  co.counts = options_.counts;
  co.max_reply = options_.max_reply;
  co.reply_timeout = options_.reply_timeout;
  {
    std::weak_ptr<bool> alive = alive_;
    co.on_disconnect = [this, alive, key](const std::string& error) {
      if (alive.expired()) return;
      if (options_.on_node_disconnect) options_.on_node_disconnect(*clients_.at(key), error);
      if (alive.expired() || !options_.cluster) return;
      // Its slots may have moved (a failover): asked of a node still up.
      boost::asio::post(io_, [this, alive] {
        if (!alive.expired()) LoadSlots();
      });
    };
  }
  if (!options_.cluster) co.db = options_.db;
  co.on_connect = [this, key] {
    RedisClient& self = *clients_.at(key);
    if (options_.on_node_connect) options_.on_node_connect(self);
    if (options_.cluster) LoadSlots();
  };
  auto client = std::make_unique<RedisClient>(io_, co);
  RedisClient& ref = *client;
  clients_.emplace(key, std::move(client));
  ref.Start();
  return ref;
}

bool RedisRouter::connected() const {
  if (!options_.cluster) {
    auto it = clients_.begin();
    return it != clients_.end() && it->second->connected();
  }
  if (slots_.size() != kSlots) return false;
  std::set<const RedisClient*> masters(slots_.begin(), slots_.end());
  for (const RedisClient* c : masters)
    if (c == nullptr || !c->connected()) return false;
  return true;
}

std::string RedisRouter::address() const {
  std::string out;
  for (const Node& n : options_.seeds) {
    if (!out.empty()) out += ',';
    out += NodeKey(n.host, n.port);
  }
  return out;
}

std::string RedisRouter::last_error() const {
  for (const auto& [key, c] : clients_)
    if (!c->connected() && !c->last_error().empty()) return key + ": " + c->last_error();
  return last_error_;
}

void RedisRouter::LoadSlots() {
  if (loading_) {
    reload_ = true;
    return;
  }
  RedisClient* via = nullptr;
  for (auto& [key, c] : clients_)
    if (c->connected()) {
      via = c.get();
      break;
    }
  if (via == nullptr) return;  // the next node to connect asks again
  loading_ = true;
  std::weak_ptr<bool> alive = alive_;
  via->Command({"CLUSTER", "SLOTS"}, [this, alive, via_host = via->host()](const redisReply* r) {
    if (alive.expired()) return;
    loading_ = false;
    if (r != nullptr && r->type == REDIS_REPLY_ARRAY) {
      std::vector<RedisClient*> map(kSlots, nullptr);
      for (size_t i = 0; i < r->elements; ++i) {
        const redisReply* e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) continue;
        const redisReply* master = e->element[2];
        if (master->type != REDIS_REPLY_ARRAY || master->elements < 2) continue;
        std::string host(master->element[0]->str != nullptr ? master->element[0]->str : "",
                         master->element[0]->len);
        // An empty host means "the address you reached me on".
        if (host.empty()) host = via_host;
        const int64_t port = IntOf(master->element[1]);
        if (port < 1 || port > 65535 || host == "?") continue;  // no usable endpoint
        RedisClient& node = ClientFor(host, static_cast<int>(port));
        int64_t from = IntOf(e->element[0]), to = IntOf(e->element[1]);
        for (int64_t s = std::max<int64_t>(0, from); s <= to && s < int64_t{kSlots}; ++s)
          map[static_cast<size_t>(s)] = &node;
      }
      // The nodes the last map named: of those, the ones this one leaves
      // out may be dropped (not a node just met through ASK or MOVED, still
      // connecting, that owns no slot yet).
      std::set<std::string> named;
      for (const auto& [key, c] : clients_)
        if (std::find(slots_.begin(), slots_.end(), c.get()) != slots_.end()) named.insert(key);
      slots_ = std::move(map);
      DropLostNodes(std::move(named));
    } else {
      last_error_ =
          r != nullptr && r->str != nullptr ? std::string(r->str, r->len) : "CLUSTER SLOTS failed";
    }
    if (reload_) {
      reload_ = false;
      LoadSlots();
    }
  });
}

void RedisRouter::DropLostNodes(std::set<std::string> named_before) {
  // A node the last map named, this one does not, and whose connection is
  // down (a master that failed over, a node taken out of the cluster) is
  // dropped rather than tried again for ever; CLUSTER SLOTS or a MOVED
  // names it again if it comes back as a master. Not a seed (the seeds
  // find the cluster), nor a node that is up (a master turned replica:
  // dropping its client would leave its commands in flight unanswered; a
  // client that is down holds none). After this call returns: the handler
  // that read the map may be that node's own.
  auto lost = [this, named_before = std::move(named_before)](const std::string& key,
                                                             const RedisClient& c) {
    if (c.connected() || !named_before.contains(key)) return false;
    for (const Node& n : options_.seeds)
      if (key == NodeKey(n.host, n.port)) return false;
    return std::find(slots_.begin(), slots_.end(), &c) == slots_.end();
  };
  bool any = false;
  for (const auto& [key, c] : clients_) any = any || lost(key, *c);
  if (!any) return;
  std::weak_ptr<bool> alive = alive_;
  boost::asio::post(io_, [this, alive, lost] {
    if (alive.expired()) return;
    for (auto it = clients_.begin(); it != clients_.end();)
      it = lost(it->first, *it->second) ? clients_.erase(it) : std::next(it);
  });
}

void RedisRouter::Command(std::string_view key, const std::vector<std::string_view>& argv,
                          RedisClient::Handler done) {
  Send(key, std::make_shared<const std::string>(resp::Format(argv)), std::move(done));
}

void RedisRouter::Send(std::string_view key, std::shared_ptr<const std::string> command,
                       RedisClient::Handler done) {
  if (!options_.cluster) {
    if (clients_.empty()) {
      boost::asio::post(io_, [done = std::move(done)] { done(nullptr); });
      return;
    }
    clients_.begin()->second->Send(*command, std::move(done));
    return;
  }
  RedisClient* node = slots_.size() == kSlots ? slots_[KeySlot(key)] : nullptr;
  if (node == nullptr) {
    boost::asio::post(io_, [done = std::move(done)] { done(nullptr); });
    return;
  }
  SendTo(node, std::move(command), false, 0, std::move(done));
}

void RedisRouter::SendTo(RedisClient* node, std::shared_ptr<const std::string> command, bool asking,
                         int redirects, RedisClient::Handler done) {
  if (asking) node->Command({"ASKING"}, [](const redisReply*) {});
  std::weak_ptr<bool> alive = alive_;
  node->Send(*command, [this, alive, node, command, redirects,
                        done = std::move(done)](const redisReply* r) {
    if (alive.expired()) return;
    if (r != nullptr && r->type == REDIS_REPLY_ERROR && redirects < kMaxRedirects) {
      std::string_view e(r->str, r->len);
      bool moved = e.substr(0, 6) == "MOVED ", ask = e.substr(0, 4) == "ASK ";
      if (moved || ask) {
        // "MOVED <slot> <host>:<port>"
        std::string_view rest = e.substr(moved ? 6 : 4);
        size_t sp = rest.find(' ');
        size_t colon = rest.rfind(':');
        if (sp != std::string_view::npos && colon != std::string_view::npos && colon > sp) {
          int slot = 0, port = 0;
          std::from_chars(rest.data(), rest.data() + sp, slot);
          std::from_chars(rest.data() + colon + 1, rest.data() + rest.size(), port);
          std::string host(rest.substr(sp + 1, colon - sp - 1));
          if (host.empty()) host = node->host();  // "the address you reached me on"
          if (port < 1 || port > 65535) return done(r);
          RedisClient& to = ClientFor(host, port);
          if (moved) {
            if (slots_.size() == kSlots && slot >= 0 && slot < int{kSlots})
              slots_[static_cast<size_t>(slot)] = &to;
            LoadSlots();
          }
          if (to.connected()) return SendTo(&to, command, ask, redirects + 1, done);
        }
      }
    }
    done(r);
  });
}

}  // namespace delayq::backend
