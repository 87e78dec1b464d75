// Where delayqd may send a push (docs/push.md, "Outbound safety"): an
// http:// or https:// URL, and an address on the public internet unless
// --push-allow-private says otherwise. A target named by a host name is
// checked at each connection, on the address it resolved to (so a name that
// resolves to 127.0.0.1, or is made to later, is refused just the same).
#ifndef DELAYQ_DELIVERY_OUTBOUND_H_
#define DELAYQ_DELIVERY_OUTBOUND_H_

#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "delayq/status.h"

namespace delayq::delivery {

struct PushUrl {
  std::string url;     // as curl will ask for it (normalized)
  std::string scheme;  // "http" or "https"
  std::string host;    // a name, or an address (IPv6 without brackets)
  uint16_t port = 0;   // the scheme's when not given
  // Set when `host` is an address.
  std::optional<boost::asio::ip::address> address;
};

inline constexpr size_t kMaxPushUrlBytes = 2048;

// kInvalidArgument, saying why, for anything but http(s)://host[:port][/path]
// [?query] of at most kMaxPushUrlBytes: no user or password in it (send an
// Authorization header instead), no fragment.
Result<PushUrl> ParsePushUrl(std::string_view url);

// What an address is, when it is not on the public internet: "loopback",
// "private", "link-local", "carrier-grade NAT", "unspecified",
// "multicast", "reserved", "documentation", ...; nullopt for a public one.
// An IPv4 address inside IPv6 (::ffff:a.b.c.d, 64:ff9b::/96) is judged as
// that IPv4 address.
std::optional<std::string_view> NonPublicKind(const boost::asio::ip::address& a);

}  // namespace delayq::delivery

#endif  // DELAYQ_DELIVERY_OUTBOUND_H_
