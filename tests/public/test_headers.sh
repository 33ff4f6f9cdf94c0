#!/usr/bin/env bash
# The public headers as a caller compiles them: each header alone and all
# together, as C11 and as C++11, 14, 17 and 20, with -Wall -Wextra -pedantic
# -Werror; and a file that uses every _INIT macro (the warning
# -Wmissing-field-initializers fires in the caller's code, not in ours); and
# the C++17 wrapper progcache.hpp (test_cxx_wrapper runs a program using it).
#   test_headers.sh INCLUDE_DIR CUDA_INCLUDE_DIR C_COMPILER [CXX_COMPILER]
set -euo pipefail
inc=$1 cuda_inc=$2 cc=$3 cxx=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-Wall -Wextra -pedantic -Werror -I"$inc" -I"$cuda_inc" -fsyntax-only)
failed=0
try() { # label compiler std file
  if ! "$2" -std="$3" "${flags[@]}" "$4" >"$work/out" 2>&1; then
    echo "FAIL: $1 ($3)"
    sed 's/^/    /' "$work/out" | head -20
    failed=1
  fi
}
headers=$(cd "$inc" && find progcache -name '*.h' | sort)
inits=$(grep -rhoE '#define PROGCACHE_[A-Z][A-Z_]*_INIT\b' "$inc/progcache" | awk '{print $2}' | sort -u)
# One variable per _INIT macro, of the type the macro's name says
# (PROGCACHE_X_INIT initialises progcache_x).
{
  for h in $headers; do echo "#include <$h>"; done
  echo "void progcache_test_inits(void);"
  echo "void progcache_test_inits(void) {"
  for m in $inits; do
    t=$(echo "${m%_INIT}" | tr 'A-Z' 'a-z')
    echo "    $t v_$t = $m; (void)v_$t;"
  done
  echo "}"
} >"$work/all.c"
for h in $headers; do
  printf '#include <%s>\n#include <%s>\n' "$h" "$h" >"$work/one.c" # twice: include guards
  try "$h alone" "$cc" c11 "$work/one.c"
  if [ -n "$cxx" ]; then
    cp "$work/one.c" "$work/one.cpp"
    for std in c++11 c++14 c++17 c++20; do try "$h alone" "$cxx" $std "$work/one.cpp"; done
  fi
done
try "all headers, every _INIT" "$cc" c11 "$work/all.c"
try "all headers, every _INIT" "$cc" c17 "$work/all.c"
if [ -n "$cxx" ]; then
  cp "$work/all.c" "$work/all.cpp"
  for std in c++11 c++14 c++17 c++20; do try "all headers, every _INIT" "$cxx" $std "$work/all.cpp"; done
  # The C++17 wrapper (include/progcache.hpp), alone and twice, as C++17
  # and C++20; below C++17 it says what it needs instead of failing deep.
  printf '#include <progcache.hpp>\n#include <progcache.hpp>\n' >"$work/wrap.cpp"
  for std in c++17 c++20; do try "progcache.hpp" "$cxx" $std "$work/wrap.cpp"; done
  if "$cxx" -std=c++14 "${flags[@]}" "$work/wrap.cpp" >"$work/out" 2>&1 \
     || ! grep -q "needs C++17" "$work/out"; then
    echo "FAIL: progcache.hpp under C++14 does not say it needs C++17"
    failed=1
  fi
else
  echo "note: no C++ compiler; the C++ half was not run"
fi
[ $failed = 0 ] && echo "test_headers: ok ($(echo $headers | wc -w) headers, $(echo $inits | wc -w) _INIT macros)"
exit $failed
