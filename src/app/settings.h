// delayqd's settings table: one row per setting, from which ParseConfig
// (config.cc) makes the command-line flags, reads the TOML file and the
// DELAYQ_* environment, checks ranges and writes --help, and from which
// docs/configuration.md's table is made (SettingsMarkdownTable; a test
// compares the two). The defaults are Config's member initializers
// (config.h): a row names its member, and its default is read from Config{}.
#ifndef DELAYQ_APP_SETTINGS_H_
#define DELAYQ_APP_SETTINGS_H_

#include <cstdint>
#include <span>
#include <string>
#include <variant>

#include "app/config.h"
#include "delayq/status.h"
#include "delayq/types.h"

namespace delayq::app {

// How a setting's value is written, read and checked.
enum class SettingKind {
  kString,    // any text; an empty flag or variable leaves it as it was
  kEnum,      // one of `values`, checked once every source is read
  kPort,      // an integer 0..65535
  kCount,     // an integer lo..hi (0, or min_nonzero..hi, when min_nonzero is set)
  kBool,      // TOML true/false; variable 1/0, true/false, yes/no, on/off; a
              // flag "--no-X" sets false, any other flag sets true
  kDuration,  // "60s", "5m", ... or "off" (0); at least lo ms unless 0
  kMemory,    // bytes, or with k/kb, m/mb, g/gb (powers of 1024), at least
              // min_nonzero unless 0; TOML: a number or a string
  // Rows that set no Config member through the sources above: ParseConfig
  // handles each itself. They are in the table for --help and the docs.
  kConfigFile,  // -c FILE / DELAYQ_CONFIG
  kVerbose,     // -V
  kVersion,     // -v
  kHelp,        // -h
};

// The Config member a row sets.
using SettingField =
    std::variant<std::monostate, std::string Config::*, bool Config::*, uint16_t Config::*,
                 uint32_t Config::*, uint64_t Config::*, TimeMs Config::*>;

struct Setting {
  const char* flags;    // CLI11's form: "-l,--listen", "--no-http"
  const char* env;      // "DELAYQ_LISTEN", or nullptr
  const char* toml;     // "listen", or nullptr; also names the setting in messages
  const char* metavar;  // "ADDR", or nullptr for a flag that takes no value
  SettingKind kind;
  SettingField field;
  int64_t lo = 0;            // kCount: smallest; kDuration: smallest other than 0, in ms
  int64_t hi = 0;            // kCount: largest
  uint64_t min_nonzero = 0;  // kCount, kMemory: see above
  std::span<const char* const> values = {};  // kEnum
  const char* example = nullptr;             // kDuration, kMemory: for messages ("5m")
  // Normalizes and checks the value once every source is read (after the
  // generic checks of its kind); nullptr: nothing more.
  Status (*finish)(Config* c) = nullptr;
  const char* help = "";  // --help, one or a few lines
  // docs/configuration.md: the default column when it is not Config{}'s
  // value as such (nullptr), and the meaning column.
  const char* doc_default = nullptr;
  const char* doc = "";
};

// Every setting, in the order of --help and of docs/configuration.md.
std::span<const Setting> Settings();

// The setting with TOML key `key`, or nullptr.
const Setting* FindSettingByToml(std::string_view key);

// The name of `s` in messages: its TOML key with spaces ("http idle timeout").
std::string SettingWhat(const Setting& s);

// `s`'s value in `c` as the docs write it: "0.0.0.0", "5m", "on".
std::string SettingValueText(const Setting& s, const Config& c);

// docs/configuration.md's table of settings (header included), one line per
// row, each ending in '\n'.
std::string SettingsMarkdownTable();

// --help's footer: the environment variables, and where the docs are.
std::string SettingsHelpFooter();

}  // namespace delayq::app

#endif  // DELAYQ_APP_SETTINGS_H_
