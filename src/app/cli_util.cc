#include "app/cli_util.h"

#include <charconv>
#include <ctime>

namespace delayq::cli {
namespace {

// Days from 1970-01-01 to the given civil date (proleptic Gregorian), after
// Howard Hinnant's days_from_civil.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// `n` decimal digits at s[at..], into *out.
bool Digits(std::string_view s, size_t at, size_t n, int* out) {
  if (at + n > s.size()) return false;
  int v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string ServerAddress::ToString() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::string(protocol == Protocol::kHttp ? "http://" : "beanstalk://") + h + ":" +
         std::to_string(port);
}

std::optional<ServerAddress> ParseServerUrl(std::string_view url, std::string* error) {
  ServerAddress a;
  std::string_view rest;
  if (url.starts_with("http://")) {
    a.protocol = ServerAddress::Protocol::kHttp;
    a.port = kDefaultHttpPort;
    rest = url.substr(7);
  } else if (url.starts_with("beanstalk://")) {
    a.protocol = ServerAddress::Protocol::kBeanstalk;
    a.port = kDefaultBeanstalkPort;
    rest = url.substr(12);
  } else {
    *error = "the server must be http://HOST[:PORT] or beanstalk://HOST[:PORT] (not '" +
             std::string(url) + "')";
    return std::nullopt;
  }
  if (rest.ends_with("/")) rest.remove_suffix(1);
  std::string_view host = rest, port;
  if (rest.starts_with("[")) {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) {
      *error = "unterminated [ in the server's address '" + std::string(url) + "'";
      return std::nullopt;
    }
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        *error = "unexpected '" + std::string(after) + "' in the server's address";
        return std::nullopt;
      }
      port = after.substr(1);
      if (port.empty()) port = "-";  // "[::1]:" names no port
    }
  } else if (size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (port.empty()) port = "-";
  }
  if (host.empty() || host.find_first_of("/?#@ ") != std::string_view::npos) {
    *error = "bad host in the server's address '" + std::string(url) + "'";
    return std::nullopt;
  }
  a.host = std::string(host);
  if (!port.empty()) {
    auto p = ParseUint(port, 1, 65535);
    if (!p) {
      *error = "bad port in the server's address '" + std::string(url) + "' (1..65535)";
      return std::nullopt;
    }
    a.port = static_cast<uint16_t>(*p);
  }
  return a;
}

std::optional<TimeMs> ParseRfc3339(std::string_view s) {
  int y, mo, d, h, mi, se;
  if (s.size() < 20 || !Digits(s, 0, 4, &y) || s[4] != '-' || !Digits(s, 5, 2, &mo) ||
      s[7] != '-' || !Digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
      !Digits(s, 11, 2, &h) || s[13] != ':' || !Digits(s, 14, 2, &mi) || s[16] != ':' ||
      !Digits(s, 17, 2, &se))
    return std::nullopt;
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] || (mo == 2 && d == 29 && !leap) || h > 23 ||
      mi > 59 || se > 60)
    return std::nullopt;
  size_t i = 19;
  int64_t ms = 0;
  if (i < s.size() && s[i] == '.') {
    const size_t start = ++i;
    int64_t scale = 100;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      ms += (s[i] - '0') * scale;
      scale /= 10;
      ++i;
    }
    if (i == start) return std::nullopt;
  }
  int64_t offset_min = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    int oh, om;
    if (!Digits(s, i + 1, 2, &oh) || i + 3 >= s.size() || s[i + 3] != ':' ||
        !Digits(s, i + 4, 2, &om) || oh > 23 || om > 59)
      return std::nullopt;
    offset_min = (s[i] == '-' ? -1 : 1) * (oh * 60 + om);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  // A leap second (:60) counts as the last second of its minute.
  const int64_t secs =
      DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 +
      mi * 60 + std::min(se, 59) - offset_min * 60;
  return secs * 1000 + ms;
}

std::optional<TimeMs> ParseTimeArg(std::string_view text) {
  if (auto ms = ParseUint(text, 0, static_cast<uint64_t>(INT64_MAX / 2)))
    return static_cast<TimeMs>(*ms);
  return ParseRfc3339(text);
}

std::string FormatRfc3339(TimeMs ms) {
  const int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  const auto frac = static_cast<int>(ms - secs * 1000);
  const auto t = static_cast<std::time_t>(secs);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return std::to_string(ms) + "ms";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
  return buf;
}

std::optional<uint64_t> ParseUint(std::string_view text, uint64_t lo, uint64_t hi) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || v < lo || v > hi) return std::nullopt;
  return v;
}

bool IsValidKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxKeyLength) return false;
  for (char c : key)
    if (c <= ' ' || c > '~') return false;
  return true;
}

bool IsText(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return false;
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and code points beyond U+10FFFF are not UTF-8.
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return false;
    i += len;
  }
  return true;
}

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << 16 |
                       static_cast<uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8 |
                       static_cast<unsigned char>(in[i + 2]);
    out += kBase64[v >> 18];
    out += kBase64[(v >> 12) & 63];
    out += kBase64[(v >> 6) & 63];
    out += kBase64[v & 63];
  }
  if (const size_t left = in.size() - i; left > 0) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << 16;
    if (left == 2) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8;
    out += kBase64[v >> 18];
    out += kBase64[(v >> 12) & 63];
    out += left == 2 ? kBase64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool Base64Decode(std::string_view in, std::string* out) {
  out->clear();
  if (in.size() % 4 != 0) return false;
  out->reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + static_cast<size_t>(k)];
      if (c == '=' && last && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return false;  // data after padding
      v[k] = Base64Value(c);
      if (v[k] < 0) return false;
    }
    const uint32_t w = static_cast<uint32_t>(v[0]) << 18 | static_cast<uint32_t>(v[1]) << 12 |
                       static_cast<uint32_t>(v[2]) << 6 | static_cast<uint32_t>(v[3]);
    out->push_back(static_cast<char>(w >> 16));
    if (pad < 2) out->push_back(static_cast<char>((w >> 8) & 0xff));
    if (pad < 1) out->push_back(static_cast<char>(w & 0xff));
  }
  return true;
}

std::string PercentEncode(std::string_view segment) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : segment) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ParseYamlMap(std::string_view yaml) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!yaml.empty()) {
    const size_t nl = yaml.find('\n');
    std::string_view line = yaml.substr(0, nl);
    yaml = nl == std::string_view::npos ? std::string_view() : yaml.substr(nl + 1);
    const size_t colon = line.find(": ");
    if (line == "---" || colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 2);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    out.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  }
  return out;
}

std::vector<std::string> ParseYamlList(std::string_view yaml) {
  std::vector<std::string> out;
  while (!yaml.empty()) {
    const size_t nl = yaml.find('\n');
    std::string_view line = yaml.substr(0, nl);
    yaml = nl == std::string_view::npos ? std::string_view() : yaml.substr(nl + 1);
    if (line.starts_with("- ")) out.emplace_back(line.substr(2));
  }
  return out;
}

std::string Plural(uint64_t n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

}  // namespace delayq::cli
