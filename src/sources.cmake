# SPDX-License-Identifier: MIT
# sources.cmake -- the library's source list (KC_SOURCES) and its private
# compile definitions (KC_DEFS), included by the top-level CMakeLists.txt.
# A new backend is one file or folder under src/backends/ plus one row in
# src/backends/registry.c (and its absent stub there, for KC_WITH_<BE>=OFF);
# the glob below finds it: no line here (doc/design.md, "Adding a backend").

set(KC_SOURCES
    src/base/child.c
    src/base/config.c
    src/base/dl.c
    src/base/err.c
    src/base/filedep.c
    src/base/fork.c
    src/base/grace.c
    src/base/safeopen.c
    src/base/hmac.c
    src/base/log.c
    src/base/mem.c
    src/base/misc.c
    src/base/sb.c
    src/base/settings.c
    src/core/checked.c
    src/core/code.c
    src/core/config.c
    src/core/context.c
    src/core/fork.c
    src/core/interop.c
    src/core/launch.c
    src/core/launch_ex.c
    src/core/args.c
    src/core/capture.c
    src/core/explain.c
    src/core/log.c
    src/core/pool.c
    src/backends/probe.c
    src/core/runtime.c
    src/core/headers.c
    src/core/lex.c
    src/core/langs.c
    src/core/scan.c
    src/core/source_file.c
    src/core/table.c
    src/core/resolve.c
    src/core/extfiles.c
    src/core/util.c
    src/core/world.c
    src/core/params.c
    src/core/cache_glue.c
    src/cache/codec.c
    src/cache/counters.c
    src/cache/conf.c
    src/cache/dir.c
    src/cache/entry_file.c
    src/cache/evict.c
    src/cache/index.c
    src/cache/io.c
    src/cache/key.c
    src/cache/planted.c
    src/cache/store.c
    src/cache/summary.c
    src/cache/trust.c
    src/remote/config.c
    src/remote/conn.c
    src/remote/cluster.c
    src/remote/tls.c
    src/remote/estimate.c
    src/remote/hiredis.c
    src/remote/mac.c
    src/remote/queue.c
    src/remote/tier.c
    src/backends/registry.c)
set(KC_DEFS)

# The backends: every folder src/backends/<name>/ (or file
# src/backends/<name>.c) is one, found here; a new one needs no line in
# this file. Each but host, which is always built, has an option
# KC_WITH_<NAME> (ON); one left out is built as the registry's stub
# (KC_WITHOUT_<NAME>: src/backends/registry.c). KC_BACKENDS_ALL lists them
# all, for the tests (tests/CMakeLists.txt); KC_BACKEND_NAMES those built.
file(GLOB kc_backend_entries RELATIVE ${PROJECT_SOURCE_DIR}/src/backends ${PROJECT_SOURCE_DIR}/src/backends/*)
set(KC_BACKEND_NAMES)
set(KC_BACKENDS_ALL)
foreach(entry ${kc_backend_entries})
  if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/src/backends/${entry})
    set(be ${entry})
  elseif(entry MATCHES "^(.*)\\.c$" AND NOT entry MATCHES "^(registry|probe)\\.c$")
    set(be ${CMAKE_MATCH_1})
  else()
    continue()
  endif()
  list(APPEND KC_BACKENDS_ALL ${be})
  string(TOUPPER ${be} BE)
  # a backend is one file, src/backends/<be>.c, or a folder of them (its
  # subfolders are its executables', built by the top-level CMakeLists.txt)
  file(GLOB be_files ${PROJECT_SOURCE_DIR}/src/backends/${be}.c ${PROJECT_SOURCE_DIR}/src/backends/${be}/*.c)
  if(NOT be STREQUAL "host")
    option(KC_WITH_${BE} "Build the ${be} backend (its libraries are opened with dlopen at run time)" ON)
  endif()
  if((be STREQUAL "host" OR KC_WITH_${BE}) AND be_files)
    list(APPEND KC_SOURCES ${be_files})
    set(KC_HAVE_${BE} ON)
    list(APPEND KC_BACKEND_NAMES ${be})
  else()
    list(APPEND KC_DEFS KC_WITHOUT_${BE})
  endif()
endforeach()

# A test build whose Nth allocation, file operation of the disk cache or
# backend call can be made to fail (src/testing/; tests/reliability).
option(KC_FAULT_INJECTION "Build the fault-injection hooks (tests only, never for release)" OFF)
if(KC_FAULT_INJECTION)
  list(APPEND KC_SOURCES src/testing/fault.c)
  list(APPEND KC_DEFS KC_FAULT_INJECTION)
endif()

# The OpenCL compile helper, kcache-clc (src/backends/opencl/clc/, built by
# the top-level CMakeLists.txt): the backend runs it from
# ${CMAKE_INSTALL_LIBEXECDIR}/kcache, found next to the library where it
# was installed (KC_CLC_RELDIR, from the library's folder), else at the
# configured path (KC_CLC_PATH); $KC_OPENCL_HELPER overrides both. A
# Python wheel (scikit-build-core: SKBUILD) links the library into the
# extension module and carries the helper beside it, in the package's
# folder: there the library looks in its own folder (KC_CLC_RELDIR ".").
# (Not in a build tree, whose tests count the builds done in-process.)
if(KC_HAVE_OPENCL)
  if(SKBUILD)
    set(KC_CLC_RELDIR ".")
  else()
    file(RELATIVE_PATH KC_CLC_RELDIR "${CMAKE_INSTALL_FULL_LIBDIR}" "${CMAKE_INSTALL_FULL_LIBEXECDIR}/kcache")
  endif()
  list(APPEND KC_DEFS "KC_CLC_PATH=\"${CMAKE_INSTALL_FULL_LIBEXECDIR}/kcache/kcache-clc\""
       "KC_CLC_RELDIR=\"${KC_CLC_RELDIR}\"")
endif()
