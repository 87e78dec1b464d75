#include "app/settings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace delayq::app {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The table of settings in docs/configuration.md: its lines from the header
// to the first line that is not a table row.
std::string DocTable(const std::string& doc) {
  std::istringstream in(doc);
  std::string line, table;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.starts_with("| flag | TOML key |")) inside = true;
    if (inside && !line.starts_with("|")) break;
    if (inside) table += line + "\n";
  }
  return table;
}

// docs/configuration.md's table is made from the settings table: after
// changing a row (src/app/settings.cc), paste what this test prints.
TEST(Settings, DocTableIsTheSettingsTable) {
  const std::string path = std::string(DELAYQ_SOURCE_DIR) + "/docs/configuration.md";
  const std::string doc = ReadFile(path);
  ASSERT_FALSE(doc.empty()) << "cannot read " << path;
  const std::string want = SettingsMarkdownTable();
  const std::string got = DocTable(doc);
  if (got == want) return;
  std::string diff;
  auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  const std::vector<std::string> g = lines(got), w = lines(want);
  for (size_t i = 0; i < std::max(g.size(), w.size()); ++i) {
    if (i < g.size() && i < w.size() && g[i] == w[i]) continue;
    diff += "line " + std::to_string(i + 1) +
            " of the table:\n  doc:   " + (i < g.size() ? g[i] : "(none)") +
            "\n  table: " + (i < w.size() ? w[i] : "(none)") + "\n";
  }
  ADD_FAILURE() << path << "'s table of settings differs from src/app/settings.cc's:\n"
                << diff << "\nReplace the table in " << path << " with:\n\n"
                << want;
}

std::string LongFlag(const Setting& s) {
  std::string_view f = s.flags;
  return std::string(f.substr(f.rfind(',') + 1));
}

// A value of `s` other than its default: as text (for a flag or variable),
// as TOML, and as SettingValueText writes it.
struct Sample {
  std::string text, toml, shown;
};

Sample SampleFor(const Setting& s) {
  const Config defaults;
  switch (s.kind) {
    case SettingKind::kString:
      if (std::string_view(s.toml) == "backend")
        return {"redis://h:1", "\"redis://h:1\"", "redis://h:1"};
      if (std::string_view(s.toml) == "trusted_networks")  // written back normalized
        return {"10.0.0.0/8, ::1", "\"10.0.0.0/8, ::1\"", "10.0.0.0/8,::1/128"};
      return {"x-" + std::string(s.toml), "\"x-" + std::string(s.toml) + "\"",
              "x-" + std::string(s.toml)};
    case SettingKind::kEnum:
      for (const char* v : s.values)
        if (v != SettingValueText(s, defaults)) return {v, "\"" + std::string(v) + "\"", v};
      break;
    case SettingKind::kPort:
    case SettingKind::kCount: {
      int64_t v = s.min_nonzero != 0 ? static_cast<int64_t>(s.min_nonzero) * 3 : s.lo + 7;
      return {std::to_string(v), std::to_string(v), std::to_string(v)};
    }
    case SettingKind::kBool: {
      bool v = SettingValueText(s, defaults) != "on";
      return {v ? "on" : "off", v ? "true" : "false", v ? "on" : "off"};
    }
    case SettingKind::kDuration:
      return {"7s", "\"7s\"", "7s"};
    case SettingKind::kMemory:
      return {"2mb", "\"2mb\"", std::to_string(2u << 20)};
    default:
      break;
  }
  return {};
}

// ctest runs each test as a process of its own, several at once.
std::string TomlPath() {
  return ::testing::TempDir() + "delayqd_settings_test." + std::to_string(::getpid()) + ".toml";
}

// Every row's variable, TOML key and flag set its member.
TEST(Settings, EveryRowFromEachSource) {
  const Config defaults;
  const std::string toml = TomlPath();
  for (const Setting& s : Settings()) {
    if (s.toml == nullptr) continue;
    SCOPED_TRACE(s.toml);
    const Sample sample = SampleFor(s);
    ASSERT_NE(sample.shown, SettingValueText(s, defaults)) << "the sample is the default";
    Config from_env;
    ParseOutcome o = ParseConfig({"delayqd"}, {std::string(s.env) + "=" + sample.text}, &from_env);
    ASSERT_TRUE(o.run) << o.text;
    EXPECT_EQ(SettingValueText(s, from_env), sample.shown) << s.env;

    std::ofstream(toml) << s.toml << " = " << sample.toml << "\n";
    Config from_toml;
    o = ParseConfig({"delayqd", "-c", toml}, {}, &from_toml);
    ASSERT_TRUE(o.run) << o.text;
    EXPECT_EQ(SettingValueText(s, from_toml), sample.shown) << "TOML";

    std::vector<std::string> args = {"delayqd", LongFlag(s)};
    if (s.kind != SettingKind::kBool) args.push_back(sample.text);
    Config from_flag;
    o = ParseConfig(args, {}, &from_flag);
    ASSERT_TRUE(o.run) << o.text;
    EXPECT_EQ(SettingValueText(s, from_flag), sample.shown) << LongFlag(s);

    // A wrong type in the file names the key.
    std::ofstream(toml) << s.toml << " = [1]\n";
    Config bad;
    o = ParseConfig({"delayqd", "-c", toml}, {}, &bad);
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.text.find("'" + std::string(s.toml) + "' must be"), std::string::npos) << o.text;
  }
  std::remove(toml.c_str());
}

// A default the docs write as a value (`60s`, `local`) is Config's default.
TEST(Settings, DocDefaultsAreConfigDefaults) {
  const Config defaults;
  for (const Setting& s : Settings()) {
    if (s.doc_default == nullptr || s.env == nullptr || s.toml == nullptr) continue;
    std::string_view d = s.doc_default;
    if (!d.starts_with("`")) continue;
    const std::string value(d.substr(1, d.find('`', 1) - 1));
    SCOPED_TRACE(s.toml);
    Config c;
    ParseOutcome o = ParseConfig({"delayqd"}, {std::string(s.env) + "=" + value}, &c);
    ASSERT_TRUE(o.run) << o.text;
    EXPECT_EQ(SettingValueText(s, c), SettingValueText(s, defaults)) << s.doc_default;
  }
}

TEST(Settings, NamesAreUniqueAndEveryVariableIsInHelp) {
  std::set<std::string> seen;
  Config c;
  const std::string help = ParseConfig({"delayqd", "--help"}, {}, &c).text;
  for (const Setting& s : Settings()) {
    EXPECT_TRUE(seen.insert(s.flags).second) << s.flags;
    if (s.toml != nullptr) EXPECT_TRUE(seen.insert(s.toml).second) << s.toml;
    if (s.env != nullptr) {
      EXPECT_TRUE(seen.insert(s.env).second) << s.env;
      EXPECT_NE(help.find(s.env), std::string::npos) << s.env;
    }
    EXPECT_NE(help.find(LongFlag(s)), std::string::npos) << s.flags;
  }
}

}  // namespace
}  // namespace delayq::app
