#!/usr/bin/env bash
# A vLLM 0.33 GPU sitting prepared to test what docs/validation.md ("The drift's time scale")
# concludes from the records: that the synchronous runner's run-to-run spread (12.6 % at today's
# 4.5 s steady windows) comes from host states lasting a few seconds, so that steady windows of
# >= 60 s bring it near 5 %, unless a per-run constant exists. Ran 2026-12-04 (calibrate/data/README.md). Every run is a
# validation run (never in a fit). Parts in the order of their worth, one device call each, after
# the 24 chunk transfers (../shared/gpu/v033/README.md):
#   A  Llama-3.1-8B suffix 24, chat c32, 512 requests (a ~60 s steady window), x3 in one engine
#      (installs vLLM 0.33); the spread of these three against the 12.6 % of 64-request runs
#   B  the same in a second engine, x2: a per-engine constant shows as A's mean against B's
#   C  Llama-3.1-8B K-pad 12, same requests, x2: FULL-graph decode steps, whose floor is ~4 % at
#      today's windows (the control: it must stay low)
#   D  Qwen2.5-7B suffix 24, math c32, 512 requests, x2: a second model's synchronous spread
#      (its 128-request runs spread 3,072-4,983 tok/s)
#   E  Llama-3.1-8B vanilla, A's requests, x2: the async runner's long-window figure, and with
#      A and C the best configuration of this group measured on long windows
# Before the sitting, on the CPU host (the first 512 of 600 are the same requests as the first
# 64 of the recorded runs' files: one seeded permutation):
#   python -m calibrate.make_requests --model llama-3.1-8b --corpus chat -n 600 --out .gpu/requests
#   python -m calibrate.make_requests --model qwen2.5-7b --corpus math -n 600 --out .gpu/requests
# After: merge into calibrate/data/vllm-0.33, then `python -m simkit.validation.drift` and
# `python -m simkit.validation.refresh`.
# usage: bash calibrate/gpu/sitting_drift.sh A|B|C|D|E [BUDGET_S]     (records land in $OUT)
set -uo pipefail
PART=$1; BUDGET=${2:-560}
. calibrate/gpu/sitting_start.sh v033-drift A
LONG="chat:32:512:validation"
case "$PART" in
  A)  bash calibrate/gpu/session.sh "$BUDGET" llama-3.1-8b "suffix:24@$LONG*3" ;;
  B)  ARGS="$ARGS-b" bash calibrate/gpu/session.sh "$BUDGET" llama-3.1-8b "suffix:24@$LONG*2" ;;
  C)  bash calibrate/gpu/session.sh "$BUDGET" llama-3.1-8b "kpad:12@$LONG*2" ;;
  D)  bash calibrate/gpu/session.sh "$BUDGET" qwen2.5-7b "suffix:24@math:32:512:validation*2" ;;
  E)  bash calibrate/gpu/session.sh "$BUDGET" llama-3.1-8b "vanilla:0@$LONG*2" ;;
  *)  echo "usage: $0 A|B|C|D|E [BUDGET_S]"; exit 2 ;;
esac
ls -la "$OUT"
