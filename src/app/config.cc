#include "app/config.h"

#include <toml++/toml.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "app/settings.h"
#include "app/toml_text.h"
#include "delayq/duration.h"
#include "delayq/version.h"

// Every setting is a row of the table in settings.cc; this file reads the
// rows' values from each source by the row's kind.
namespace delayq::app {
namespace {

using K = SettingKind;

// Writes `v` into `s`'s integer member (port, count, memory, duration).
void SetNumber(const Setting& s, Config* c, int64_t v) {
  std::visit(
      [&](auto field) {
        using F = decltype(field);
        if constexpr (std::is_same_v<F, uint16_t Config::*> ||
                      std::is_same_v<F, uint32_t Config::*> ||
                      std::is_same_v<F, uint64_t Config::*> ||
                      std::is_same_v<F, TimeMs Config::*>) {
          c->*field = static_cast<std::remove_reference_t<decltype(c->*field)>>(v);
        }
      },
      s.field);
}

void SetText(const Setting& s, Config* c, const std::string& v) {
  c->*std::get<std::string Config::*>(s.field) = v;
}

uint64_t GetNumber(const Setting& s, const Config& c) {
  uint64_t out = 0;
  std::visit(
      [&](auto field) {
        using F = decltype(field);
        if constexpr (std::is_same_v<F, uint16_t Config::*> ||
                      std::is_same_v<F, uint32_t Config::*> ||
                      std::is_same_v<F, uint64_t Config::*>) {
          out = c.*field;
        }
      },
      s.field);
  return out;
}

// kDuration: "5m", "90s", ... (at least s.lo ms unless 0), or "off": 0.
Status ParseDurationText(const Setting& s, const std::string& text, Config* c) {
  if (text == "off") return SetNumber(s, c, 0), Status::Ok();
  auto d = ParseDuration(text);
  if (!d.ok() || (s.lo > 0 && *d > 0 && *d < s.lo)) {
    std::string least = s.lo > 0 ? " of at least " + FormatDuration(s.lo) : "";
    return Status::InvalidArgument(SettingWhat(s) + " must be a duration" + least + " (like " +
                                   s.example + "), or off (not '" + text + "')");
  }
  SetNumber(s, c, *d);
  return Status::Ok();
}

// kMemory: "0", "1048576", "512mb", "2gb" (k, m, g: powers of 1024, as Redis
// reads its maxmemory), at least s.min_nonzero unless 0.
Status ParseMemoryText(const Setting& s, const std::string& text, Config* c) {
  Status bad = Status::InvalidArgument(
      SettingWhat(s) + " must be a number of bytes, optionally with kb, mb or gb (like " +
      s.example + "), at least " + std::to_string(s.min_nonzero >> 20) +
      "mb, or 0 for no limit (not '" + text + "')");
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 15) return bad;
  uint64_t n = std::stoull(text.substr(0, digits));
  std::string unit = text.substr(digits);
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  uint64_t scale = 1;
  if (unit == "k" || unit == "kb") {
    scale = 1ull << 10;
  } else if (unit == "m" || unit == "mb") {
    scale = 1ull << 20;
  } else if (unit == "g" || unit == "gb") {
    scale = 1ull << 30;
  } else if (!unit.empty() && unit != "b") {
    return bad;
  }
  if (n > UINT64_MAX / scale) return bad;
  uint64_t bytes = n * scale;
  if (bytes != 0 && bytes < s.min_nonzero) return bad;
  SetNumber(s, c, static_cast<int64_t>(bytes));
  return Status::Ok();
}

// The kinds whose text is parsed the same way from every source.
Status ParseText(const Setting& s, const std::string& text, Config* c) {
  return s.kind == K::kDuration ? ParseDurationText(s, text, c) : ParseMemoryText(s, text, c);
}

bool InRange(const Setting& s, int64_t v) {
  return v >= s.lo && v <= s.hi &&
         (s.min_nonzero == 0 || v == 0 || static_cast<uint64_t>(v) >= s.min_nonzero);
}

// "1", "true", "yes", "on" / "0", "false", "no", "off".
bool ParseBool(const std::string& v, bool* out) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return *out = true, true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return *out = false, true;
  return false;
}

