#!/usr/bin/env bash
# The fourth vLLM 0.33 GPU sitting (one H200, 2026-12-03 late afternoon, a machine no fit has seen),
# as four back-to-back device calls after the 24 chunk transfers (../shared/gpu/v033/README.md).
# Every run is a validation run (never in a fit). Its purpose: repeat, on another machine, the
# held-out settings whose best configuration and interval are scored (Llama-3.1-8B code-reasoning
# cold+hot, math repeat:0.5 and cap 4,096, chat c32 cold+hot; Qwen2.5-7B code and math cold+hot;
# Qwen2.5-32B math cold+hot), with every configuration of a group on the same machine and hour, so
# the host-speed drift between runs can be read from their step records.
# In the order of their worth, as far as the device time allows (a machine refused for 10 minutes
# cost a third of it):
#   A  Llama vanilla, K-pad 12, suffix 24 (installs vLLM 0.33)
#   B  Qwen2.5-7B K-pad 12, suffix 24, vanilla
#   C  Llama K-pad 4, K-pad 8, dynamic-K (feedback, goodput)
#   D  Qwen2.5-32B K-pad 12, suffix 24, vanilla
# usage: bash calibrate/gpu/sitting_2026_12_03d.sh A|B|C|D [BUDGET_S]     (records land in $OUT)
set -uo pipefail
PART=$1; BUDGET=${2:-560}
. calibrate/gpu/sitting_start.sh v033-1203d A
LL="chat:32:64:validation:hot,code-reasoning:32:128:validation:hot"
LL="$LL,math:32:128:validation:repeat:0.5,math:32:96:validation:cap=4096"
Q7="code:32:96:validation:hot,math:32:128:validation:hot"
Q32="math:32:64:validation:hot"
case "$PART" in
  A)  bash calibrate/gpu/session.sh "$BUDGET" llama-3.1-8b "vanilla:0@$LL" "kpad:12@$LL" "suffix:24@$LL" ;;
  B)  bash calibrate/gpu/session.sh "$BUDGET" qwen2.5-7b "kpad:12@$Q7" "suffix:24@$Q7" "vanilla:0@$Q7" ;;
  C)  export WORK=/root/work/C; t0=$(date +%s)
      bash calibrate/gpu/session.sh $(( BUDGET - 120 )) llama-3.1-8b "kpad:4@$LL" "kpad:8@$LL"
      ARGS="$ARGS --policies feedback,goodput" bash calibrate/gpu/session.sh \
        $(( BUDGET - ($(date +%s) - t0) )) llama-3.1-8b "dynamic:12@math:32:128:validation" ;;
  D)  bash calibrate/gpu/session.sh "$BUDGET" qwen2.5-32b "kpad:12@$Q32" "suffix:24@$Q32" "vanilla:0@$Q32" ;;
  *)  echo "usage: $0 A|B|C|D [BUDGET_S]"; exit 2 ;;
esac
ls -la "$OUT"
