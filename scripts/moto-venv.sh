#!/usr/bin/env bash
# The S3 server the HTTP/S3 tier's tests run against (tests/http/test_s3_tier.py):
# moto[server] from PyPI in a virtual environment under the build folder,
# BUILD/moto-venv. Without it test_s3_tier is skipped (77), saying so.
# Usage: scripts/moto-venv.sh [BUILD_DIR]   (default: build)
set -euo pipefail
build=${1:-build}
if [ -x "$build/moto-venv/bin/moto_server" ]; then
  exit 0
fi
python3 -m venv "$build/moto-venv"
"$build/moto-venv/bin/pip" install -q 'moto[server]'
