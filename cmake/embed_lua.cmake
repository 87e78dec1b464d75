# Embeds a Lua library in C++ (run by the build: cmake -P, see
# CMakeLists.txt): writes OUT, a header defining
#   inline constexpr std::string_view NAME = R"lua(<the library>)lua";
# in namespace NAMESPACE. The library is IN from its `#!lua` line on (what
# Redis requires first); the lines above it are the file's own comments.
foreach(var IN ITEMS IN OUT NAME NAMESPACE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_lua.cmake: ${var} not given")
  endif()
endforeach()

file(READ "${IN}" text)
string(FIND "${text}" "#!lua" start)
if(NOT start EQUAL 0)
  string(FIND "${text}" "\n#!lua" start)
  if(start EQUAL -1)
    message(FATAL_ERROR "${IN}: no line starts with #!lua (Redis's library header)")
  endif()
  math(EXPR start "${start} + 1")
  string(SUBSTRING "${text}" ${start} -1 text)
endif()
# The raw string ends at the first )lua" it holds.
string(FIND "${text}" ")lua\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} holds )lua\", which would end the C++ raw string that embeds it")
endif()

get_filename_component(source_name "${IN}" NAME)
set(header "// Generated from ${source_name} by cmake/embed_lua.cmake: do not edit.
#pragma once

#include <string_view>

namespace ${NAMESPACE} {

inline constexpr std::string_view ${NAME} = R\"lua(${text})lua\";

}  // namespace ${NAMESPACE}
")
file(WRITE "${OUT}" "${header}")
