#include "server/access.h"

#include <algorithm>
#include <cmath>

#include "delayq/engine.h"

namespace delayq::server {

// ---- Networks ---------------------------------------------------------------

Result<Networks> Networks::Parse(std::string_view list) {
  Networks out;
  auto trim = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
  if (trim(list).empty() || trim(list) == "none") return out;
  while (true) {
    size_t comma = list.find(',');
    std::string_view item = trim(list.substr(0, comma));
    std::string_view addr = item.substr(0, item.find('/'));
    boost::system::error_code ec;
    auto a = boost::asio::ip::make_address(std::string(addr), ec);
    auto bad = [&](std::string_view why) {
      return Status::InvalidArgument(
          "bad network '" + std::string(item) + "': " + std::string(why) +
          " (give ADDRESS or ADDRESS/PREFIX, e.g. 10.0.0.0/8, fd00::/8)");
    };
    if (ec) return bad("not an IP address");
    Net n;
    n.v4 = a.is_v4();
    const int bits = n.v4 ? 32 : 128;
    n.prefix = bits;
    if (addr.size() != item.size()) {
      std::string_view len = item.substr(addr.size() + 1);
      int v = 0;
      if (len.empty() || len.size() > 3) return bad("bad prefix length");
      for (char c : len) {
        if (c < '0' || c > '9') return bad("bad prefix length");
        v = v * 10 + (c - '0');
      }
      if (v > bits) return bad("prefix length past the address's bits");
      n.prefix = v;
    }
    if (n.v4) {
      auto b = a.to_v4().to_bytes();
      std::copy(b.begin(), b.end(), n.bytes.begin());
    } else {
      n.bytes = a.to_v6().to_bytes();
    }
    out.nets_.push_back(n);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

bool Networks::Contains(const boost::asio::ip::address& peer) const {
  boost::asio::ip::address a = peer;
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    a = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6());
  std::array<uint8_t, 16> bytes{};
  if (a.is_v4()) {
    auto b = a.to_v4().to_bytes();
    std::copy(b.begin(), b.end(), bytes.begin());
  } else {
    bytes = a.to_v6().to_bytes();
  }
  for (const Net& n : nets_) {
    if (n.v4 != a.is_v4()) continue;
    int left = n.prefix;
    bool match = true;
    for (size_t i = 0; left > 0 && match; ++i, left -= 8) {
      const uint8_t mask = left >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - left));
      match = (bytes[i] & mask) == (n.bytes[i] & mask);
    }
    if (match) return true;
  }
  return false;
}

std::string Networks::ToString() const {
  if (nets_.empty()) return "none";
  std::string s;
  for (const Net& n : nets_) {
    if (!s.empty()) s += ',';
    if (n.v4) {
      boost::asio::ip::address_v4::bytes_type b;
      std::copy(n.bytes.begin(), n.bytes.begin() + 4, b.begin());
      s += boost::asio::ip::address_v4(b).to_string();
    } else {
      s += boost::asio::ip::address_v6(n.bytes).to_string();
    }
    s += '/' + std::to_string(n.prefix);
  }
  return s;
}

// ---- AccessPolicy -----------------------------------------------------------

Result<std::shared_ptr<const AccessPolicy>> AccessPolicy::Make(std::vector<Token> tokens,
                                                               Networks trusted) {
  auto p = std::make_shared<AccessPolicy>();
  p->trusted_ = std::move(trusted);
  std::unordered_map<std::string_view, size_t> names;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    const std::string who = "token '" + t.name + "'";
    if (Status st = CheckTokenName(t.name); !st.ok()) return st;
    if (!names.emplace(t.name, i).second)
      return Status::InvalidArgument("two tokens named '" + t.name + "'");
    if (t.rights == 0 || (t.rights & ~kAllRights) != 0)
      return Status::InvalidArgument(who + " has no right (produce, consume, admin)");
    if (t.topics.empty()) return Status::InvalidArgument(who + " names no topic pattern");
    for (const std::string& pat : t.topics)
      if (Status st = CheckTopicPattern(pat); !st.ok())
        return Status::InvalidArgument(who + ": " + st.message());
    if (!(t.rate >= 0) || !std::isfinite(t.rate) || !(t.burst >= 0) || !std::isfinite(t.burst))
      return Status::InvalidArgument(who + ": rate and burst are numbers of 0 or more");
    if (!p->by_digest_.emplace(t.sha256, i).second)
      return Status::InvalidArgument(who + " has the digest of another token");
  }
  p->tokens_ = std::move(tokens);
  return std::shared_ptr<const AccessPolicy>(std::move(p));
}

const Token* AccessPolicy::Find(const Digest& d) const {
  // The digest of a secret the caller sent is looked up, not the secret:
  // how long the lookup takes tells nothing of any token's secret.
  auto it = by_digest_.find(d);
  return it == by_digest_.end() ? nullptr : &tokens_[it->second];
}

// ---- AccessGuard ------------------------------------------------------------

AccessGuard::AccessGuard() {
  auto loopback = Networks::Parse(kLoopbackNetworks);
  policy_ = *AccessPolicy::Make({}, std::move(loopback).value());
}

void AccessGuard::Reload(std::shared_ptr<const AccessPolicy> policy) {
  policy_ = std::move(policy);
  ++generation_;
  // Buckets of tokens no longer listed go; the others keep their level.
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    bool listed = std::any_of(policy_->tokens().begin(), policy_->tokens().end(),
                              [&](const Token& t) { return t.name == it->first; });
    it = listed ? std::next(it) : buckets_.erase(it);
  }
}