std::string EnvValue(const std::vector<std::string>& env, const std::string& name) {
  std::string prefix = name + "=";
  for (const std::string& e : env)
    if (e.compare(0, prefix.size(), prefix) == 0) return e.substr(prefix.size());
  return {};
}

// One TOML key's value.
Status FromToml(const Setting& s, const toml::node& node, const std::string& path, Config* c) {
  auto bad = [&](const std::string& want) {
    return Status::InvalidArgument("config file " + path + ": '" + s.toml + "' must be " + want);
  };
  auto text_failed = [&](const Status& st) {
    return Status::InvalidArgument("config file " + path + ": " + st.message());
  };
  switch (s.kind) {
    case K::kString:
    case K::kEnum: {
      auto v = node.value<std::string>();
      if (!v) return bad("a string");
      SetText(s, c, *v);
      return Status::Ok();
    }
    case K::kPort:
    case K::kCount: {
      auto v = node.value<int64_t>();
      if (!v || !InRange(s, *v)) {
        if (s.min_nonzero != 0)
          return bad("0 or an integer " + std::to_string(s.min_nonzero) + ".." +
                     std::to_string(s.hi));
        return bad("an integer " + std::to_string(s.lo) + ".." + std::to_string(s.hi));
      }
      SetNumber(s, c, *v);
      return Status::Ok();
    }
    case K::kBool: {
      auto v = node.value<bool>();
      if (!v) return bad("true or false");
      c->*std::get<bool Config::*>(s.field) = *v;
      return Status::Ok();
    }
    case K::kDuration: {
      auto v = node.value<std::string>();
      if (!v) return bad(std::string("a string (like \"") + s.example + "\", or \"off\")");
      if (Status st = ParseText(s, *v, c); !st.ok()) return text_failed(st);
      return Status::Ok();
    }
    case K::kMemory: {
      std::string text;
      if (auto n = node.value<int64_t>(); n && *n >= 0) {
        text = std::to_string(*n);
      } else if (auto v = node.value<std::string>(); v) {
        text = *v;
      } else {
        return bad(std::string("a number of bytes or a string like \"") + s.example + "\"");
      }
      if (Status st = ParseText(s, text, c); !st.ok()) return text_failed(st);
      return Status::Ok();
    }
    default:
      return Status::Ok();  // no TOML key
  }
}

// The [push."topic"] and [schedule."name"] tables (`table` names them):
// each one's name and its body as JSON text (toml++'s JSON form of the
// table, dates and times as RFC 3339 strings), into *out; delayqd checks
// the bodies themselves, as their PUTs would.
Status NamedTables(const toml::node& node, std::string_view table, std::string_view what,
                   const std::string& path, std::vector<std::pair<std::string, std::string>>* out) {
  const toml::table* tables = node.as_table();
  if (tables == nullptr)
    return Status::InvalidArgument("config file " + path + ": '" + std::string(table) +
                                   "' must hold tables, [" + std::string(table) + ".\"" +
                                   std::string(what) + "\"]");
  for (const auto& [name, body] : *tables) {
    const toml::table* t = body.as_table();
    if (t == nullptr)
      return Status::InvalidArgument("config file " + path + ": " + std::string(table) + "." +
                                     std::string(name.str()) + " must be a table");
    std::ostringstream json;
    json << toml::json_formatter{*t};
    out->emplace_back(std::string(name.str()), json.str());
  }
  return Status::Ok();
}

