#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_install.sh shared|static|subproject BUILD SOURCE CMAKE CC [CFLAGS] -- installs
# kcache into temporary prefixes and uses the installed copy as a user would.
#
#   shared  `cmake --install BUILD` (the build tree being tested) into a
#           prefix, and again with DESTDIR; checks the layout (soname links,
#           header, pkg-config file, CMake package, CLI, man page) and the
#           installed library's exports; builds README's example program
#           with pkg-config and with find_package(kcache) in a separate CMake
#           project and runs both; checks the installed CLI has no RUNPATH
#           into the build folder, then moves the prefix away and runs it.
#           Every installed file is in doc/install.md's table, and what it
#           says about a custom prefix holds: a program linked without an
#           rpath does not find libkcache.so.0, and runs with LD_LIBRARY_PATH.
#   static  configures SOURCE again with BUILD_SHARED_LIBS=OFF (library and
#           CLI only), installs it, and builds and runs the same program
#           against libkcache.a with `pkg-config --static` and with
#           find_package(kcache); every installed file is in doc/install.md;
#           and (not under a sanitizer, where libc.a exists) the same program
#           linked fully static (-static): it runs on the host backend (the
#           default picks it; KC_CACHE_KEY's libcrypto refused with a
#           warning), and OpenCL and CUDA are refused with KC_EUNAVAILABLE
#           and a reason that names the static link, never a crash in a
#           dlopen'ed driver.
#   subproject  a project that builds kcache with add_subdirectory: no
#           tests, benchmarks or demo of kcache's; the same program linked
#           with kcache::kcache runs.
#
# CFLAGS go to every compile of a program (the sanitizer flags of a
# sanitizer build). Exits 77 (skipped) only when pkg-config or cmake is
# missing.
set -euo pipefail # so no pipe here ends in "grep -q" or "head" (SIGPIPE fails it)
mode=$1 build=$2 src=$3 cmake=$4 cc=$5 cflags=${6:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v pkg-config >/dev/null || { echo "SKIPPED: pkg-config not found"; exit 77; }
[[ -x $cmake ]] || command -v "$cmake" >/dev/null || { echo "SKIPPED: cmake not found"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kc_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "--- $*"; }
log=$tmp/log
run_logged() {
  local rc=0
  "$@" >"$log" 2>&1 || rc=$?
  ((rc == 0)) || { cat "$log"; fail "$* exited $rc"; }
}

"$here/extract_example.sh" "$src/README.md" >"$tmp/app.c"

# Runs a built program on the default backend with its own disk cache.
run_app() {
  local out
  out=$(KC_CACHE_DIR=$tmp/cache "$1") || { echo "$out"; fail "$1 exited non-zero"; }
  echo "    $out"
  grep -q 'as expected$' <<<"$out" || fail "$1 did not say 'as expected'"
}

# The needed libraries of an ELF file: "libkcache.so.0 libc.so.6 ..."
needed() { readelf -d "$1" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p' | tr '\n' ' '; }
runpath() { readelf -d "$1" | sed -nE 's/.*\((RUNPATH|RPATH)\).*\[(.*)\]/\2/p'; }

# Builds app.c with pkg-config from prefix $1 (extra pkg-config flags: $2).
build_pkg_config() {
  local prefix=$1 pcflags=$2 out=$3 pcdir
  pcdir=$(dirname "$(find "$prefix" -name kcache.pc -print -quit)")
  [[ -f $pcdir/kcache.pc ]] || fail "no kcache.pc under $prefix"
  local version
  version=$(PKG_CONFIG_PATH=$pcdir pkg-config --modversion kcache)
  [[ $version == "$want_version" ]] || fail "pkg-config --modversion kcache is '$version', not $want_version"
  local flags
  # shellcheck disable=SC2086
  flags=$(PKG_CONFIG_PATH=$pcdir pkg-config $pcflags --cflags --libs kcache)
  echo "    cc app.c $flags"
  # shellcheck disable=SC2086 # lists of flags
  "$cc" $cflags "$tmp/app.c" $flags -Wl,-rpath,"$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir kcache)" \
    -o "$out" || fail "the pkg-config build failed"
}

# Builds app.c with find_package(kcache) in a separate project.
build_cmake_consumer() {
  local prefix=$1 dir=$2
  run_logged "$cmake" -S "$here/consumer" -B "$dir" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
    "-DCMAKE_C_FLAGS=$cflags" -DKC_APP_SOURCE="$tmp/app.c"
  run_logged "$cmake" --build "$dir"
  [[ -x $dir/app ]] || fail "the CMake consumer built no app"
}

# Every file under prefix $1 is in doc/install.md: its path in backticks,
# with lib for the library folder ($2) and <config> for the build type of
# the CMake package's per-configuration file.
check_doc_lists() {
  local prefix=$1 libdir=$2 missing=() f rel
  while IFS= read -r f; do
    rel=${f#"$prefix"/}
    rel=${rel/#"${libdir#"$prefix"/}"/lib}
    rel=$(sed -E 's/kcacheTargets-[a-z]+\.cmake$/kcacheTargets-<config>.cmake/' <<<"$rel")
    grep -qF "\`$rel\`" "$src/doc/install.md" || missing+=("$rel")
  done < <(find "$prefix" \( -type f -o -type l \) -print | sort)
  ((${#missing[@]} == 0)) || fail "installed but not listed in doc/install.md: ${missing[*]}"
  echo "    doc/install.md lists every installed file ($(find "$prefix" \( -type f -o -type l \) | wc -l) files)"
}

want_version=$(sed -nE 's/^project\(kcache VERSION ([0-9.]+).*/\1/p' "$src/CMakeLists.txt")
[[ -n $want_version ]] || fail "no project(kcache VERSION ...) in $src/CMakeLists.txt"

if [[ $mode == shared ]]; then
  prefix=$tmp/prefix
  step "cmake --install $build --prefix $prefix"
  run_logged "$cmake" --install "$build" --prefix "$prefix"
  so=$(find "$prefix" -name "libkcache.so.$want_version" -print -quit)
  [[ -n $so ]] || { find "$prefix"; fail "no libkcache.so.$want_version installed (a static build? test 'install_static' covers it)"; }
  libdir=$(dirname "$so") major=${want_version%%.*}
  [[ -f $so && ! -L $so ]] || fail "$so is not a file"
  [[ $(readlink "$libdir/libkcache.so.$major") == "libkcache.so.$want_version" ]] ||
    fail "libkcache.so.$major does not point at libkcache.so.$want_version"
  [[ $(readlink "$libdir/libkcache.so") == "libkcache.so.$major" ]] || fail "libkcache.so does not point at libkcache.so.$major"
  readelf -d "$so" | grep "(SONAME).*\[libkcache.so.$major\]" >/dev/null || fail "SONAME of $so is not libkcache.so.$major"
  [[ -z $(runpath "$so") ]] || fail "the installed library has a RUNPATH: $(runpath "$so")"
  cmp -s "$prefix/include/kcache.h" "$src/include/kcache.h" || fail "include/kcache.h not installed as is"
  for f in "$libdir/pkgconfig/kcache.pc" "$libdir/cmake/kcache/kcacheConfig.cmake" \
    "$libdir/cmake/kcache/kcacheConfigVersion.cmake" "$libdir/cmake/kcache/kcacheTargets.cmake" \
    "$prefix/share/man/man1/kcache.1" "$prefix/bin/kcache"; do
    [[ -f $f ]] || fail "not installed: ${f#"$prefix"/}"
  done
  echo "    layout ok: ${libdir#"$prefix"/}/libkcache.so -> .so.$major -> .so.$want_version, include/kcache.h, bin/kcache, pkgconfig, cmake/kcache, man1"
  check_doc_lists "$prefix" "$libdir"

  step "DESTDIR=$tmp/destdir cmake --install $build --prefix /opt/kcache"
  DESTDIR=$tmp/destdir run_logged "$cmake" --install "$build" --prefix /opt/kcache
  for f in include/kcache.h bin/kcache "${libdir#"$prefix"/}/libkcache.so.$want_version" \
    "${libdir#"$prefix"/}/pkgconfig/kcache.pc"; do
    [[ -e $tmp/destdir/opt/kcache/$f ]] || fail "DESTDIR install lacks $f"
  done
  grep -q '^prefix=/opt/kcache$' "$tmp/destdir/opt/kcache/${libdir#"$prefix"/}/pkgconfig/kcache.pc" ||
    fail "the DESTDIR copy of kcache.pc does not say prefix=/opt/kcache"

  step "the installed library's exports"
  "$here/check_exports.sh" "$so" "$prefix/include/kcache.h" "$cc"

  step "pkg-config"
  build_pkg_config "$prefix" "" "$tmp/app_pc"
  [[ $(needed "$tmp/app_pc") == *libkcache.so.$major* ]] || fail "app_pc does not need libkcache.so.$major"
  ldd "$tmp/app_pc" | grep "libkcache.so.$major => $libdir/" >/dev/null || { ldd "$tmp/app_pc"; fail "app_pc does not load the installed library"; }
  run_app "$tmp/app_pc"

  step "a custom prefix without an rpath: LD_LIBRARY_PATH (doc/install.md)"
  # shellcheck disable=SC2046,SC2086
  "$cc" $cflags "$tmp/app.c" $(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs kcache) -o "$tmp/app_norpath" ||
    fail "the build without an rpath failed"
  if out=$(KC_CACHE_DIR=$tmp/cache env -u LD_LIBRARY_PATH "$tmp/app_norpath" 2>&1); then
    fail "a program linked against $libdir without an rpath found libkcache.so.$major anyway: $out"
  fi
  grep -q "libkcache.so.$major: cannot open shared object file" <<<"$out" || fail "unexpected failure: $out"
  LD_LIBRARY_PATH=$libdir run_app "$tmp/app_norpath"
  echo "    without an rpath: 'cannot open shared object file'; with LD_LIBRARY_PATH=$libdir it runs"

  step "find_package(kcache) in a separate CMake project"
  build_cmake_consumer "$prefix" "$tmp/consumer"
  ldd "$tmp/consumer/app" | grep "libkcache.so.$major => $libdir/" >/dev/null || { ldd "$tmp/consumer/app"; fail "the consumer does not load the installed library"; }
  run_app "$tmp/consumer/app"
  if "$cmake" -S "$here/consumer" -B "$tmp/consumer-v1" -DCMAKE_PREFIX_PATH="$prefix" -DKC_WANT_VERSION=$((major + 1)).0 \
    -DKC_APP_SOURCE="$tmp/app.c" >"$log" 2>&1; then
    fail "find_package(kcache $((major + 1)).0) accepted version $want_version"
  fi
  echo "    find_package(kcache $((major + 1)).0) refuses $want_version (SameMajorVersion)"

  step "the installed kcache command"
  rp=$(runpath "$prefix/bin/kcache")
  [[ $rp == "\$ORIGIN/../${libdir#"$prefix"/}" ]] || fail "bin/kcache RUNPATH is '$rp', not \$ORIGIN/../${libdir#"$prefix"/}"
  build_real=$(cd "$build" && pwd -P)
  readelf -d "$prefix/bin/kcache" | grep -F "$build_real" && fail "bin/kcache names the build folder"
  mv "$prefix" "$tmp/moved"
  "$tmp/moved/bin/kcache" help >"$log" 2>&1 || { cat "$log"; fail "the moved kcache help exited non-zero"; }
  grep -q '^usage: kcache' "$log" || { cat "$log"; fail "kcache help printed no usage"; }
  "$tmp/moved/bin/kcache" --dir "$tmp/cache" ls >"$log" 2>&1 || { cat "$log"; fail "kcache ls exited non-zero"; }
  grep -qE '^[0-9a-f]{12} +[a-z]+ +k +T=float ' "$log" || { cat "$log"; fail "kcache ls does not show the programs' kernel k"; }
  echo "    after moving the prefix: kcache help and kcache --dir ... ls work"
  # the OpenCL compile helper, found next to the moved library (no KC_OPENCL_HELPER)
  clc=$(find "$tmp/moved" -path '*/kcache/kcache-clc' -print -quit)
  [[ -x $clc ]] || fail "kcache-clc is not installed under libexec/kcache"
  printf 'KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] = 3.0f; }\n' >"$tmp/k.cl"
  if env -u KC_OPENCL_HELPER KC_CACHE_DISABLE=1 KC_OPENCL_HELPERS=1 KC_LOG=info "$tmp/moved/bin/kcache" watch --backend opencl --count 1 \
    "$tmp/k.cl" >"$log" 2>&1; then
    grep -q 'k  *recompiled *y\[0..3\] = 3 3 3 3' "$log" || { cat "$log"; fail "kcache watch did not run k"; }
    ! grep -q 'compile helper' "$log" || { cat "$log"; fail "the moved install did not find its compile helper"; }
    echo "    after moving the prefix: OpenCL builds in ${clc#"$tmp/moved"/} (found next to the library)"
  elif grep -q 'backend opencl is not available' "$log"; then
    echo "    OpenCL not available here: the moved compile helper is not run"
  else
    cat "$log"
    fail "kcache watch on OpenCL exited non-zero"
  fi
elif [[ $mode == static ]]; then
  san=
  case $cflags in *-fsanitize=address*) san=address ;; *-fsanitize=thread*) san=thread ;; esac
  step "a static build (BUILD_SHARED_LIBS=OFF) of $src"
  run_logged "$cmake" -S "$src" -B "$tmp/build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DKC_BUILD_TESTS=OFF -DKC_BUILD_BENCH=OFF -DKC_BUILD_DEMO=OFF -DKC_SANITIZE="$san"
  run_logged "$cmake" --build "$tmp/build" -j2
  prefix=$tmp/prefix
  run_logged "$cmake" --install "$tmp/build" --prefix "$prefix"
  a=$(find "$prefix" -name libkcache.a -print -quit)
  [[ -n $a ]] || fail "no libkcache.a installed"
  [[ -z $(find "$prefix" -name 'libkcache.so*') ]] || fail "a static build installed a libkcache.so"
  [[ -x $prefix/bin/kcache && -f $prefix/include/kcache.h ]] || fail "the static install lacks bin/kcache or the header"
  check_doc_lists "$prefix" "$(dirname "$a")"

  step "pkg-config --static"
  build_pkg_config "$prefix" --static "$tmp/app_pc"
  [[ $(needed "$tmp/app_pc") != *libkcache* ]] || fail "app_pc needs a libkcache.so"
  run_app "$tmp/app_pc"

  step "find_package(kcache), static"
  build_cmake_consumer "$prefix" "$tmp/consumer"
  [[ $(needed "$tmp/consumer/app") != *libkcache* ]] || fail "the consumer needs a libkcache.so"
  run_app "$tmp/consumer/app"
  "$prefix/bin/kcache" help >"$log" 2>&1 || { cat "$log"; fail "the static kcache help exited non-zero"; }

  step "a fully static program (-static)"
  if [[ -n $san ]]; then
    echo "    not under a sanitizer (its runtime cannot be linked -static)"
  elif ! echo 'int main(void) { return 0; }' | "$cc" -static -x c - -o "$tmp/static_probe" >"$log" 2>&1; then
    echo "    no static C library here (libc.a): not tested"
  else
    # shellcheck disable=SC2046 # lists of flags
    "$cc" -static "$tmp/app.c" $(PKG_CONFIG_PATH=$(dirname "$a")/pkgconfig pkg-config --static --cflags --libs kcache) \
      -o "$tmp/app_static" >"$log" 2>&1 || { cat "$log"; fail "the -static build failed"; }
    readelf -l "$tmp/app_static" >"$log" 2>&1
    ! grep -q INTERP "$log" || fail "app_static has a program interpreter: not static"
    run_app "$tmp/app_static" # the default backend: CUDA and OpenCL refused, the host's runs
    # libcrypto is not opened there (it crashed): KC_CACHE_KEY's disk cache is off, with a warning
    KC_CACHE_KEY=static-secret run_app "$tmp/app_static" 2>"$log"
    grep -q 'not using the disk cache.*libcrypto not opened: this program is statically linked' "$log" ||
      { cat "$log"; fail "the static program with KC_CACHE_KEY does not say why it has no disk cache"; }
    for be in opencl cuda; do
      rc=0
      out=$(KC_BACKEND=$be KC_CACHE_DIR=$tmp/cache "$tmp/app_static" 2>&1) || rc=$?
      ((rc == 1)) || { echo "$out"; fail "the static program on $be exited $rc, not 1 (139 is the crash this prevents)"; }
      { grep -q "KC_EUNAVAILABLE" <<<"$out" && grep -q "this program is statically linked" <<<"$out"; } ||
        { echo "$out"; fail "the static program on $be does not say why"; }
    done
    echo "    host backend: as expected; opencl and cuda: KC_EUNAVAILABLE, 'this program is statically linked'"
  fi
elif [[ $mode == subproject ]]; then
  step "kcache as a subproject (add_subdirectory) of another project"
  san=
  case $cflags in *-fsanitize=address*) san=address ;; *-fsanitize=thread*) san=thread ;; esac
  run_logged "$cmake" -S "$here/subproject" -B "$tmp/parent" -DCMAKE_C_COMPILER="$cc" -DKC_SOURCE="$src" \
    -DKC_APP_SOURCE="$tmp/app.c" -DKC_SANITIZE="$san" "-DCMAKE_C_FLAGS=$cflags"
  run_logged "$cmake" --build "$tmp/parent" -j2
  [[ -x $tmp/parent/kcache/cli/kcache ]] || fail "the subproject built no kcache command"
  run_app "$tmp/parent/app"
else
  fail "mode must be shared, static or subproject"
fi
echo "ok: install ($mode)"
