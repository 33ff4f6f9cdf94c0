#!/usr/bin/env bash
# valgrind memcheck over the progcache tool and the sample: every
# subcommand on a real cache directory, with any leak or memory error
# failing the run.
#   scripts/valgrind-tools.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
bin="$BUILD_DIR/bin/progcache"
sample="$BUILD_DIR/bin/persistentProgramCache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Definite and indirect leaks and every memory error fail the run. ("Still
# reachable" blocks are NVRTC's and OpenSSL's process-lifetime tables.)
# valgrind 3.19 does not know openat2, so this also runs the O_NOFOLLOW
# fallback of src/util/fs.c.
vg=(valgrind --quiet --error-exitcode=99 --leak-check=full
    --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect)
run() { # expected-exit command...
  local want=$1; shift
  set +e
  "${vg[@]}" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  set -e
  if [ "$rc" != "$want" ]; then
    echo "valgrind: '$*' exited $rc, expected $want" >&2
    cat "$work/err" >&2
    exit 1
  fi
  echo "ok ($rc): $*"
}

dir="$work/cache"
src="$work/k.cu"
printf 'extern "C" __global__ void k(float *a){ a[threadIdx.x] *= 2.0f; }\n' >"$src"
printf 'artifact bytes\n' >"$work/blob"
key=$("$bin" key "$src" -- -arch=sm_90)

run 0 "$bin" --version
run 0 "$bin" key "$src" -- -arch=sm_90
mkdir "$work/inc"
printf '#pragma once\n' >"$work/inc/h.cuh"
printf '#include "h.cuh"\n__global__ void k(){}\n' >"$work/inc.cu"
printf '#define H "h.cuh"\n#include H\n__global__ void k(){}\n' >"$work/computed.cu"
run 0 "$bin" key "$work/inc.cu" -- --include-path="$work/inc"
run 2 "$bin" key "$work/computed.cu" -- --include-path="$work/inc"
run 0 "$bin" key "$work/inc.cu" --header h.cuh="$work/inc/h.cuh" -- -arch=sm_90
run 3 "$bin" key "$work/inc.cu" --header h.cuh="$work/inc/h.cuh" --max-artifact-size 4
run 0 "$bin" put "$key" "$work/blob" --dir "$dir"
run 0 "$bin" get "$key" --dir "$dir" -o "$work/back"
cmp "$work/blob" "$work/back"
run 1 "$bin" get 0000000000000000000000000000000000000000000000000000000000000000 --dir "$dir"
run 0 "$bin" ls --dir "$dir"
run 0 "$bin" ls --dir "$dir" --json
run 0 "$bin" stats --dir "$dir"
run 0 "$bin" stats --dir "$dir" --json
# The blob is of no known kind: reported, kept (exit 0), removed only by
# --fix-unknown.
run 0 "$bin" verify --dir "$dir"
run 0 "$bin" verify --dir "$dir" --fix
run 0 "$bin" verify --dir "$dir" --fix-unknown
run 0 "$bin" export --dir "$dir" "$work/a.tar"
run 0 "$bin" import --dir "$work/other" "$work/a.tar"
run 0 "$bin" export --dir "$dir" -
cp "$work/out" "$work/b.tar"
run 0 "$bin" import --dir "$work/other2" - <"$work/b.tar"
run 3 "$bin" put "$key" /dev/zero --dir "$dir" --max-artifact-size 1M
ln -s /dev/full "$work/full" # never the device itself: a broken build could replace it
run 3 "$bin" export --dir "$dir" "$work/full"
# Issue 24: invalid entries folded into one warning, a bare prune (to the
# directory's cap), stats -v, help help, a command's option table.
run 0 "$bin" put 00ff "$work/blob" --dir "$dir"
run 0 "$bin" export --dir "$dir" "$work/c.tar"
run 0 "$bin" prune --dir "$dir"
run 0 "$bin" stats --dir "$dir" -v
run 0 "$bin" help help
run 0 "$bin" prune --list-options
run 0 "$bin" prune --dir "$dir" --max-size 1K --older-than 1h
run 0 "$bin" clear --dir "$dir"
printf '%s\n' "$src" >"$work/manifest"
run 0 "$bin" warm --arch sm_90 --dir "$dir" "$work/manifest"
run 2 "$bin" prune --dir "$dir" --max-size lots
run 2 "$bin" nosuchcommand
# The remote tier: not configured, unreachable (a tool then goes on with
# the local tiers, warning once), and a live server when one is installed.
run 1 "$bin" remote
PROGCACHE_REMOTE=redis://:pw@127.0.0.1:1 run 1 "$bin" remote --json
PROGCACHE_REMOTE=redis://:pw@127.0.0.1:1 run 0 "$bin" put "$key" "$work/blob" --dir "$dir"
if command -v redis-server >/dev/null; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
    --daemonize yes --pidfile "$work/redis.pid" --logfile "$work/redis.log"
  for _ in $(seq 100); do [ -s "$work/redis.pid" ] && break; sleep 0.05; done
  PROGCACHE_REMOTE=redis://127.0.0.1:$port run 0 "$bin" put "$key" "$work/blob" --dir "$work/r"
  PROGCACHE_REMOTE=redis://127.0.0.1:$port run 0 "$bin" remote --pings 2
  PROGCACHE_REMOTE=redis://127.0.0.1:$port run 0 "$bin" remote --json --lease "$key"
  kill "$(cat "$work/redis.pid")"
fi
run 2 "$bin" stat
run 0 "$bin" help ls
run 0 "$bin" -d "$dir" -q stats --charts
run 0 "$bin" config -d "$dir"
run 0 "$bin" config -d "$dir" --json
run 0 "$bin" config -d "$dir" max_size 10G
run 0 "$bin" config -d "$dir" max_size
run 2 "$bin" config -d "$dir" max_size 10X
run 2 "$bin" config -d "$dir" max_szie 1G
run 0 "$bin" config -d "$dir" --unset max_size
run 2 "$bin" ls -d "$dir" --jsno
if [ -x "$sample" ]; then
  run 0 "$sample" --arch sm_90 --cache-dir "$work/sample" --clear-cache
  run 0 "$sample" --arch sm_90 --cache-dir "$work/sample"
  run 2 "$sample" --m 0
fi
echo "valgrind: no leaks or memory errors"
