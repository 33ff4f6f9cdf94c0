#!/usr/bin/env bash
# A driver-only node (issue 23, item 5; docs/FLEET.md): a build farm
# compiles and exports a bundle; a node without NVRTC imports it and runs
# the cached kernels. NVRTC is hidden in a mount namespace (unshare -m): an
# empty directory is bound over every directory that holds a libnvrtc the
# loader or progcache could find, and the test checks that none is left.
#
#   test_driver_only.sh PROGCACHE_TOOL SAMPLE NVRTC_LIBRARY
#
# On the node: `progcache` starts (stats, ls, verify), the import works,
# the sample's lookups HIT on the imported entries with no compile (no GPU
# here: --arch runs the cache flow), and a MISS is the clear "no NVRTC"
# error (the tools exit 3). Root, for unshare and mount; else SKIPPED (77).
set -euo pipefail

tool=${1:?usage: $0 PROGCACHE_TOOL SAMPLE NVRTC_LIBRARY}
sample=${2:?}
nvrtc_library=${3:?}
if [ "$(id -u)" != 0 ]; then
  echo "SKIPPED: hiding NVRTC needs root (unshare -m, mount --bind)"
  exit 77
fi
if ! unshare -m true 2>/dev/null; then
  echo "SKIPPED: unshare -m is not allowed here (no CAP_SYS_ADMIN in this container?)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/progcache-driver-only.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
sizes=(--arch sm_90 --m 64 --n 64 --k 64)

# ---- the build farm: NVRTC present ----------------------------------------
farm=$work/farm
"$sample" "${sizes[@]}" --cache-dir "$farm" >"$work/farm1.out" || fail "farm: the sample failed"
grep -q 'Cache status: *MISS' "$work/farm1.out" || fail "farm: the first run was not a MISS"
"$sample" "${sizes[@]}" --templated --cache-dir "$farm" >"$work/farm2.out" \
  || fail "farm: the templated sample failed"
"$tool" export -d "$farm" "$work/unsigned.tar" >/dev/null || fail "farm: export"
# The farm's key pair; the bundle is signed with it (docs/FLEET.md).
openssl genpkey -algorithm ed25519 -out "$work/farm.pem" 2>/dev/null || fail "farm: openssl genpkey"
openssl pkey -in "$work/farm.pem" -pubout -out "$work/farm.pub" 2>/dev/null || fail "farm: openssl pkey"
"$tool" export -d "$farm" --sign "$work/farm.pem" "$work/bundle.tar" >/dev/null ||
  fail "farm: export --sign"
