#include "delivery/outbound.h"

#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <memory>

namespace delayq::delivery {

namespace {

struct CurlUrlFree {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};
struct CurlStrFree {
  void operator()(char* s) const { curl_free(s); }
};
using CurlStr = std::unique_ptr<char, CurlStrFree>;

// A part of the URL, or nullopt when it has none.
std::optional<std::string> Part(CURLU* u, CURLUPart part, unsigned flags = 0) {
  char* s = nullptr;
  if (curl_url_get(u, part, &s, flags) != CURLUE_OK || s == nullptr) return std::nullopt;
  CurlStr held(s);
  return std::string(s);
}

struct V4Net {
  uint32_t base;
  int prefix;
  std::string_view kind;
};

// The IPv4 networks that are not the public internet (RFC 6890's special
// purpose registry, and multicast and the reserved block).
constexpr std::array<V4Net, 16> kV4 = {{
    {0x00000000, 8, "unspecified"},         // 0.0.0.0/8 "this network"
    {0x0A000000, 8, "private"},             // 10.0.0.0/8
    {0x64400000, 10, "carrier-grade NAT"},  // 100.64.0.0/10
    {0x7F000000, 8, "loopback"},            // 127.0.0.0/8
    {0xA9FE0000, 16, "link-local"},         // 169.254.0.0/16 (cloud metadata)
    {0xAC100000, 12, "private"},            // 172.16.0.0/12
    {0xC0000000, 24, "reserved"},           // 192.0.0.0/24 protocol assignments
    {0xC0000200, 24, "documentation"},      // 192.0.2.0/24
    {0xC0586300, 24, "reserved"},           // 192.88.99.0/24 6to4 relay
    {0xC0A80000, 16, "private"},            // 192.168.0.0/16
    {0xC6120000, 15, "benchmarking"},       // 198.18.0.0/15
    {0xC6336400, 24, "documentation"},      // 198.51.100.0/24
    {0xCB007100, 24, "documentation"},      // 203.0.113.0/24
    {0xE0000000, 4, "multicast"},           // 224.0.0.0/4
    {0xF0000000, 4, "reserved"},            // 240.0.0.0/4, 255.255.255.255
    {0xFFFFFFFF, 32, "broadcast"},
}};

std::optional<std::string_view> V4Kind(uint32_t a) {
  std::optional<std::string_view> found;
  int best = -1;
  for (const V4Net& n : kV4) {
    const uint32_t mask = n.prefix == 0 ? 0 : ~uint32_t{0} << (32 - n.prefix);
    if ((a & mask) == n.base && n.prefix > best) {
      found = n.kind;
      best = n.prefix;
    }
  }
  return found;
}

}  // namespace

std::optional<std::string_view> NonPublicKind(const boost::asio::ip::address& a) {
  if (a.is_v4()) return V4Kind(a.to_v4().to_uint());
  const boost::asio::ip::address_v6 v6 = a.to_v6();
  const auto b = v6.to_bytes();
  const auto v4_at = [&](size_t i) {
    return uint32_t{b[i]} << 24 | uint32_t{b[i + 1]} << 16 | uint32_t{b[i + 2]} << 8 | b[i + 3];
  };
  const auto zeros = [&](size_t from, size_t to) {
    return std::all_of(b.begin() + static_cast<long>(from), b.begin() + static_cast<long>(to),
                       [](uint8_t x) { return x == 0; });
  };
  if (v6.is_v4_mapped()) return V4Kind(v4_at(12));
  // ::ffff:0:a.b.c.d (SIIT, RFC 6052's translated form): IPv4 inside.
  if (zeros(0, 8) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0)
    return V4Kind(v4_at(12));
  // 64:ff9b::/96, NAT64: the IPv4 address in its last 32 bits.
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && zeros(4, 12))
    return V4Kind(v4_at(12));
  // 64:ff9b:1::/48, NAT64 for local use (RFC 8215): never the internet.
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1)
    return "private";
  // 2002::/16, 6to4: the IPv4 address in bits 16..47.
  if (b[0] == 0x20 && b[1] == 0x02) {
    if (std::optional<std::string_view> k = V4Kind(v4_at(2))) return k;
  }
  // 2001::/32 Teredo (a tunnel to any IPv4, its addresses obfuscated
  // inside): refused as reserved.
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) return "reserved";
  // 100::/64, discard-only.
  if (b[0] == 0x01 && b[1] == 0x00 && zeros(2, 8)) return "reserved";
  // 2001:2::/48 benchmarking; 2001:10::/28 and 2001:20::/28 ORCHID.
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0x02 && b[4] == 0 && b[5] == 0)
    return "benchmarking";
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && ((b[3] & 0xf0) == 0x10 || (b[3] & 0xf0) == 0x20))
    return "reserved";
  // 3fff::/20, documentation (RFC 9637).
  if (b[0] == 0x3f && (b[1] & 0xf0) == 0xf0) return "documentation";
  if (v6.is_unspecified()) return "unspecified";
  if (v6.is_loopback()) return "loopback";
  if (v6.is_link_local()) return "link-local";                  // fe80::/10
  if ((b[0] & 0xfe) == 0xfc) return "private";                  // fc00::/7 unique local
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return "private";  // fec0::/10 site-local
  if (b[0] == 0xff) return "multicast";
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return "documentation";
  if (std::all_of(b.begin(), b.begin() + 12, [](uint8_t x) { return x == 0; }))
    return "reserved";  // ::a.b.c.d, IPv4-compatible (deprecated)
  return std::nullopt;
}

Result<PushUrl> ParsePushUrl(std::string_view text) {
  if (text.size() > kMaxPushUrlBytes)
    return Status::InvalidArgument("a push URL is at most " + std::to_string(kMaxPushUrlBytes) +
                                   " bytes");
  std::unique_ptr<CURLU, CurlUrlFree> u(curl_url());
  if (!u) return Status::Internal("no memory for a URL");
  const std::string s(text);
  if (CURLUcode rc = curl_url_set(u.get(), CURLUPART_URL, s.c_str(), CURLU_NON_SUPPORT_SCHEME);
      rc != CURLUE_OK)
    return Status::InvalidArgument("not a URL: " + std::string(curl_url_strerror(rc)));
  PushUrl out;
  out.scheme = Part(u.get(), CURLUPART_SCHEME).value_or("");
  if (out.scheme != "http" && out.scheme != "https")
    return Status::InvalidArgument("a push URL is http:// or https://, not " + out.scheme + "://");
  if (Part(u.get(), CURLUPART_USER) || Part(u.get(), CURLUPART_PASSWORD))
    return Status::InvalidArgument(
        "a push URL holds no user or password: send an Authorization header instead");
  if (Part(u.get(), CURLUPART_FRAGMENT))
    return Status::InvalidArgument("a push URL has no #fragment");
  out.host = Part(u.get(), CURLUPART_HOST).value_or("");
  if (out.host.empty()) return Status::InvalidArgument("a push URL names a host");
  std::string bare = out.host;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']')
    bare = bare.substr(1, bare.size() - 2);
  boost::system::error_code ec;
  boost::asio::ip::address addr = boost::asio::ip::make_address(bare, ec);
  if (!ec) {
    out.address = addr;
    out.host = bare;
  }
  const std::string port = Part(u.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT).value_or("0");
  out.port = static_cast<uint16_t>(std::stoul(port));
  if (out.port == 0) return Status::InvalidArgument("a push URL's port is 1..65535");
  out.url = Part(u.get(), CURLUPART_URL).value_or(s);
  return out;
}

}  // namespace delayq::delivery
