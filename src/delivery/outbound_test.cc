// The push targets delayqd refuses unless told otherwise: addresses that
// are not the public internet (loopback, private, link-local, ...; IPv4
// inside IPv6 judged as IPv4), and URLs that are not plain http(s).
#include "delivery/outbound.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace delayq::delivery {
namespace {

TEST(Outbound, NonPublicAddressesAreNamedPublicOnesAreNot) {
  const std::vector<std::pair<const char*, const char*>> table = {
      {"127.0.0.1", "loopback"},
      {"127.255.1.2", "loopback"},
      {"10.1.2.3", "private"},
      {"172.16.0.1", "private"},
      {"172.31.255.255", "private"},
      {"192.168.1.1", "private"},
      {"169.254.169.254", "link-local"},  // the cloud's metadata service
      {"100.64.0.1", "carrier-grade NAT"},
      {"0.0.0.0", "unspecified"},
      {"0.1.2.3", "unspecified"},
      {"224.0.0.1", "multicast"},
      {"255.255.255.255", "broadcast"},
      {"240.0.0.1", "reserved"},
      {"192.0.2.10", "documentation"},
      {"198.18.0.1", "benchmarking"},
      {"::1", "loopback"},
      {"::", "unspecified"},
      {"fe80::1", "link-local"},
      {"fd00::1", "private"},
      {"fc00::1", "private"},
      {"ff02::1", "multicast"},
      {"2001:db8::1", "documentation"},
      {"::ffff:127.0.0.1", "loopback"},  // IPv4-mapped
      {"::ffff:10.0.0.1", "private"},
      {"64:ff9b::a9fe:a9fe", "link-local"},  // NAT64 of 169.254.169.254
      {"::127.0.0.1", "reserved"},
      {"::ffff:0:10.0.0.1", "private"},     // SIIT
      {"64:ff9b:1::a00:1", "private"},      // local-use NAT64
      {"2002:7f00:1::1", "loopback"},       // 6to4 of 127.0.0.1
      {"2002:a9fe:a9fe::1", "link-local"},  // 6to4 of 169.254.169.254
      {"2001:0:4136:e378::1", "reserved"},  // Teredo
      {"100::1", "reserved"},               // discard-only
      {"2001:2::1", "benchmarking"},
      {"2001:10::1", "reserved"},  // ORCHID
      {"2001:20::1", "reserved"},  // ORCHIDv2
      {"3fff::1", "documentation"},
  };
  for (auto [text, kind] : table) {
    std::optional<std::string_view> k = NonPublicKind(boost::asio::ip::make_address(text));
    ASSERT_TRUE(k.has_value()) << text << " was taken for public";
    EXPECT_EQ(*k, kind) << text;
  }
  for (const char* pub : {"8.8.8.8", "1.1.1.1", "172.32.0.1", "172.15.255.255", "100.128.0.1",
                          "169.255.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8",
                          "64:ff9b::808:808", "2002:808:808::1", "2001:4860::8888"}) {
    EXPECT_FALSE(NonPublicKind(boost::asio::ip::make_address(pub)).has_value()) << pub;
  }
}

TEST(Outbound, UrlsArePlainHttpOrHttps) {
  Result<PushUrl> u = ParsePushUrl("https://hooks.example.com/orders/close?x=1");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "hooks.example.com");
  EXPECT_EQ(u->port, 443);
  EXPECT_FALSE(u->address.has_value());
  Result<PushUrl> v = ParsePushUrl("http://127.0.0.1:8080/x");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->port, 8080);
  ASSERT_TRUE(v->address.has_value());
  EXPECT_EQ(NonPublicKind(*v->address), "loopback");
  Result<PushUrl> six = ParsePushUrl("http://[::1]:9000/");
  ASSERT_TRUE(six.ok());
  EXPECT_EQ(six->host, "::1");
  ASSERT_TRUE(six->address.has_value());
  EXPECT_TRUE(six->address->is_v6());

  for (const char* bad :
       {"", "hooks.example.com/x", "ftp://example.com/", "file:///etc/passwd",
        "gopher://example.com/", "https://user:pw@example.com/", "https://user@example.com/",
        "https://example.com/#frag", "https://example.com:0/", "https://example.com:70000/",
        "https://exa mple.com/"}) {
    Result<PushUrl> r = ParsePushUrl(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_EQ(r.code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(ParsePushUrl("https://example.com/" + std::string(kMaxPushUrlBytes, 'a')).ok());
}

}  // namespace
}  // namespace delayq::delivery
