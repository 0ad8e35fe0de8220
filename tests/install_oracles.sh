#!/usr/bin/env bash
# Unpacks vLLM 0.34.0's wheel (no dependencies, nothing imported) into .oracles/vllm-0.34.0, where
# tests/vllm_oracle.py reads vLLM's own pure-Python rules as test oracles. It is kept out of the
# environment on purpose: a vLLM without torch on the path would look like a broken install to
# `simkit calibrate run`. Idempotent; about 240 MB downloaded once.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.oracles/vllm-0.34.0
if [ -d "$dest/vllm-0.34.0.dist-info" ]; then
  echo "vLLM 0.34.0 oracle already unpacked in $dest"
  exit 0
fi
rm -rf "$dest.tmp"
python3 -m pip install -q --no-deps --no-compile --target "$dest.tmp" vllm==0.34.0
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo "vLLM 0.34.0 oracle unpacked in $dest"