int64_t AccessGuard::Take(const Token& t, Clock::time_point now) {
  if (t.rate <= 0) return 0;
  const double burst = std::max(t.burst > 0 ? t.burst : t.rate, 1.0);
  auto [it, fresh] = buckets_.try_emplace(t.name);
  Bucket& b = it->second;
  if (fresh) {
    b.level = burst;
  } else {
    const double secs = std::chrono::duration<double>(now - b.at).count();
    b.level = std::min(burst, b.level + std::max(secs, 0.0) * t.rate);
  }
  b.at = now;
  if (b.level >= 1) {
    b.level -= 1;
    return 0;
  }
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil((1 - b.level) / t.rate * 1000)));
}

// ---- Caller -----------------------------------------------------------------

Caller::Caller(AccessGuard& guard, std::optional<boost::asio::ip::address> peer)
    : guard_(guard), peer_(std::move(peer)) {
  Refresh();
}

void Caller::Refresh() {
  ++standing_;
  generation_ = guard_.generation();
  policy_ = guard_.policy();
  const AccessPolicy& p = *policy_;
  trusted_ = !peer_.has_value() || p.trusted().Contains(*peer_);
  token_ = digest_ ? p.Find(*digest_) : nullptr;
}

Status Caller::Authenticate(std::string_view secret) {
  if (generation_ != guard_.generation()) Refresh();
  ++standing_;
  // The secret this caller presented last: its digest is known (the caller
  // sent both, so comparing them tells it nothing).
  if (last_secret_.empty() || secret != last_secret_) {
    last_secret_ = secret;
    last_digest_ = Sha256(secret);
  }
  const Digest& d = last_digest_;
  const Token* t = policy_->Find(d);
  if (t == nullptr) {
    guard_.unauthenticated++;
    return Status::Unauthenticated("no token has this secret");
  }
  digest_ = d;
  token_ = t;
  return Status::Ok();
}

void Caller::Reset() {
  if (!digest_) return;
  ++standing_;
  digest_.reset();
  token_ = nullptr;
}

Status Caller::Readmit() {
  if (generation_ != guard_.generation()) Refresh();
  if (token_ != nullptr) return Status::Ok();
  if (digest_) {
    // Its token was removed from the file since.
    guard_.unauthenticated++;
    return Status::Unauthenticated("the token this caller authenticated with is gone");
  }
  if (trusted_) return Status::Ok();
  guard_.unauthenticated++;
  return Status::Unauthenticated("authenticate first: a token's secret is needed");
}

Status Caller::Admit(Op op, int64_t* retry_ms) {
  if (generation_ != guard_.generation()) Refresh();
  if (OperationOf(op).scope == Scope::kPublic) return Status::Ok();  // quit, auth, health
  if (token_ == nullptr) return Readmit();
  if (int64_t wait = guard_.Take(*token_, AccessGuard::Clock::now()); wait > 0) {
    guard_.rate_limited++;
    *retry_ms = wait;
    return Status::RateLimited("token '" + token_->name + "' is over its rate of " +
                               std::to_string(static_cast<int64_t>(token_->rate)) +
                               " requests per second");
  }
  return Status::Ok();
}

namespace {

uint8_t RightsFor(Scope scope) {
  switch (scope) {
    case Scope::kPublic:
    case Scope::kAuthenticated:
      return 0;
    case Scope::kRead:
      return kRightProduce | kRightConsume | kRightAdmin;
    case Scope::kProduce:
      return kRightProduce;
    case Scope::kConsume:
      return kRightConsume;
    case Scope::kAdmin:
      return kRightAdmin;
  }
  return 0;
}

}  // namespace

Status Caller::Check(Scope scope, std::string_view topic) const {
  return CheckFound(scope, topic, {});
}

bool Caller::May(Scope scope, std::string_view topic) const {
  const uint8_t wanted = RightsFor(scope);
  if (token_ == nullptr) return trusted_ || scope == Scope::kPublic;
  if (wanted == 0) return true;
  if ((token_->rights & wanted) == 0) return false;
  return std::any_of(token_->topics.begin(), token_->topics.end(),
                     [&](const std::string& p) { return TopicMatches(p, topic); });
}

Status Caller::CheckFound(Scope scope, std::string_view topic, std::string_view what) const {
  if (May(scope, topic)) return Status::Ok();
  if (token_ == nullptr)
    return Status::Unauthenticated("authenticate first: a token's secret is needed");
  guard_.forbidden++;
  const std::string right =
      scope == Scope::kRead ? "right" : "'" + std::string(ScopeName(scope)) + "' right";
  const std::string where = what.empty() ? "topic '" + std::string(topic) + "'" : std::string(what);
  return Status::PermissionDenied("token '" + token_->name + "' has no " + right + " on " + where);
}

bool Caller::Everywhere(Scope scope) const {
  const uint8_t wanted = RightsFor(scope);
  if (token_ == nullptr) return trusted_ || scope == Scope::kPublic;
  if (wanted == 0) return true;
  if ((token_->rights & wanted) == 0) return false;
  return std::find(token_->topics.begin(), token_->topics.end(), "*") != token_->topics.end();
}

}  // namespace delayq::server
