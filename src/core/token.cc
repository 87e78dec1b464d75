#include "delayq/token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <system_error>

#include "delayq/engine.h"

namespace delayq {

Digest Sha256(std::string_view data) {
  Digest d{};
  unsigned int len = 0;
  // EVP_Digest fails only on allocation failure: the digest is then all
  // zeros, which no token has (ParseDigestHex refuses nothing, but the
  // digest of a real secret being zero is out of reach).
  EVP_Digest(data.data(), data.size(), d.data(), &len, EVP_sha256(), nullptr);
  return d;
}

std::string DigestHex(const Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(d.size() * 2);
  for (uint8_t b : d) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

bool ParseDigestHex(std::string_view hex, Digest* out) {
  if (hex.size() != out->size() * 2) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < out->size(); ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

Result<std::string> NewSecret() {
  uint8_t raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1)
    return Status::Internal("the random source failed (OpenSSL RAND_bytes)");
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string s = "dq_";
  uint32_t acc = 0;
  int bits = 0;
  for (uint8_t b : raw) {
    acc = acc << 8 | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      s.push_back(kAlphabet[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) s.push_back(kAlphabet[(acc << (6 - bits)) & 63]);
  OPENSSL_cleanse(raw, sizeof raw);
  return s;
}

bool DigestsEqual(const Digest& a, const Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

uint8_t RightNamed(std::string_view name) {
  if (name == "produce") return kRightProduce;
  if (name == "consume") return kRightConsume;
  if (name == "admin") return kRightAdmin;
  return 0;
}

std::string RightsText(uint8_t rights) {
  std::string s;
  for (auto [bit, name] : {std::pair{kRightProduce, "produce"}, std::pair{kRightConsume, "consume"},
                           std::pair{kRightAdmin, "admin"}}) {
    if ((rights & bit) == 0) continue;
    if (!s.empty()) s += ',';
    s += name;
  }
  return s;
}

// Glob matching with '*' only: the classic greedy walk that backs up to the
// last star, O(pattern x topic) at worst (both at most 200 bytes).
bool TopicMatches(std::string_view pattern, std::string_view topic) {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < topic.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == topic[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

Status CheckTopicPattern(std::string_view pattern) {
  if (pattern == "*") return Status::Ok();
  // A pattern is a topic name once each star stands for one letter.
  std::string as_name(pattern);
  std::replace(as_name.begin(), as_name.end(), '*', 'x');
  if (!pattern.empty() && IsValidTopicName(as_name)) return Status::Ok();
  return Status::InvalidArgument("bad topic pattern '" + std::string(pattern) +
                                 "': 1..200 bytes of A-Za-z0-9-+/;.$_() and *, not starting "
                                 "with '-'");
}

Status CheckTokenName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 64;
  for (char c : name)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-');
  if (ok) return Status::Ok();
  return Status::InvalidArgument("bad token name '" + std::string(name) +
                                 "': 1..64 bytes of A-Za-z0-9._-");
}

std::string TokenFileEntry(const Token& t) {
  auto quoted = [](std::string_view s) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') q += '\\';
      q += c;
    }
    return q + '"';
  };
  auto list = [&](const std::vector<std::string>& items) {
    std::string l = "[";
    for (size_t i = 0; i < items.size(); ++i) l += (i ? ", " : "") + quoted(items[i]);
    return l + "]";
  };
  std::vector<std::string> rights;
  for (std::string_view r : {"produce", "consume", "admin"})
    if ((t.rights & RightNamed(r)) != 0) rights.emplace_back(r);
  std::string e = "[[token]]\n";
  e += "name = " + quoted(t.name) + "\n";
  e += "sha256 = \"" + DigestHex(t.sha256) + "\"\n";
  e += "topics = " + list(t.topics) + "\n";
  e += "rights = " + list(rights) + "\n";
  // The shortest text that reads back as the same double: a stream's
  // default six digits would write 1234567 as 1.23457e+06, another rate.
  auto num = [](double v) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, ec == std::errc() ? end : buf);
  };
  if (t.rate > 0) e += "rate = " + num(t.rate) + "\n";
  if (t.burst > 0) e += "burst = " + num(t.burst) + "\n";
  return e;
}

}  // namespace delayq
