#include "delayq/operations.h"

namespace delayq {

std::string_view ScopeName(Scope s) {
  switch (s) {
    case Scope::kPublic:
      return "public";
    case Scope::kAuthenticated:
      return "authenticated";
    case Scope::kRead:
      return "read";
    case Scope::kProduce:
      return "produce";
    case Scope::kConsume:
      return "consume";
    case Scope::kAdmin:
      return "admin";
  }
  return "?";
}

namespace {

std::vector<std::string_view> Split(std::string_view list, std::string_view sep) {
  std::vector<std::string_view> out;
  while (!list.empty()) {
    size_t end = list.find(sep);
    out.push_back(list.substr(0, end));
    if (end == std::string_view::npos) break;
    list.remove_prefix(end + sep.size());
  }
  return out;
}

// Each item in backquotes, joined by ", "; "—" if there is none.
std::string Quoted(const std::vector<std::string_view>& items) {
  if (items.empty()) return "—";
  std::string out;
  for (std::string_view item : items) {
    if (!out.empty()) out += ", ";
    out += '`';
    out += item;
    out += '`';
  }
  return out;
}

}  // namespace

std::vector<std::string_view> BeanstalkCommandsOf(const Operation& o) {
  return Split(o.beanstalk, " ");
}

std::vector<std::string_view> HttpRoutesOf(const Operation& o) { return Split(o.http, ", "); }

std::string OperationsMarkdownTable() {
  std::string t =
      "| operation | beanstalkd | HTTP | durable reply | may wait | `stats` counter | right | "
      "metric |\n"
      "|---|---|---|---|---|---|---|---|\n";
  for (const Operation& o : kOperations) {
    t += "| `";
    t += o.name;
    t += "` | ";
    t += Quoted(BeanstalkCommandsOf(o));
    t += " | ";
    t += Quoted(HttpRoutesOf(o));
    t += o.durable ? " | yes | " : " | no | ";
    t += o.may_wait ? "yes | " : "no | ";
    t += o.stat.empty() ? std::string("—") : "`" + std::string(o.stat) + "`";
    t += " | ";
    t += ScopeName(o.scope);
    t += " | `";
    t += o.metric;
    t += "` |\n";
  }
  return t;
}

}  // namespace delayq
