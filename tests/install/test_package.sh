#!/usr/bin/env bash
# The .deb packages (cmake/packaging.cmake) as a user gets them, on this very
# machine: cpack builds them from the build tree, `dpkg -i` installs them
# into /usr, a program is built with `pkg-config --cflags --libs progcache`
# against the installed headers and library and run twice (MISS, then HIT:
# an NVRTC compile to PTX, no GPU needed), the installed tool and sample
# run, and `dpkg --purge` removes them, leaving none of their files. The
# packages are removed whatever happens (trap). Root only (SKIPPED
# otherwise), on a dpkg system (SKIPPED otherwise); SKIPPED too when one of
# the packages is installed already: it is not this test's to replace.
# The build tree's programs are not affected while the packages are in
# /usr: their RUNPATH names the build tree's library, searched first.
#   test_package.sh BUILD_DIR SOURCE_DIR C_COMPILER CPACK
set -euo pipefail
build=$1 src=$2 cc=$3 cpack=$4
pkgs=(progcache libprogcache-dev libprogcache0)
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "test_package: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || skip "not root: dpkg -i installs into the system"
command -v dpkg >/dev/null && command -v dpkg-deb >/dev/null || skip "no dpkg here"
command -v pkg-config >/dev/null || fail "pkg-config is missing (scripts/deps.sh installs it)"
for p in "${pkgs[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q " installed"; then
    skip "the package $p is installed already (not this test's to replace or remove)"
  fi
done
work=$(mktemp -d)
cleanup() {
  dpkg --purge "${pkgs[@]}" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
unset LD_LIBRARY_PATH PKG_CONFIG_PATH PROGCACHE_DIR PROGCACHE_REMOTE PROGCACHE_DISABLE \
  PROGCACHE_READONLY PROGCACHE_RECACHE

"$cpack" --config "$build/CPackConfig.cmake" -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1 \
  || { cat "$work/cpack.log"; fail "cpack -G DEB"; }
debs=("$work"/pkg/*.deb)
[ "${#debs[@]}" = 3 ] || fail "cpack made ${#debs[@]} .deb files, not 3: ${debs[*]}"
dpkg -i "${debs[@]}" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
dpkg-query -L "${pkgs[@]}" | sort -u >"$work/files"
for d in "${debs[@]}"; do dpkg-deb -c "$d"; done | awk '{print substr($6, 2)}' | sort -u >"$work/held"
# Paths this system's dpkg leaves out (path-exclude in dpkg.cfg.d: a
# minimal image drops /usr/share/man/* and /usr/share/doc/*): held by the
# packages, but not installed here, whatever the packages do.
excluded() {
  local pat
  while read -r pat; do
    # shellcheck disable=SC2053 # the pattern is dpkg's glob
    [[ $1 == $pat ]] && return 0
  done < <(sed -n 's/^path-exclude[= ]*//p' /etc/dpkg/dpkg.cfg.d/* 2>/dev/null)
  return 1
}

# What each package holds, where the README says.
for f in /usr/bin/progcache /usr/libexec/progcache/progcache-nvrtc-helper \
         /usr/libexec/progcache/persistentProgramCache /usr/include/progcache/progcache.h \
         /usr/share/man/man1/progcache.1 /usr/share/bash-completion/completions/progcache \
         /usr/share/zsh/site-functions/_progcache \
         /usr/share/fish/vendor_completions.d/progcache.fish \
         /usr/share/progcache/contrib/node_exporter/progcache-textfile.sh \
         /usr/share/doc/progcache/samples/persistentProgramCache/main.c \
         /usr/libexec/progcache/libprogcache-intercept.so \
         /usr/libexec/progcache/libprogcache-intercept-core.so; do
  grep -qx "$f" "$work/held" || fail "$f is not in the packages"
  excluded "$f" && { echo "test_package: $f left out by this system's dpkg (path-exclude)"; continue; }
  grep -qx "$f" "$work/files" && [ -e "$f" ] || fail "$f is not installed by the packages"
done
dpkg-query -L libprogcache0 | grep -q '/libprogcache\.so\.0$' || fail "libprogcache0 lacks the library"
dpkg-query -L libprogcache0 | grep -q 'progcache-nvrtc-helper$' || fail "libprogcache0 lacks the helper"
dpkg-query -L libprogcache-dev | grep -q '/pkgconfig/progcache\.pc$' || fail "the -dev lacks progcache.pc"

# A program against the installed package, found by pkg-config alone.
flags=$(pkg-config --cflags --libs progcache) || fail "pkg-config does not find progcache"
"$cc" -o "$work/program" "$src/tests/install/package_program.c" $flags \
  || fail "build with pkg-config --cflags --libs progcache ($flags)"
used=$(ldd "$work/program" | awk '/libprogcache/ {print $3}')
lib=$(grep '/libprogcache\.so\.0$' "$work/files")
[ -n "$used" ] && [ "$(realpath "$used")" = "$(realpath "$lib")" ] \
  || fail "the program uses '$used', not the package's $lib"
first=$("$work/program" "$work/cache") || fail "the program's first run"
second=$("$work/program" "$work/cache") || fail "the program's second run"
[ "$first" = MISS ] && [ "$second" = HIT ] || fail "runs said '$first' then '$second', not MISS then HIT"
# The installed tool sees the entry; the sample answers.
/usr/bin/progcache stats -d "$work/cache" --json | grep -q '"hits": 1' || fail "progcache stats"
/usr/libexec/progcache/persistentProgramCache --help >/dev/null || fail "the sample does not run"
[ "$(/usr/bin/progcache exec --where)" = /usr/libexec/progcache/libprogcache-intercept.so ] \
  || fail "progcache exec --where does not name the installed interceptor"
man -l /usr/share/man/man1/progcache.1 >/dev/null 2>&1 || ! command -v man >/dev/null \
  || excluded /usr/share/man/man1/progcache.1 || fail "man -l progcache.1"

# Removal leaves nothing of theirs (directories other packages share stay).
dpkg --purge "${pkgs[@]}" >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "dpkg --purge"; }
while read -r f; do
  [ -d "$f" ] && continue
  [ ! -e "$f" ] && [ ! -L "$f" ] || fail "$f is left after dpkg --purge"
done <"$work/files"
for d in /usr/include/progcache /usr/libexec/progcache /usr/share/progcache /usr/lib/cmake/progcache \
         /usr/share/doc/progcache; do
  [ ! -e "$d" ] || fail "$d is left after dpkg --purge"
done
echo "test_package: ok (MISS then HIT against the installed .deb; removed cleanly)"