# A program the bundle lacks (the gelu epilogue), and its key on the farm.
"$sample" --print-source --epilogue gelu >"$work/gelu.cu"
echo "gelu.cu -- -arch=sm_90 --std=c++17" >"$work/manifest"
farm_key=$("$tool" key "$work/gelu.cu" -- -arch=sm_90 --std=c++17 | awk '{print $1}')
[ ${#farm_key} = 64 ] || fail "farm: progcache key printed '$farm_key'"
nvrtc_version=$(awk 'NR == 1 {print $1}' "$farm/progcache/nvrtc-$(id -u)")
[ -n "$nvrtc_version" ] || fail "farm: no NVRTC record after a compile"

# ---- the node: the same machine, NVRTC hidden -----------------------------
# The directories to hide: the one this build loads NVRTC from, and every
# one the loader's cache (ldconfig) or LD_LIBRARY_PATH names for a libnvrtc.
{
  dirname "$(readlink -f "$nvrtc_library")"
  dirname "$nvrtc_library"
  ldconfig -p 2>/dev/null | awk '/libnvrtc/ {print $NF}' | xargs -r -n1 dirname
  ldpath=${LD_LIBRARY_PATH:-}
  for d in ${ldpath//:/ }; do
    if ls "$d"/libnvrtc* >/dev/null 2>&1; then echo "$d"; fi
  done
} | xargs -r -n1 readlink -f | sort -u >"$work/hide"
mkdir "$work/empty"

cat >"$work/node.sh" <<'NODE'
set -euo pipefail
work=$1 tool=$2 sample=$3 nvrtc_library=$4 farm_key=$5 nvrtc_version=$6
fail() { echo "FAIL (node): $*" >&2; exit 1; }
sizes=(--arch sm_90 --m 64 --n 64 --k 64)
mount --make-rprivate /
while read -r d; do
  mount --bind "$work/empty" "$d" || fail "cannot hide $d"
done <"$work/hide"
unset LD_LIBRARY_PATH PROGCACHE_NVRTC_LIBRARY PROGCACHE_NVRTC_VERSION
# Nothing is left to load: not the build's path, not the loader's.
[ ! -e "$nvrtc_library" ] || fail "$nvrtc_library is still there"
python3 - <<'PY' || fail "a libnvrtc can still be loaded"
import ctypes, sys
for name in ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"):
    try:
        ctypes.CDLL(name)
    except OSError:
        continue
    sys.exit(name + " still loads")
PY

node=$work/node
# progcache starts and works on a cache of its own (empty, then imported).
mkdir "$node"
"$tool" stats -d "$node" >/dev/null || fail "stats"
"$tool" ls -d "$node" >/dev/null || fail "ls"
"$tool" verify -d "$node" >/dev/null || fail "verify"
# The bundle goes in.
# The bundle goes in, verified: an unsigned one and an altered one are
# refused before anything is written (exit 3), then the farm's signed one.
rc=0; "$tool" import -d "$node" --verify "$work/farm.pub" "$work/unsigned.tar" 2>/dev/null || rc=$?
[ "$rc" = 3 ] || fail "import --verify of an unsigned bundle: exit $rc, not 3"
cp "$work/bundle.tar" "$work/altered.tar"
printf 'X' | dd of="$work/altered.tar" bs=1 seek=1536 conv=notrunc 2>/dev/null
rc=0; "$tool" import -d "$node" --verify "$work/farm.pub" "$work/altered.tar" 2>/dev/null || rc=$?
[ "$rc" = 3 ] || fail "import --verify of an altered bundle: exit $rc, not 3"
[ -z "$(find "$node/entries" -type f 2>/dev/null)" ] || fail "a refused bundle wrote entries"
"$tool" import -d "$node" --verify "$work/farm.pub" "$work/bundle.tar" >/dev/null ||
  fail "import --verify"
"$tool" ls -d "$node" | grep -q CUBIN || fail "ls after the import shows no CUBIN"
"$tool" verify -d "$node" >/dev/null || fail "verify after the import"
[ -s "$node/progcache/nvrtc-$(id -u)" ] || fail "the import did not keep the bundle's NVRTC record"

# The sample HITs, plain and templated, with no compile.
"$sample" "${sizes[@]}" --cache-dir "$node" >"$work/node1.out" 2>"$work/node1.err" \
  || { cat "$work/node1.err" >&2; fail "the sample failed on the imported cache"; }
grep -q 'Cache status: *HIT' "$work/node1.out" || fail "the sample did not HIT"
grep -q 'Compile time: *skipped' "$work/node1.out" || fail "the sample compiled"
"$sample" "${sizes[@]}" --templated --cache-dir "$node" >"$work/node2.out" 2>&1 \
  || fail "the templated sample failed on the imported cache"
grep -q 'Cache status: *HIT' "$work/node2.out" || fail "the templated sample did not HIT"
grep -q 'Lowered name: *_Z' "$work/node2.out" || fail "the templated HIT has no lowered name"
"$tool" stats -d "$node" | grep -Eq '^misses +0$' || fail "the node's cache counted a miss"
"$tool" stats -d "$node" | grep -Eq '^hits +2$' || fail "the node's cache did not count two hits"

# A MISS: the clear error, naming NVRTC and what to do.
if "$sample" "${sizes[@]}" --epilogue gelu --cache-dir "$node" >/dev/null 2>"$work/miss.err"; then
  fail "a MISS succeeded without NVRTC"
fi
grep -q "no NVRTC" "$work/miss.err" || fail "the MISS does not say 'no NVRTC': $(cat "$work/miss.err")"
grep -q "is not in the cache and cannot be compiled here" "$work/miss.err" \
  || fail "the MISS does not say what happened: $(cat "$work/miss.err")"
"$tool" stats -d "$node" | grep -Eq '^NVRTC missing +1$' || fail "the MISS was not counted"
rc=0
"$tool" warm -q -d "$node" "$work/manifest" >/dev/null 2>"$work/warm.err" || rc=$?
[ "$rc" = 3 ] || fail "warm without NVRTC exited $rc, not 3"
grep -q "no NVRTC" "$work/warm.err" || fail "warm does not say 'no NVRTC': $(cat "$work/warm.err")"

# No NVRTC and no record: the key cannot be derived; said so, exit 3.
rc=0
"$tool" key "$work/gelu.cu" -- -arch=sm_90 --std=c++17 >/dev/null 2>"$work/key.err" || rc=$?
[ "$rc" = 3 ] || fail "progcache key without NVRTC exited $rc, not 3"
grep -q "no NVRTC" "$work/key.err" && grep -q "PROGCACHE_NVRTC_VERSION" "$work/key.err" \
  || fail "progcache key's message: $(cat "$work/key.err")"
if "$sample" "${sizes[@]}" --cache-dir "$work/empty-cache" >/dev/null 2>"$work/norecord.err"; then
  fail "a cache without a record derived a key without NVRTC"
fi
grep -q "no record of the NVRTC version" "$work/norecord.err" \
  || fail "no-record message: $(cat "$work/norecord.err")"
# The version given explicitly: the farm's key exactly.
node_key=$(PROGCACHE_NVRTC_VERSION=$nvrtc_version "$tool" key "$work/gelu.cu" -- -arch=sm_90 \
  --std=c++17 | awk '{print $1}')
[ "$node_key" = "$farm_key" ] || fail "the key with PROGCACHE_NVRTC_VERSION differs: $node_key"
echo "node: ok"
NODE
unshare -m bash "$work/node.sh" "$work" "$tool" "$sample" "$nvrtc_library" "$farm_key" \
  "$nvrtc_version" || fail "the driver-only node"
# The namespace is gone with its process: NVRTC is back here.
[ -e "$nvrtc_library" ] || fail "NVRTC did not come back after the namespace"
echo "ok"
