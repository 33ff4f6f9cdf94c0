#!/usr/bin/env bash
# Make sure the build and test dependencies are present. Sourced by
# scripts/run.sh and scripts/test.sh. As root it installs missing Debian
# packages with apt-get; otherwise it prints the exact line to run.
set -euo pipefail

PROGCACHE_APT_PACKAGES=(build-essential cmake pkg-config libssl-dev libhiredis-dev
                        redis-server python3 python3-venv valgrind zsh fish
                        openssh-server sshfs openssl libcurl4-openssl-dev nginx)

missing=()
for p in "${PROGCACHE_APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "progcache: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "progcache: missing packages. Run:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# The CUDA toolkit (NVRTC and the driver API headers) comes from NVIDIA,
# not Debian: find it, or say how to get it.
if [ -z "${CUDAToolkit_ROOT:-}" ]; then
  for d in /usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-12; do
    if [ -x "$d/bin/nvcc" ]; then CUDAToolkit_ROOT=$d; break; fi
  done
fi
if [ -z "${CUDAToolkit_ROOT:-}" ] && ! command -v nvcc >/dev/null; then
  echo "progcache: the CUDA toolkit was not found (no nvcc in /usr/local/cuda or on PATH)." >&2
  echo "  Install it from NVIDIA's Debian repository (package cuda-toolkit-13-0)," >&2
  echo "  or set CUDAToolkit_ROOT=/path/to/cuda." >&2
  exit 1
fi
export CUDAToolkit_ROOT=${CUDAToolkit_ROOT:-$(dirname "$(dirname "$(command -v nvcc)")")}
