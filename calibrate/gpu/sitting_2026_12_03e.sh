#!/usr/bin/env bash
# The fifth vLLM 0.33 GPU sitting (one H200, 2026-12-03 evening, a machine no fit has seen), as
# back-to-back device calls after the 24 chunk transfers (../shared/gpu/v033/README.md). Every run
# is a validation run (never in a fit). Its purpose: how far runs of one setting come apart WITHIN
# one engine and hour (settings repeated, interleaved, on one engine: `*R`), against the spread
# across machines already recorded; and second-machine repeats of the Qwen2.5-7B groups whose best
# configuration is scored. In the order of their worth, as far as the device time allows:
#   A  Llama suffix 24: chat c32 x3 + hot, math cap 4096 x3, code-reasoning x2 + hot, math
#      repeat:0.5 (installs vLLM 0.33)
#   B  Qwen2.5-7B suffix 24 (math x2 more), K-pad 4 on code and math, cold and hot
#   C  Qwen2.5-7B K-pad 12 and vanilla on the same
#   D  Llama K-pad 4, K-pad 8, dynamic-K (feedback, goodput)
# usage: bash calibrate/gpu/sitting_2026_12_03e.sh A|B|C|D [BUDGET_S]     (records land in $OUT)
set -uo pipefail
PART=$1; BUDGET=${2:-560}
. calibrate/gpu/sitting_start.sh v033-1203e A
SA="chat:32:64:validation:hot,chat:32:64:validation*2,math:32:96:validation:cap=4096*3"
SA="$SA,code-reasoning:32:128:validation:hot,code-reasoning:32:128:validation,math:32:128:validation:repeat:0.5"
LL="chat:32:64:validation:hot,code-reasoning:32:128:validation:hot"
LL="$LL,math:32:128:validation:repeat:0.5,math:32:96:validation:cap=4096"
Q7="code:32:96:validation:hot,math:32:128:validation:hot"
case "$PART" in
  A)  bash calibrate/gpu/session.sh "$BUDGET" llama-3.1-8b "suffix:24@$SA" ;;
  B)  bash calibrate/gpu/session.sh "$BUDGET" qwen2.5-7b "suffix:24@$Q7,math:32:128:validation*2" "kpad:4@$Q7" ;;
  C)  bash calibrate/gpu/session.sh "$BUDGET" qwen2.5-7b "kpad:12@$Q7" "vanilla:0@$Q7" ;;
  D)  export WORK=/root/work/D; t0=$(date +%s)
      bash calibrate/gpu/session.sh $(( BUDGET - 120 )) llama-3.1-8b "kpad:4@$LL" "kpad:8@$LL"
      ARGS="$ARGS --policies feedback,goodput" bash calibrate/gpu/session.sh \
        $(( BUDGET - ($(date +%s) - t0) )) llama-3.1-8b "dynamic:12@math:32:128:validation" ;;
  *)  echo "usage: $0 A|B|C|D [BUDGET_S]"; exit 2 ;;
esac
ls -la "$OUT"
