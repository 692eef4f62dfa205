# SPDX-License-Identifier: MIT
# The library's sources and private compile definitions: sets KC_SOURCES
# (paths relative to the top-level source folder) and KC_DEFS, which the
# top-level CMakeLists.txt builds into kcache_objects. Included from there.

set(KC_SOURCES
  src/util.c src/scan.c src/table.c src/engine.c src/core/cache_glue.c
  src/cache/codec.c src/cache/counters.c src/cache/dir.c src/cache/entry_file.c src/cache/io.c
  src/cache/key.c src/cache/size.c src/cache/store.c src/cache/trust.c
  src/remote/config.c src/remote/conn.c src/remote/hiredis.c src/remote/hmac.c src/remote/queue.c
  src/remote/tier.c
  src/backends/host.c)
set(KC_DEFS)
option(KC_WITH_OPENCL "Build the OpenCL backend (opened with dlopen at run time)" ON)
option(KC_WITH_CUDA "Build the CUDA backend (opened with dlopen at run time)" ON)
foreach(be opencl cuda)
  string(TOUPPER ${be} BE)
  if(KC_WITH_${BE} AND EXISTS ${PROJECT_SOURCE_DIR}/src/backends/${be}.c)
    list(APPEND KC_SOURCES src/backends/${be}.c)
  else()
    list(APPEND KC_DEFS KC_WITHOUT_${BE})
  endif()
endforeach()

# A test build whose Nth allocation, file operation of the disk cache or
# backend call can be made to fail (src/fault.c; tests/reliability).
option(KC_FAULT_INJECTION "Build the fault-injection hooks (tests only, never for release)" OFF)
if(KC_FAULT_INJECTION)
  list(APPEND KC_SOURCES src/fault.c)
  list(APPEND KC_DEFS KC_FAULT_INJECTION)
endif()
