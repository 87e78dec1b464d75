# The layers are enforced by the build (CMakeLists.txt, "Layers"): each
# layer's library compiles with its own include root and those of the layers
# below it only. This script preprocesses one-line sources with the include
# paths each library is given (build/layers/<layer>.includes, written at
# generate time) and checks that every include the wrong way fails to be
# found, and that every include the right way is found. A library given
# src/ whole, or another layer's root, fails the test.
#
# Usage (ctest: layer_includes):
#   cmake -DCXX=<compiler> -DBINARY_DIR=<build dir> -DSOURCE_DIR=<source dir>
#         -P tests/layers_test.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var CXX BINARY_DIR SOURCE_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "layers_test.cmake: -D${var}=... is required")
  endif()
endforeach()

# layer|header: headers that layer may include (a header of its own, and
# one of the layers below it).
set(allowed
  "core|core/job.h"
  "core|delayq/engine.h"
  "store|store/store.h"
  "store|delayq/types.h"
  "backend|backend/backend.h"
  "backend|store/writer.h"
  "delivery|delivery/cron.h"
  "delivery|backend/backend.h"
  "server|delivery/cron.h"
  "server|server/beanstalk_decoder.h"
  "server|backend/backend.h"
  "app|app/config.h"
  "app|server/server_context.h"
  "cli|cli/util.h"
  "cli|delayq/text.h")
# layer|header: headers that layer must not see: those of the layers above
# it, the engine's own (src/core) outside the engine, and every layer but
# the job model from the command-line client.
set(forbidden
  "core|store/store.h"
  "core|server/beanstalk_decoder.h"
  "store|core/job.h"
  "store|backend/backend.h"
  "store|server/beanstalk_server.h"
  "backend|core/job.h"
  "backend|server/server_context.h"
  "backend|app/config.h"
  "backend|delivery/cron.h"
  "delivery|server/server_context.h"
  "delivery|app/config.h"
  "server|app/config.h"
  "server|cli/client.h"
  "app|cli/client.h"
  "cli|core/job.h"
  "cli|store/store.h"
  "cli|backend/backend.h"
  "cli|server/beanstalk_decoder.h"
  "cli|app/config.h")

set(probe_dir ${BINARY_DIR}/layers/probe)
file(MAKE_DIRECTORY ${probe_dir})
set(failures "")
set(n 0)

# Preprocesses `#include "<header>"` with `layer`'s include paths; sets
# found (ON or OFF) and output (the compiler's messages).
function(probe layer header)
  set(list_file ${BINARY_DIR}/layers/${layer}.includes)
  if(NOT EXISTS ${list_file})
    message(FATAL_ERROR "${list_file} is missing: configure the build first")
  endif()
  file(STRINGS ${list_file} dirs)
  set(flags "")
  foreach(dir IN LISTS dirs)
    if(NOT dir STREQUAL "")
      list(APPEND flags "-I${dir}")
    endif()
  endforeach()
  math(EXPR i "${n} + 1")
  set(n ${i} PARENT_SCOPE)
  set(source ${probe_dir}/probe_${i}.cc)
  file(WRITE ${source} "#include \"${header}\"\n")
  execute_process(
    COMMAND ${CXX} -std=c++20 ${flags} -E -o ${probe_dir}/probe_${i}.ii ${source}
    RESULT_VARIABLE result
    OUTPUT_VARIABLE out
    ERROR_VARIABLE out)
  if(result EQUAL 0)
    set(found ON PARENT_SCOPE)
  else()
    set(found OFF PARENT_SCOPE)
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

# Probes each layer|header of `entries`; `expect` is ON when the header
# must be found, OFF when it must not be.
function(check_all entries expect)
  foreach(entry IN LISTS ${entries})
    string(REPLACE "|" ";" pair "${entry}")
    list(GET pair 0 layer)
    list(GET pair 1 header)
    probe(${layer} ${header})
    if(expect AND NOT found)
      list(APPEND failures "${layer} cannot include ${header}, one of its own or below it:\n${output}")
    elseif(NOT expect AND found)
      list(APPEND failures "${layer} can include ${header}: the build gives it another layer's headers")
    elseif(NOT expect AND NOT output MATCHES "${header}")
      # It failed, but not for want of the header: the check proves nothing.
      list(APPEND failures "${layer} including ${header} failed for another reason:\n${output}")
    endif()
  endforeach()
  set(failures "${failures}" PARENT_SCOPE)
  set(n ${n} PARENT_SCOPE)
endfunction()

check_all(allowed ON)
check_all(forbidden OFF)

# A path relative to the including file ("../server/x.h") would go round
# the include roots: no source uses one.
file(GLOB_RECURSE sources ${SOURCE_DIR}/src/*.h ${SOURCE_DIR}/src/*.cc
  ${SOURCE_DIR}/include/*.h)
foreach(source IN LISTS sources)
  file(STRINGS ${source} relative REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]*\\.\\./")
  if(relative)
    list(APPEND failures "${source} includes by a relative path: ${relative}")
  endif()
endforeach()

list(LENGTH allowed n_allowed)
list(LENGTH forbidden n_forbidden)
if(failures)
  list(JOIN failures "\n" text)
  message(FATAL_ERROR "layer includes:\n${text}")
endif()
message(STATUS "layer includes: ${n_allowed} right-way includes found, "
  "${n_forbidden} wrong-way includes refused")