// Applies the TOML file's keys to `c`. Unknown keys and wrong types are errors.
Status LoadToml(const std::string& path, Config* c) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("config file " + path + ": cannot read it");
  std::ostringstream text;
  text << in.rdbuf();
  if (Status st = CheckTomlText(text.str(), "config file " + path, /*ascii_only=*/false); !st.ok())
    return st;
  toml::table t;
  try {
    t = toml::parse(text.str(), path);
  } catch (const toml::parse_error& e) {  // toml++ reports by exception; it stops here
    std::ostringstream os;
    os << "config file " << path << ": " << e.description() << " (line " << e.source().begin.line
       << ")";
    return Status::InvalidArgument(os.str());
  }
  for (const auto& [key, node] : t) {
    if (key.str() == "push") {
      if (Status st = NamedTables(node, "push", "topic", path, &c->push_targets); !st.ok())
        return st;
      continue;
    }
    if (key.str() == "schedule") {
      if (Status st = NamedTables(node, "schedule", "name", path, &c->schedules); !st.ok())
        return st;
      continue;
    }
    const Setting* s = FindSettingByToml(key.str());
    if (s == nullptr)
      return Status::InvalidArgument("config file " + path + ": unknown setting '" +
                                     std::string(key.str()) + "'");
    if (Status st = FromToml(*s, node, path, c); !st.ok()) return st;
  }
  return Status::Ok();
}

// One environment variable's value; empty: unset.
Status FromEnv(const Setting& s, const std::string& v, Config* c) {
  const std::string name = s.env;
  switch (s.kind) {
    case K::kString:
    case K::kEnum:
      SetText(s, c, v);
      return Status::Ok();
    case K::kPort:
    case K::kCount: {
      char* end = nullptr;
      errno = 0;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (*end != '\0' || errno != 0 || n < s.lo || n > s.hi)
        return Status::InvalidArgument(name + " must be " + std::to_string(s.lo) + ".." +
                                       std::to_string(s.hi));
      SetNumber(s, c, n);
      return Status::Ok();
    }
    case K::kBool:
      if (!ParseBool(v, &(c->*std::get<bool Config::*>(s.field))))
        return Status::InvalidArgument(name + " must be 1/0, true/false, yes/no or on/off");
      return Status::Ok();
    case K::kDuration:
    case K::kMemory:
      if (Status st = ParseText(s, v, c); !st.ok())
        return Status::InvalidArgument(name + ": " + st.message());
      return Status::Ok();
    default:
      return Status::Ok();  // handled by ParseConfig
  }
}

// A flag's value, as CLI11 leaves it.
struct FlagValue {
  std::string text;     // the kinds that take text: empty when not given
  int64_t number = -1;  // kPort, kCount: -1 when not given
  bool set = false;     // kBool, kVerbose, kVersion
};

void AddFlag(CLI::App& app, const Setting& s, FlagValue* v) {
  switch (s.kind) {
    case K::kPort:
    case K::kCount:
      app.add_option(s.flags, v->number, s.help)
          ->option_text(s.metavar)
          ->check(CLI::Range(s.lo, s.hi));
      return;
    case K::kBool:
    case K::kVerbose:
    case K::kVersion:
      app.add_flag(s.flags, v->set, s.help);
      return;
    case K::kHelp:
      app.set_help_flag(s.flags, s.help);
      return;
    default:
      app.add_option(s.flags, v->text, s.help)->option_text(s.metavar);
      return;
  }
}

Status FromFlag(const Setting& s, const FlagValue& v, Config* c) {
  switch (s.kind) {
    case K::kString:
    case K::kEnum:
      if (!v.text.empty()) SetText(s, c, v.text);
      return Status::Ok();
    case K::kPort:
    case K::kCount:
      if (v.number >= 0) SetNumber(s, c, v.number);
      return Status::Ok();
    case K::kBool:
      if (v.set)
        c->*std::get<bool Config::*>(s.field) = !std::string_view(s.flags).starts_with("--no-");
      return Status::Ok();
    case K::kDuration:
    case K::kMemory:
      return v.text.empty() ? Status::Ok() : ParseText(s, v.text, c);
    default:
      return Status::Ok();  // handled by ParseConfig
  }
}

