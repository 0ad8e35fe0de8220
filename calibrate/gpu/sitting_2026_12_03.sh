#!/usr/bin/env bash
# The vLLM 0.33 GPU sitting of 2026-12-03 (one H200), as three back-to-back device calls after the
# 24 chunk transfers (../shared/gpu/v033/README.md). Its purpose: repeat day-1 (2026-12-02) settings
# on another day, so the cost model is scored on runs from a day it was not fitted on; add K-pad 8
# and Qwen2.5-7B K-pad 4 (absent on day 1); a second speculative configuration (K-pad 12) on the
# fleet streams (calibrate.fleet_streams).
# usage: bash calibrate/gpu/sitting_2026_12_03.sh A|B|C|D [BUDGET_S]     (records land in $OUT)
set -uo pipefail
PART=$1; BUDGET=${2:-560}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export ARGS="--tag v033-1203" CAP=1024
{ hostname; date -u +%FT%TZ; grep -m1 "model name" /proc/cpuinfo; nproc; } >> "$OUT/env.txt"
# Day-1 settings repeated on every Llama-3.1-8B engine (a :hot spec also records its cold first pass)
STD="chat:32:64:calibration:hot,chat:64:128:calibration,chat:8:24:calibration"
STD="$STD,code-reasoning:32:128:validation:hot,math:32:128:validation:repeat:0.5"
STD="$STD,math:32:96:validation:cap=4096"
FLEET="fleet-rr-r0:8:32:validation,fleet-rr-r1:8:32:validation,fleet-rr-r2:8:32:validation"
FLEET="$FLEET,fleet-rr-r3:8:32:validation,fleet-pa-r0:8:40:validation,fleet-pa-r1:8:14:validation"
FLEET="$FLEET,fleet-pa-r2:8:34:validation,fleet-pa-r3:8:40:validation"
if [ "$PART" != A ] && [ "$PART" != D ] && [ ! -f /root/site/vllm_offline_env.sh ]; then
  echo "vLLM 0.33 is not installed on this machine (part A installs it)"; exit 3; fi
case "$PART" in
  A)  # install, suffix (session.sh), then vanilla through the user's command, `simkit calibrate run`
      t0=$(date +%s)
      WORK=/root/work/A-suffix bash calibrate/gpu/session.sh $(( BUDGET - 200 )) llama-3.1-8b "suffix:0@$STD"
      left=$(( BUDGET - ($(date +%s) - t0) ))
      echo "ENGINE vanilla via simkit calibrate run (${left}s left)"
      . /root/site/vllm_offline_env.sh
      export PYTHONPATH="$PWD:$PYTHONPATH" VLLM_ENABLE_V1_MULTIPROCESSING=0 PYTHONUNBUFFERED=1
      W=/root/work/vanilla-cli; mkdir -p "$W"
      timeout $(( left - 10 )) python3 -m simkit calibrate run --model llama-3.1-8b --corpus chat \
        --config vanilla --k 0 --runs "$STD" --requests-dir .gpu/requests --out "$W" \
        --tag v033-1203 >> "$OUT/log.txt" 2>&1
      echo "ENGINE vanilla rc=$? in $(( $(date +%s) - t0 ))s since start"
      grep -E "^(RUN|SKIP)" "$OUT/log.txt" | grep -F "_vanilla" | tail -n 10
      python3 -m calibrate.merge /root/work/A-suffix "$W" --into "$OUT" 2>&1 | tail -1 ;;
  B)  bash calibrate/gpu/session.sh "$BUDGET" llama-3.1-8b "kpad:4@$STD" "kpad:12@$STD,$FLEET" ;;
  C)  t0=$(date +%s)
      bash calibrate/gpu/session.sh $(( BUDGET - 190 )) llama-3.1-8b \
        "kpad:8@chat:32:64:calibration:hot,code-reasoning:32:128:validation:hot,math:32:128:validation:repeat:0.5"
      mkdir -p "$OUT/llama"; mv "$OUT"/*.parquet "$OUT/llama/" 2>/dev/null
      bash calibrate/gpu/session.sh $(( BUDGET - ($(date +%s) - t0) )) qwen2.5-7b \
        "kpad:4@code:32:96:calibration:hot,math:32:128:validation" ;;
  D)  # a second machine the same day (09:2x UTC), after the arctic-inference wheel was rebuilt for
      # CPython 3.12: K-pad 8 (new on 0.33) and K-pad 12 on the day-1 chat setting and the fleet streams
      export ARGS="--tag v033-1203b"
      bash calibrate/gpu/session.sh "$BUDGET" llama-3.1-8b \
        "kpad:8@chat:32:64:calibration:hot,code-reasoning:32:128:validation:hot,math:32:128:validation:repeat:0.5" \
        "kpad:12@chat:32:64:calibration:hot,$FLEET" ;;
  *)  echo "usage: $0 A|B|C|D [BUDGET_S]"; exit 2 ;;
esac
ls -la "$OUT"
