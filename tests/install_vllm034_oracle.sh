#!/usr/bin/env bash
# Installs the oracle of tests/slow/test_suffix_gpu_parity.py: vLLM 0.34.0's suffix-speculator
# kernels run by Triton's CPU interpreter (tests/vllm034_oracle.py). Needs no GPU and not vLLM's
# dependencies: Triton 3.8.0 (vLLM 0.34's pin) goes, without dependencies, into
# ORACLE_DIR/site, and the two source files the tests read,
# vllm/v1/worker/gpu/spec_decode/suffix/speculator.py and vllm/v1/spec_decode/dynamic/utils.py
# (the batch-size K schedule's checks: tests/unit/test_ktable.py), are taken from the vllm 0.34.0
# wheel (downloaded without dependencies, then deleted). torch (CPU) comes from tests/install_arctic.sh,
# which must run first. ORACLE_DIR = $SIMKIT_ORACLE_DIR/vllm-0.34.0, else .oracles/vllm-0.34.0 in
# the repository (ignored by git). Does nothing when the oracle is already there. About 0.5 GB of
# downloads and 0.9 GB on disk.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="${SIMKIT_ORACLE_DIR:-$repo/.oracles}/vllm-0.34.0"
if [ -f "$dir/speculator.py" ] && [ -f "$dir/dynamic_utils.py" ] && [ -d "$dir/site/triton" ]; then
    exit 0
fi
pip_q() { python3 -m pip -q --disable-pip-version-check "$@"; }
mkdir -p "$dir"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pip_q install --no-deps --target "$tmp/site" triton==3.8.0
pip_q download --no-deps --only-binary=:all: --dest "$tmp/wheel" vllm==0.34.0
python3 - "$tmp/wheel" "$tmp/speculator.py" <<'PY'
import glob, sys, zipfile
whl = glob.glob(sys.argv[1] + "/vllm-0.34.0-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    data = z.read("vllm/v1/worker/gpu/spec_decode/suffix/speculator.py")
    schedule = z.read("vllm/v1/spec_decode/dynamic/utils.py")
open(sys.argv[2], "wb").write(data)
open(sys.argv[2].replace("speculator.py", "dynamic_utils.py"), "wb").write(schedule)
PY
rm -rf "$dir/site"
mv "$tmp/site" "$dir/site"
mv "$tmp/speculator.py" "$dir/speculator.py"
mv "$tmp/dynamic_utils.py" "$dir/dynamic_utils.py"
python3 -c "import sys; sys.path.insert(0, '$repo/tests'); import vllm034_oracle as o; w = o.missing(); sys.exit(w and 'install_vllm034_oracle.sh: ' + w)"
