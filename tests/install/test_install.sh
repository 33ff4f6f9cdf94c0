#!/usr/bin/env bash
# A clean install, as a packager or a user does it: `cmake --install` into a
# fresh prefix, then, from outside the source tree,
#   - a program built against it with pkg-config (shared, and static with
#     --static, whose flags must list libcrypto, hiredis, NVRTC),
#   - the same program built with CMake's find_package(progcache) (shared
#     and static targets), and all four run;
#   - the installed progcache tool run with no LD_LIBRARY_PATH (it finds
#     libprogcache.so.0 through its RUNPATH), its man page and the bash,
#     zsh and fish completion in place;
#   - one version everywhere: CMake's project(), common.h, --version, the
#     .pc file, the CMake package, the man page and the newest version in
#     CHANGELOG.md.
#   test_install.sh BUILD_DIR SOURCE_DIR C_COMPILER CUDA_TOOLKIT_ROOT WITH_REDIS VERSION
set -euo pipefail
build=$1 src=$2 cc=$3 cuda=$4 redis=$5 version=$6
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "test_install: FAIL: $*" >&2; exit 1; }
command -v pkg-config >/dev/null || fail "pkg-config is missing (scripts/deps.sh installs it)"
unset LD_LIBRARY_PATH PROGCACHE_DIR PROGCACHE_MAX_SIZE

cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
libdir=$(ls -d "$prefix"/lib*/pkgconfig | head -1 | xargs dirname)
for f in bin/progcache include/progcache/progcache.h include/progcache/settings.h \
         include/progcache/sys/store.h share/man/man1/progcache.1 \
         share/bash-completion/completions/progcache share/zsh/site-functions/_progcache \
         share/fish/vendor_completions.d/progcache.fish include/progcache.hpp; do
  [ -e "$prefix/$f" ] || fail "$f is not installed"
done
[ -e "$libdir/libprogcache.so.0" ] && [ -e "$libdir/libprogcache.a" ] || fail "the libraries"
[ -e "$libdir/cmake/progcache/progcacheConfig.cmake" ] || fail "the CMake package"

# The installed tool, as a user runs it: no LD_LIBRARY_PATH.
readelf -d "$prefix/bin/progcache" | grep -q 'RUNPATH.*\$ORIGIN' || fail "the tool has no \$ORIGIN RUNPATH"
"$prefix/bin/progcache" --version | grep -q '^progcache ' || fail "the installed tool does not run"
used=$(ldd "$prefix/bin/progcache" | awk '/libprogcache/ {print $3}')
[ -n "$used" ] && [ "$(realpath "$used")" = "$(realpath "$libdir/libprogcache.so.0")" ] \
  || fail "the tool does not use the installed library (it uses '$used')"
cache=$work/cache
printf 'bytes\n' >"$work/v"
"$prefix/bin/progcache" put -d "$cache" abcd "$work/v" || fail "installed tool: put"
[ "$("$prefix/bin/progcache" get -d "$cache" abcd)" = bytes ] || fail "installed tool: get"
"$prefix/bin/progcache" config -d "$cache" max_size 1G >/dev/null || fail "installed tool: config"
"$prefix/bin/progcache" stats -d "$cache" | grep -q 'size cap.*1.0 GiB' || fail "installed tool: stats"
bash -n "$prefix/share/bash-completion/completions/progcache" || fail "the completion script"
if command -v zsh >/dev/null; then
  zsh -n "$prefix/share/zsh/site-functions/_progcache" || fail "the zsh completion"
fi
if command -v fish >/dev/null; then
  fish -n "$prefix/share/fish/vendor_completions.d/progcache.fish" || fail "the fish completion"
fi
if command -v man >/dev/null; then
  man -l "$prefix/share/man/man1/progcache.1" >/dev/null 2>&1 || fail "man -l progcache.1"
fi

# pkg-config: the .pc file finds its prefix from its own place.
export PKG_CONFIG_PATH=$libdir/pkgconfig
static=$(pkg-config --static --libs progcache)
for want in -lcrypto -lpthread; do
  [[ " $static " == *" $want "* ]] || fail "pkg-config --static --libs lacks $want: $static"
done
# NVRTC is dlopen'ed on first need, never linked: not in the .pc, not a
# NEEDED entry of the shared library.
[[ " $static " != *"nvrtc"* ]] || fail "pkg-config --static --libs names NVRTC: $static"
! readelf -d "$libdir/libprogcache.so" | grep -q 'NEEDED.*libnvrtc' \
  || fail "libprogcache.so needs libnvrtc at load time"
if [ "$redis" = ON ]; then
  [[ " $static " == *" -lhiredis "* ]] || fail "pkg-config --static --libs lacks -lhiredis: $static"
fi
cd "$work"
"$cc" -o consumer_pc "$src/tests/install/consumer/consumer.c" $(pkg-config --cflags --libs progcache) \
  -Wl,-rpath,"$libdir" || fail "build with pkg-config"
./consumer_pc "$work/c1" || fail "run the pkg-config build"
# Static: the archive, then what --static says it needs.
"$cc" -o consumer_pc_static "$src/tests/install/consumer/consumer.c" $(pkg-config --cflags progcache) \
  "$libdir/libprogcache.a" $(pkg-config --static --libs progcache | sed 's/ -lprogcache / /') \
  || fail "static build with pkg-config --static"
! ldd consumer_pc_static | grep -q libprogcache || fail "the static build still wants libprogcache.so"
./consumer_pc_static "$work/c2" || fail "run the static pkg-config build"

# CMake: find_package(progcache) with its dependencies found for us.
cmake -S "$src/tests/install/consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCUDAToolkit_ROOT="$cuda" >"$work/cmake.log" 2>&1 \
  || { cat "$work/cmake.log"; fail "configure a find_package(progcache) project"; }
cmake --build "$work/cmake" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build it"; }
"$work/cmake/consumer" "$work/c3" || fail "run the find_package build"
"$work/cmake/consumer_static" "$work/c4" || fail "run the find_package static build"
# One version: the project's (CMakeLists.txt, passed in) everywhere.
[ "$("$prefix/bin/progcache" --version)" = "progcache $version" ] \
  || fail "progcache --version says '$("$prefix/bin/progcache" --version)', the project $version"
[ "$(pkg-config --modversion progcache)" = "$version" ] \
  || fail "progcache.pc says $(pkg-config --modversion progcache), the project $version"
grep -q "^set(PACKAGE_VERSION \"$version\")" \
  "$libdir/cmake/progcache/progcacheConfigVersion.cmake" \
  || fail "the CMake package's version is not $version"
grep -q "^#define PROGCACHE_VERSION_STRING \"$version\"" "$prefix/include/progcache/common.h" \
  || fail "common.h's PROGCACHE_VERSION_STRING is not $version"
grep -q "^\.TH PROGCACHE 1 .* \"progcache $version\"" "$prefix/share/man/man1/progcache.1" \
  || fail "the man page's header does not say progcache $version"
newest=$(grep -m1 -E '^## [0-9]' "$src/CHANGELOG.md" | cut -c4-)
[ "$newest" = "$version" ] || fail "CHANGELOG.md's newest version is '$newest', the project $version"
[ -e "$prefix/share/doc/progcache/LICENSE" ] || fail "the LICENSE is not installed"
echo "test_install: ok"
