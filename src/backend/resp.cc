#include "backend/resp.h"

#include <charconv>

namespace delayq::backend::resp {

namespace {

size_t Digits(size_t n) {
  size_t d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

void AppendPrefixed(std::string& out, char type, size_t n) {
  char buf[24];
  buf[0] = type;
  char* end = std::to_chars(buf + 1, buf + sizeof buf - 2, n).ptr;
  *end++ = '\r';
  *end++ = '\n';
  out.append(buf, static_cast<size_t>(end - buf));
}

}  // namespace

size_t BulkSize(size_t size) { return 1 + Digits(size) + 2 + size + 2; }

void AppendArray(std::string& out, size_t n) { AppendPrefixed(out, '*', n); }

void AppendBulk(std::string& out, std::string_view arg) {
  AppendPrefixed(out, '$', arg.size());
  out.append(arg);
  out.append("\r\n", 2);
}

std::string Format(std::span<const std::string_view> argv) {
  std::string out;
  out.reserve(1 + Digits(argv.size()) + 2 + BulksSize(argv));
  AppendArray(out, argv.size());
  AppendBulks(out, argv);
  return out;
}

}  // namespace delayq::backend::resp
