// Who may do what (docs/security.md): the tokens of --auth-file, the
// networks trusted without one (--trusted-networks), and each caller's
// standing.
//
// A caller is a beanstalkd connection, or one HTTP request. A caller from a
// trusted network may do everything, with no rate limit, and needs no
// token. Any other caller must present a token's secret (beanstalkd `auth`,
// HTTP `Authorization: Bearer`); until it does, it may only authenticate,
// quit, and ask for /healthz. A caller that presents a secret is held to
// that token, wherever it comes from: the token's rights, on the topics its
// patterns match, at its request rate.
//
// Rights: `produce` (put), `consume` (reserve and what a worker does to the
// jobs it holds), `admin` (delete, kick, pause, clear, server-wide stats).
// Any one right on a topic lets a caller see it (peek, stats, listings).
// The operation table (delayq/operations.h) gives each operation its Scope.
//
// Tokens are known by the SHA-256 of their secret, never the secret. The
// policy is replaced as a whole (SIGHUP: AccessGuard::Reload); a caller
// looks its token up again on its next request, so a token removed from
// the file stops working at once, on open connections too. Rate buckets
// carry over a reload by token name.
//
// Thread: the loop thread.
#ifndef DELAYQ_SERVER_ACCESS_H_
#define DELAYQ_SERVER_ACCESS_H_

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "delayq/operations.h"
#include "delayq/status.h"
#include "delayq/token.h"

namespace delayq::server {

// IP networks: "10.0.0.0/8", "192.168.1.7" (one address), "::1/128",
// "fd00::/8". An IPv4 peer that reaches an IPv6 socket (::ffff:a.b.c.d)
// counts as its IPv4 address.
class Networks {
 public:
  // A comma-separated list; "" or "none": no network.
  static Result<Networks> Parse(std::string_view list);
  bool Contains(const boost::asio::ip::address& a) const;
  bool empty() const { return nets_.empty(); }
  // As given, normalized: "127.0.0.0/8,::1/128", or "none".
  std::string ToString() const;

 private:
  struct Net {
    bool v4 = false;
    std::array<uint8_t, 16> bytes{};
    int prefix = 0;
  };
  std::vector<Net> nets_;
};

// The loopback networks: what --trusted-networks trusts by default.
inline constexpr std::string_view kLoopbackNetworks = "127.0.0.0/8,::1/128";

// The tokens and the trusted networks: immutable once made.
class AccessPolicy {
 public:
  // kInvalidArgument (naming the token) for two tokens with one name or
  // one digest, a token without a right or a topic, a bad pattern or rate.
  static Result<std::shared_ptr<const AccessPolicy>> Make(std::vector<Token> tokens,
                                                          Networks trusted);
  const Token* Find(const Digest& d) const;
  const std::vector<Token>& tokens() const { return tokens_; }
  const Networks& trusted() const { return trusted_; }

 private:
  std::vector<Token> tokens_;
  Networks trusted_;
  struct DigestHash {
    size_t operator()(const Digest& d) const {
      size_t h;
      std::memcpy(&h, d.data(), sizeof h);  // a digest's bytes are uniform already
      return h;
    }
  };
  std::unordered_map<Digest, size_t, DigestHash> by_digest_;  // -> index
};

class AccessGuard {
 public:
  using Clock = std::chrono::steady_clock;
  // No tokens; loopback trusted.
  AccessGuard();

  const std::shared_ptr<const AccessPolicy>& policy() const { return policy_; }
  // Counts the policies installed: a caller whose generation differs looks
  // its standing up again.
  uint64_t generation() const { return generation_; }
  // Callers see the new policy from their next request.
  void Reload(std::shared_ptr<const AccessPolicy> policy);

  // Takes one request from `t`'s bucket: 0 when it may go, else the
  // milliseconds until it may (at least 1).
  int64_t Take(const Token& t, Clock::time_point now);

  // Counters for stats: callers refused for want of a token (or a wrong
  // one), for want of a right, and for their rate.
  uint64_t unauthenticated = 0;
  uint64_t forbidden = 0;
  uint64_t rate_limited = 0;

 private:
  struct Bucket {
    double level = 0;
    Clock::time_point at{};
  };
  std::shared_ptr<const AccessPolicy> policy_;
  uint64_t generation_ = 1;
  std::unordered_map<std::string, Bucket> buckets_;  // by token name
};

// One caller's standing.
class Caller {
 public:
  // `peer`: the address the caller comes from; nullopt for a caller in
  // this process (tests, fuzzing), which is trusted.
  Caller(AccessGuard& guard, std::optional<boost::asio::ip::address> peer);

  // Holds the caller to the token whose secret this is: Ok, or
  // kUnauthenticated (no such token), which leaves the caller as it was.
  Status Authenticate(std::string_view secret);
  // Forgets the token (each HTTP request starts over).
  void Reset();

  // Before each request for `op`: Ok; kUnauthenticated when the caller is
  // neither trusted nor authenticated and `op` is not open to all (quit,
  // auth, health); kRateLimited (*retry_ms: when to try again) when its
  // token is over its rate.
  Status Admit(Op op, int64_t* retry_ms);
  // Whether a request admitted before the last reload (a reserve that
  // waits) would still be: the policy in force now is looked at, and the
  // answer is Admit's for an operation with a topic, without its rate.
  Status Readmit();
  // The right `scope` on `topic`: Ok or kPermissionDenied, saying which.
  Status Check(Scope scope, std::string_view topic) const;
  // The same for the topic of something found by its id or name (a job, a
  // schedule): a refusal names `what` ("this job's topic"), not the topic,
  // so that walking ids does not list the topics out of the caller's scope.
  Status CheckFound(Scope scope, std::string_view topic, std::string_view what) const;
  // Whether Check(scope, t) is Ok for every topic t: a job's topic need
  // not be looked up first.
  bool Everywhere(Scope scope) const;
  // Check's answer alone, counting no refusal (what a listing or a view
  // leaves out).
  bool May(Scope scope, std::string_view topic) const;
  bool Sees(std::string_view topic) const { return May(Scope::kRead, topic); }

  bool trusted() const { return trusted_; }
  const Token* token() const { return token_; }
  // Changes whenever what the caller may do may have changed (an
  // authentication, a reload): a front-end may keep a check's result while
  // this stays the same.
  uint64_t standing() const { return standing_; }
  // The peer's address as logs show it ("-" when unknown).
  std::string PeerText() const { return peer_ ? peer_->to_string() : "-"; }

 private:
  // The policy was reloaded: look the token up again, and the peer.
  void Refresh();

  AccessGuard& guard_;
  std::optional<boost::asio::ip::address> peer_;
  uint64_t generation_ = 0;  // of the policy token_ and trusted_ come from
  // That policy, held: token_ points into it, and a completion that comes
  // after a reload (a look-up of a job's topic) still checks against it.
  std::shared_ptr<const AccessPolicy> policy_;
  bool trusted_ = false;
  std::optional<Digest> digest_;  // of the secret presented
  const Token* token_ = nullptr;
  uint64_t standing_ = 1;
  // The last secret presented and its digest (an HTTP connection sends
  // the same one with every request: it is hashed once).
  std::string last_secret_;
  Digest last_digest_{};
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_ACCESS_H_
