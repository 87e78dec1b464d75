#include "app/auth_file.h"

#include <toml++/toml.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "app/toml_text.h"

namespace delayq::app {
namespace {

std::string Where(std::string_view source, const toml::source_region& r) {
  return std::string(source) + " line " + std::to_string(r.begin.line);
}

Status Bad(std::string_view source, const toml::node& n, const std::string& what) {
  return Status::InvalidArgument(Where(source, n.source()) + ": " + what);
}

// A list of strings: `key = ["a", "b"]`.
Status Strings(std::string_view source, const toml::node& n, const std::string& what,
               std::vector<std::string>* out) {
  const toml::array* a = n.as_array();
  if (a == nullptr || a->empty()) return Bad(source, n, what + " must be a list of strings");
  for (const toml::node& e : *a) {
    const auto* s = e.as_string();
    if (s == nullptr) return Bad(source, e, what + " must be a list of strings");
    out->push_back(s->get());
  }
  return Status::Ok();
}

Status Number(std::string_view source, const toml::node& n, const std::string& what, double* out) {
  if (auto i = n.value_exact<int64_t>()) {
    *out = static_cast<double>(*i);
  } else if (auto f = n.value_exact<double>()) {
    *out = *f;
  } else {
    return Bad(source, n, what + " must be a number");
  }
  if (!std::isfinite(*out) || *out <= 0 || *out > 1e9)
    return Bad(source, n, what + " must be more than 0 and at most 1000000000");
  return Status::Ok();
}

Status ParseToken(std::string_view source, const toml::table& t, Token* out) {
  const auto* name = t.get_as<std::string>("name");
  if (name == nullptr || name->get().empty())
    return Status::InvalidArgument(Where(source, t.source()) +
                                   ": a [[token]] needs a name (a non-empty string)");
  out->name = name->get();
  if (Status st = CheckTokenName(out->name); !st.ok()) return Bad(source, *name, st.message());
  const std::string who = "token '" + out->name + "'";
  for (const auto& [key, node] : t) {
    const std::string_view k = key.str();
    if (k == "name") continue;
    if (k == "sha256") {
      const auto* s = node.as_string();
      if (s == nullptr || !ParseDigestHex(s->get(), &out->sha256))
        return Bad(source, node,
                   who +
                       ": sha256 must be 64 hex digits, the SHA-256 of the secret (never the "
                       "secret itself; `delayq token new` prints it)");
    } else if (k == "topics") {
      if (Status st = Strings(source, node, who + ": topics", &out->topics); !st.ok()) return st;
      for (const std::string& p : out->topics)
        if (Status st = CheckTopicPattern(p); !st.ok())
          return Bad(source, node, who + ": " + st.message());
    } else if (k == "rights") {
      std::vector<std::string> rights;
      if (Status st = Strings(source, node, who + ": rights", &rights); !st.ok()) return st;
      for (const std::string& r : rights) {
        const uint8_t bit = RightNamed(r);
        if (bit == 0)
          return Bad(source, node, who + ": unknown right '" + r + "' (produce, consume, admin)");
        out->rights |= bit;
      }
    } else if (k == "rate") {
      if (Status st = Number(source, node, who + ": rate", &out->rate); !st.ok()) return st;
    } else if (k == "burst") {
      if (Status st = Number(source, node, who + ": burst", &out->burst); !st.ok()) return st;
    } else {
      return Bad(source, node,
                 who + ": unknown key '" + std::string(k) +
                     "' (a token has name, sha256, topics, rights, rate, burst)");
    }
  }
  if (!t.contains("sha256"))
    return Status::InvalidArgument(Where(source, t.source()) + ": " + who + " needs a sha256");
  if (out->topics.empty())
    return Status::InvalidArgument(Where(source, t.source()) + ": " + who +
                                   " needs topics (patterns; [\"*\"] for every topic)");
  if (out->rights == 0)
    return Status::InvalidArgument(Where(source, t.source()) + ": " + who +
                                   " needs rights (produce, consume, admin)");
  if (out->burst > 0 && out->rate == 0)
    return Status::InvalidArgument(Where(source, t.source()) + ": " + who +
                                   " has a burst but no rate");
  return Status::Ok();
}

}  // namespace

Result<std::vector<Token>> ParseAuthFile(std::string_view text, std::string_view source) {
  if (Status st = CheckTomlText(text, source, /*ascii_only=*/true); !st.ok()) return st;
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument(Where(source, e.source()) + ": " + std::string(e.description()));
  }
  std::vector<Token> tokens;
  for (const auto& [key, node] : root) {
    if (key.str() != "token")
      return Bad(source, node,
                 "unknown key '" + std::string(key.str()) + "' (the file holds [[token]] tables)");
    const toml::array* list = node.as_array();
    if (list == nullptr || !list->is_array_of_tables())
      return Bad(source, node, "'token' must be [[token]] tables");
    for (const toml::node& n : *list) {
      Token t;
      if (Status st = ParseToken(source, *n.as_table(), &t); !st.ok()) return st;
      tokens.push_back(std::move(t));
    }
  }
  return tokens;
}

Result<std::shared_ptr<const server::AccessPolicy>> LoadAccessPolicy(
    const std::string& auth_file, const std::string& trusted_networks) {
  auto networks = server::Networks::Parse(trusted_networks);
  if (!networks.ok()) return networks.status();
  std::vector<Token> tokens;
  if (!auth_file.empty()) {
    std::ifstream in(auth_file, std::ios::binary);
    if (!in) return Status::InvalidArgument("cannot read the token file " + auth_file);
    std::ostringstream text;
    text << in.rdbuf();
    auto parsed = ParseAuthFile(text.str(), auth_file);
    if (!parsed.ok()) return parsed.status();
    tokens = std::move(parsed).value();
  }
  auto policy = server::AccessPolicy::Make(std::move(tokens), std::move(networks).value());
  if (!policy.ok() && !auth_file.empty())
    return Status::InvalidArgument(auth_file + ": " + policy.status().message());
  return policy;
}

}  // namespace delayq::app
