#!/usr/bin/env bash
# One part of a GPU sitting, as its run plan says (calibrate/plans/*.toml; the dated scripts of
# earlier sittings became plan files): records the machine in $OUT/env.txt, refuses when vLLM is
# neither installed nor carried here, then runs the part's engines through calibrate/gpu/session.sh
# (which installs vLLM from the carried chunks on the first call). Check a plan on the CPU host
# first: python -m calibrate.sitting_plans check PLAN --requests-dir .gpu/requests
# usage: bash calibrate/gpu/sitting.sh PLAN PART [BUDGET_S]     (records land in $OUT)
set -uo pipefail
PLAN=$1; PART=$2; BUDGET=${3:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; export OUT
{ hostname; date -u +%FT%TZ; grep -m1 "model name" /proc/cpuinfo; nproc; uptime; } >> "$OUT/env.txt"
# Any part installs vLLM when its chunks are on this machine (a machine lost between calls is a
# fresh one: carry the chunks again and go on with the next part); without them, say so.
if [ ! -f /root/site/vllm_offline_env.sh ] && [ ! -f /root/carry/chunk01/install-on-gpu.sh ]; then
  echo "vLLM is neither installed nor carried to this machine (carry the plan's chunks first)"; exit 3
fi
python3 -m calibrate.sitting_plans script "$PLAN" "$PART" $BUDGET > "/tmp/sitting-part-$PART.sh" || exit 2
bash "/tmp/sitting-part-$PART.sh"
