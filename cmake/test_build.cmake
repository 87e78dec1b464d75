# How the test executables compile (included by CMakeLists.txt).
#
# The tests' own code (assertions, fixtures, clients of the server) does
# not need the build's optimization; its compile time is most of what a
# build costs. The code under test keeps the build's level, and so do the
# sources whose run time is their own (the model test and its reference
# engine: hundreds of thousands of operations).
# - delayq_server_tests (the upper layers' unit tests, the black-box tests
#   that start delayqd) is compiled at -O0 in every build: its tests wait
#   on sockets, timers and the servers they start. Against -O1 its objects
#   took a quarter of the CPU time in the sanitizer build (80 s against
#   295 s, unity batches) and about a third in the Release one, and its
#   tests ran about as long (Release: 191 s against 188) and ~20% longer
#   under the sanitizers (188 s against 155, four at a time).
# - delayq_core_tests (the engine's randomized tests run in-process) is
#   compiled at -O1 where the build optimizes more (the Release build's -O3,
#   RelWithDebInfo's -O2): at -O0 the inline functions of the engine's
#   headers that its files instantiate can stand in for the library's at
#   link time, and the randomized tests ran several times slower.

# The test executables also share precompiled headers: GoogleTest, the
# standard library, and Asio and RapidJSON for the upper layers' tests.
# Parsing them was most of what a small test file cost. Only third-party
# headers are precompiled, so the layers' include paths (tests/layers_test.cmake)
# are untouched.

string(TOUPPER "${CMAKE_BUILD_TYPE}" delayq_build_type)
string(REGEX MATCH "-O[0-9sgz]*" delayq_config_optimization
  "${CMAKE_CXX_FLAGS_${delayq_build_type}} ${CMAKE_CXX_FLAGS}")
set(delayq_test_optimization "")
if(delayq_config_optimization MATCHES "^-O[23]$")
  set(delayq_test_optimization -O1)
endif()

set(delayq_test_runtime_sources
  ${PROJECT_SOURCE_DIR}/tests/core/model_test.cc
  ${PROJECT_SOURCE_DIR}/tests/core/reference_engine.cc)

set(delayq_test_std_headers
  <algorithm> <atomic> <chrono> <cstdint> <cstdio> <cstdlib> <cstring> <fstream>
  <functional> <map> <memory> <mutex> <optional> <random> <set> <sstream> <string>
  <string_view> <thread> <utility> <vector>)

# delayq_test_build(target [headers...]): the settings above for a test
# executable, with the third-party headers it precompiles besides
# GoogleTest and the standard library's.
function(delayq_test_build target)
  # gtest's assertion macros expand to `switch (0) case 0: default: if ...
  # else ...`, so `if (c) ASSERT_TRUE(x);` trips g++'s -Wdangling-else (clang
  # is silent). Tests only; the libraries keep the warning. Otherwise GTest
  # 1.12 is clean under -Wall -Wextra -Wpedantic in C++20 with g++ 12 and
  # clang 14.
  set(opt ${delayq_test_optimization})
  if(target STREQUAL "delayq_server_tests")
    set(opt -O0)
  endif()
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-dangling-else>
    ${opt})
  # At -O1, GCC 12 reports a false -Warray-bounds inside libstdc++'s
  # std::string (and -Wstringop-overflow, -Wstringop-overread: char_traits'
  # memcpy, inlined; like -Wrestrict in CMakeLists.txt, GCC 13 no longer does).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13
     AND opt STREQUAL "-O1")
    target_compile_options(${target} PRIVATE -Wno-array-bounds -Wno-stringop-overflow
      -Wno-stringop-overread)
  endif()
  target_precompile_headers(${target} PRIVATE <gtest/gtest.h> ${delayq_test_std_headers} ${ARGN})
  get_target_property(sources ${target} SOURCES)
  foreach(src IN LISTS sources)
    if(src IN_LIST delayq_test_runtime_sources)
      set_property(SOURCE ${src} TARGET_DIRECTORY ${target} PROPERTY SKIP_PRECOMPILE_HEADERS ON)
      if(opt)
        set_property(SOURCE ${src} TARGET_DIRECTORY ${target} PROPERTY COMPILE_OPTIONS
          ${delayq_config_optimization})
      endif()
    endif()
  endforeach()
endfunction()
