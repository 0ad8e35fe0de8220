#!/usr/bin/env bash
# The third vLLM 0.33 GPU sitting (one H200, 2026-12-03 afternoon), as three back-to-back device
# calls after the 24 chunk transfers (../shared/gpu/v033/README.md). Every run here is a validation
# run (never in the shipped fit). Its purpose:
#   E  Qwen2.5-7B K-pad 4 and 12 (absent so far on 0.33) beside the day-1 vanilla/suffix settings,
#      so the best configuration is scored on a second model; suffix repeated on another day;
#   G  Qwen2.5-32B vanilla and K-pad 12 beside its day-1 suffix runs (a third model with more than
#      one configuration);
#   F  Llama-3.1-8B suffix and the dynamic-K plugin repeated on another day (day-1 settings), so the
#      speculative engines are scored on a sitting the fit never saw.
#   H, I Qwen2.5-32B suffix and Qwen2.5-7B vanilla again the same afternoon (run as E, G, F, H 370, I 240)
# usage: bash calibrate/gpu/sitting_2026_12_03c.sh E|F|G|H|I [BUDGET_S]     (records land in $OUT)
set -uo pipefail
PART=$1; BUDGET=${2:-560}
. calibrate/gpu/sitting_start.sh v033-1203c E
Q7="code:32:96:validation:hot,math:32:128:validation:hot"
STD="chat:32:64:validation:hot,chat:64:128:validation,chat:8:24:validation"
STD="$STD,code-reasoning:32:128:validation:hot,math:32:128:validation:repeat:0.5"
STD="$STD,math:32:96:validation:cap=4096"
Q32="math:32:64:validation:hot,summarization:32:64:validation"
case "$PART" in
  E)  bash calibrate/gpu/session.sh "$BUDGET" qwen2.5-7b "kpad:4@$Q7" "kpad:12@$Q7" "suffix:24@$Q7" ;;
  G)  bash calibrate/gpu/session.sh "$BUDGET" qwen2.5-32b "vanilla:0@$Q32" "kpad:12@$Q32" ;;
  F)  # one WORK folder, so the second engine's merge keeps the first engine's records
      export WORK=/root/work/F; t0=$(date +%s)
      bash calibrate/gpu/session.sh $(( BUDGET - 150 )) llama-3.1-8b "suffix:24@$STD"
      # the day-1 dynamic-K policies that need no CPU-side table (feedback, goodput)
      ARGS="$ARGS --policies feedback,goodput" bash calibrate/gpu/session.sh \
        $(( BUDGET - ($(date +%s) - t0) )) llama-3.1-8b "dynamic:12@math:32:128:validation" ;;
  # device time was left after E, G and F: the same-day partners of the best-configuration groups
  H)  bash calibrate/gpu/session.sh "$BUDGET" qwen2.5-32b "suffix:24@$Q32" ;;
  I)  bash calibrate/gpu/session.sh "$BUDGET" qwen2.5-7b "vanilla:0@$Q7" ;;
  *)  echo "usage: $0 E|F|G|H|I [BUDGET_S]"; exit 2 ;;
esac
ls -la "$OUT"
