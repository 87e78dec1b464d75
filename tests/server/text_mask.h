// Masks for comparing the command-line client's output with expected text:
// the values that change from run to run (times, durations since a start,
// random ids) are replaced by a fixed mark on both sides. Hand-written
// rather than std::regex, whose GCC 12 implementation trips
// -Wmaybe-uninitialized in the sanitizer build.
#ifndef DELAYQ_TESTS_SERVER_TEXT_MASK_H_
#define DELAYQ_TESTS_SERVER_TEXT_MASK_H_

#include <string>
#include <string_view>
#include <vector>

namespace delayq::testing {

// Each time shaped like 2026-11-22T02:00:00.000Z becomes "<time>".
inline std::string MaskTimes(std::string_view s) {
  static constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd.dddZ";
  std::string out;
  for (size_t i = 0; i < s.size();) {
    bool match = i + kShape.size() <= s.size();
    for (size_t k = 0; match && k < kShape.size(); ++k) {
      const char c = s[i + k];
      match = kShape[k] == 'd' ? (c >= '0' && c <= '9') : c == kShape[k];
    }
    if (match) {
      out += "<time>";
      i += kShape.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

// On each line "<label>: <spaces><value>" whose label is listed, the value
// becomes `mark` (the spaces stay). `hex16` limits it to values of 16 hex
// digits (an instance id, not a job's).
inline std::string MaskLineValues(std::string_view s, const std::vector<std::string>& labels,
                                  std::string_view mark, bool hex16 = false) {
  std::string out;
  while (!s.empty()) {
    const size_t nl = s.find('\n');
    std::string_view line = s.substr(0, nl);
    s = nl == std::string_view::npos ? std::string_view() : s.substr(nl + 1);
    for (const std::string& label : labels) {
      if (!line.starts_with(label + ":")) continue;
      size_t v = label.size() + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      std::string_view value = line.substr(v);
      bool ok = !value.empty();
      if (hex16) {
        ok = value.size() == 16;
        for (char c : value) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
      }
      if (ok) {
        out.append(line.substr(0, v));
        out.append(mark);
        line = {};
      }
      break;
    }
    out.append(line);
    if (nl != std::string_view::npos) out += '\n';
  }
  return out;
}

// Each word of exactly 16 lower-case hex digits (a lease, alone or after
// "ID@"), whatever surrounds it but letters and digits, becomes "<hex>".
inline std::string MaskHex16(std::string_view s) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  auto word = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  };
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t e = i;
    while (e < s.size() && hex(s[e])) ++e;
    if (e - i == 16 && (i == 0 || !word(s[i - 1])) && (e == s.size() || !word(s[e]))) {
      out += "<hex>";
      i = e;
    } else if (e > i) {
      out.append(s.substr(i, e - i));
      i = e;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// Each JSON member "<name>":<digits> of a listed name becomes "<name>":*,
// and "id":"<16 hex digits>" becomes "id":"*".
inline std::string MaskJsonValues(std::string_view s, const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    bool done = false;
    for (const std::string& name : names) {
      const std::string key = "\"" + name + "\":";
      if (s.substr(i, key.size()) != key) continue;
      size_t e = i + key.size();
      while (e < s.size() && s[e] >= '0' && s[e] <= '9') ++e;
      if (e == i + key.size()) continue;
      out += key + "*";
      i = e;
      done = true;
      break;
    }
    if (done) continue;
    const std::string_view id = "\"id\":\"";
    if (s.substr(i, id.size()) == id && i + id.size() + 17 <= s.size() &&
        s[i + id.size() + 16] == '"') {
      bool hex = true;
      for (size_t k = 0; k < 16; ++k) {
        const char c = s[i + id.size() + k];
        hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
      }
      if (hex) {
        out += "\"id\":\"*\"";
        i += id.size() + 17;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_SERVER_TEXT_MASK_H_