// The checks of a row's final value, once every source is read.
Status Finish(const Setting& s, Config* c) {
  if (s.kind == K::kEnum) {
    const std::string& v = c->*std::get<std::string Config::*>(s.field);
    std::string list;
    for (const char* allowed : s.values) {
      if (v == allowed) return s.finish != nullptr ? s.finish(c) : Status::Ok();
      list += list.empty() ? allowed : std::string(", ") + allowed;
    }
    return Status::InvalidArgument(SettingWhat(s) + " must be one of " + list + " (not '" + v +
                                   "')");
  }
  if (s.kind == K::kCount && s.min_nonzero != 0) {
    uint64_t v = GetNumber(s, *c);
    if (v != 0 && (v < s.min_nonzero || v > static_cast<uint64_t>(s.hi)))
      return Status::InvalidArgument(SettingWhat(s) + " must be 0 (no limit) or " +
                                     std::to_string(s.min_nonzero) + ".." + std::to_string(s.hi) +
                                     " bytes (not " + std::to_string(v) + ")");
  }
  return s.finish != nullptr ? s.finish(c) : Status::Ok();
}

}  // namespace

ParseOutcome ParseConfig(const std::vector<std::string>& args, const std::vector<std::string>& env,
                         Config* c) {
  ParseOutcome out;
  CLI::App app{
      "delayqd — a delay-queue server that speaks the beanstalkd protocol.\n"
      "Settings come from defaults, a TOML file (-c), DELAYQ_* environment\n"
      "variables and these flags, each overriding the one before.",
      "delayqd"};
  const std::span<const Setting> settings = Settings();
  std::vector<FlagValue> flags(settings.size());
  for (size_t i = 0; i < settings.size(); ++i) AddFlag(app, settings[i], &flags[i]);
  app.footer(SettingsHelpFooter());

  std::vector<std::string> rev(args.rbegin(), args.rend());
  if (!rev.empty()) rev.pop_back();  // program name
  try {
    app.parse(rev);
  } catch (const CLI::CallForHelp&) {
    out.text = app.help();
    return out;
  } catch (const CLI::ParseError& e) {
    out.exit_code = 2;
    out.text = std::string("delayqd: ") + e.what() + "\nRun 'delayqd --help' for the flags.\n";
    return out;
  }
  auto fail = [&out](const Status& st) {
    out.exit_code = 2;
    out.text = "delayqd: " + st.message() + "\n";
    return out;
  };
  const FlagValue* config_flag = nullptr;
  const FlagValue* log_level_flag = nullptr;
  for (size_t i = 0; i < settings.size(); ++i) {
    const Setting& s = settings[i];
    if (s.kind == K::kVersion && flags[i].set) {
      out.text = "delayqd " + std::string(kVersion) + "\n";
      return out;
    }
    if (s.kind == K::kVerbose) c->verbose = flags[i].set;
    if (s.kind == K::kConfigFile) config_flag = &flags[i];
    if (s.field == SettingField(&Config::log_level)) log_level_flag = &flags[i];
  }

  // 1. The TOML file.
  for (const Setting& s : settings) {
    if (s.kind != K::kConfigFile) continue;
    c->config_file = !config_flag->text.empty() ? config_flag->text : EnvValue(env, s.env);
  }
  if (!c->config_file.empty()) {
    if (Status st = LoadToml(c->config_file, c); !st.ok()) return fail(st);
  }
  // 2. The environment.
  for (const Setting& s : settings) {
    if (s.env == nullptr) continue;
    if (std::string v = EnvValue(env, s.env); !v.empty()) {
      if (Status st = FromEnv(s, v, c); !st.ok()) return fail(st);
    }
  }
  // 3. The flags.
  for (size_t i = 0; i < settings.size(); ++i) {
    if (Status st = FromFlag(settings[i], flags[i], c); !st.ok()) return fail(st);
  }
  // -V means level debug, unless --log-level says otherwise.
  if (c->verbose && (log_level_flag == nullptr || log_level_flag->text.empty()))
    c->log_level = "debug";
  for (const Setting& s : settings) {
    if (Status st = Finish(s, c); !st.ok()) return fail(st);
  }
  if (!c->in_memory && c->backend.empty() && c->data_dir.empty())
    return fail(
        Status::InvalidArgument("the data directory is empty (use --in-memory to keep no store)"));
  out.run = true;
  return out;
}

}  // namespace delayq::app
