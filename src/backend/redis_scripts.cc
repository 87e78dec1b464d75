// The C++ side of the Lua library (redis_scripts.h): each function's name and
// batch code, and the library's text for FUNCTION LOAD. The Lua itself is
// src/backend/lua/delayq.lua, embedded by the build (cmake/embed_lua.cmake).
#include "backend/redis_scripts.h"

#include <iterator>

#include "backend/lua/delayq_lua.h"  // kLibrarySource, generated from lua/delayq.lua

namespace delayq::backend::redis {

namespace {

// Each function's name, and its code in a dq_batch ('\0': none), in the
// order of Script.
struct ScriptInfo {
  std::string_view name;
  char code;
};
constexpr ScriptInfo kScripts[] = {
    {"dq_put", 'p'},       {"dq_reserve", 'r'},     {"dq_top", 't'},    {"dq_reserve_job", 'j'},
    {"dq_delete", 'x'},    {"dq_release", 'l'},     {"dq_bury", 'b'},   {"dq_touch", 'h'},
    {"dq_kick", 'k'},      {"dq_kick_job", 'K'},    {"dq_return", 'n'}, {"dq_peek", 'e'},
    {"dq_stats_job", 's'}, {"dq_stats_topic", 'S'}, {"dq_pause", 'z'},  {"dq_clear", 'c'},
    {"dq_tick", 'i'},      {"dq_retire", 'q'},      {"dq_batch", '\0'}, {"dq_register", '\0'},
    {"dq_finish", 'f'},    {"dq_named", '\0'},      {"dq_list", 'L'},   {"dq_fire", 'F'},
    {"dq_object", '\0'},   {"dq_unfire", 'U'},
};
static_assert(std::size(kScripts) == kScriptCount, "one entry per Script");

}  // namespace

std::string_view Library() { return kLibrarySource; }

std::string_view Name(Script s) {
  return s < Script::kCount ? kScripts[static_cast<size_t>(s)].name : std::string_view();
}

char Code(Script s) { return s < Script::kCount ? kScripts[static_cast<size_t>(s)].code : '\0'; }

}  // namespace delayq::backend::redis
