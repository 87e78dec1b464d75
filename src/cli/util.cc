#include "cli/util.h"

#include <algorithm>
#include <charconv>
#include <ctime>

namespace delayq::cli {

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

size_t JsonDepth(std::string_view json) {
  size_t depth = 0, deepest = 0;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == '"') {
      for (++i; i < json.size() && json[i] != '"'; ++i)
        if (json[i] == '\\') ++i;
    }
  }
  return deepest;
}

}  // namespace delayq::cli
