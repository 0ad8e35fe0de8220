#!/usr/bin/env bash
# Installs arctic-inference 0.3.0, the real suffix drafter that tests/slow/test_arctic_parity.py checks
# our implementation against (those tests fail, never skip, without it). It is published as an
# sdist only; its build needs torch (the CPU wheel pip finds on this machine's disk) and the
# build requirements below, present because of --no-build-isolation. Does nothing when the
# package already imports. Part of the README's test command and of .ci/run.
set -euo pipefail
if python3 -c "import arctic_inference.suffix_decoding" 2>/dev/null; then
    exit 0
fi
pip_install() { python3 -m pip install -q --disable-pip-version-check "$@"; }
pip_install torch==2.13.0 setuptools wheel ninja 'cmake>=3.12' nanobind==2.9.2 protobuf==5.29.6 \
    grpcio-tools
pip_install --no-build-isolation arctic-inference==0.3.0
python3 -c "import arctic_inference.suffix_decoding" || {
    echo "install_arctic.sh: arctic-inference installed but does not import" >&2; exit 1; }
