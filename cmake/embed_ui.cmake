# Embeds the dashboard's files (src/ui/, docs/operations.md "Dashboard") in
# C++ (run by the build: cmake -P, see CMakeLists.txt): writes OUT, a header
# defining
#   inline constexpr UiFile kUiFiles[] = {{"app.js", "text/javascript...", R"ui(...)ui"}, ...};
# in namespace delayq::server, one entry per file of FILES (a ;-list of
# paths), named by its file name, typed by its extension.
foreach(var IN ITEMS FILES OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_ui.cmake: ${var} not given")
  endif()
endforeach()

set(entries "")
foreach(path IN LISTS FILES)
  get_filename_component(name "${path}" NAME)
  get_filename_component(ext "${path}" LAST_EXT)
  if(ext STREQUAL ".html")
    set(type "text/html; charset=utf-8")
  elseif(ext STREQUAL ".js")
    set(type "text/javascript; charset=utf-8")
  elseif(ext STREQUAL ".css")
    set(type "text/css; charset=utf-8")
  elseif(ext STREQUAL ".svg")
    set(type "image/svg+xml")
  else()
    message(FATAL_ERROR "embed_ui.cmake: ${path}: no content type for '${ext}'")
  endif()
  file(READ "${path}" text)
  # The raw string ends at the first )ui" it holds.
  string(FIND "${text}" ")ui\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} holds )ui\", which would end the C++ raw string that embeds it")
  endif()
  string(APPEND entries "    {\"${name}\", \"${type}\", R\"ui(${text})ui\"},\n")
endforeach()

file(WRITE "${OUT}" "// Generated from src/ui/ by cmake/embed_ui.cmake: do not edit.
#pragma once

#include <string_view>

namespace delayq::server {

struct UiFile {
  std::string_view name;
  std::string_view content_type;
  std::string_view body;
};

inline constexpr UiFile kUiFiles[] = {
${entries}};

}  // namespace delayq::server
")
