#!/usr/bin/env bash
# A vLLM 0.33 GPU sitting of long-window validation runs across settings, on a machine the fit
# never saw. The records show (docs/validation.md, "The drift's time scale") that one short run of
# a speculative configuration lands ~12 % from its setting's mean, so most held-out runs score the
# host's state of a few seconds rather than the model; the one long-window sitting so far
# (-v033-drift, one setting) was on a machine whose host ran fast throughout. These runs give the
# held-out error on an unseen machine with steady windows of ~25-100 s, over two models, three
# corpora and three configurations, and one setting (Llama chat suffix 24) repeated from the
# -v033-drift machine. Every run is a validation run (never in a fit). One device call per part,
# after the 24 chunk transfers (../shared/gpu/v033/README.md):
#   A  Llama-3.1-8B suffix 24: chat 512, math 512, code-reasoning 800 requests, c32 (installs)
#   B  Llama-3.1-8B K-pad 12 and vanilla: math 512, code-reasoning 800, c32 (two engines)
#   C  Qwen2.5-7B suffix 24 and vanilla: math 512, code 1024, c32 (two engines)
# Before the sitting, on the CPU host (one seeded permutation per file, so the first n of a
# larger file are the same requests as a smaller file's):
#   python -m calibrate.make_requests --model llama-3.1-8b --corpus chat -n 600 --out .gpu/requests
#   python -m calibrate.make_requests --model llama-3.1-8b --corpus math -n 600 --out .gpu/requests
#   python -m calibrate.make_requests --model llama-3.1-8b --corpus code-reasoning -n 1600 --out .gpu/requests
#   python -m calibrate.make_requests --model qwen2.5-7b --corpus math -n 600 --out .gpu/requests
#   python -m calibrate.make_requests --model qwen2.5-7b --corpus code -n 1600 --out .gpu/requests
# After: merge into calibrate/data/vllm-0.33, then `python -m simkit.validation.refresh`.
# usage: bash calibrate/gpu/sitting_long.sh A|B|C [BUDGET_S]     (records land in $OUT)
set -uo pipefail
PART=$1; BUDGET=${2:-560}
. calibrate/gpu/sitting_start.sh v033-long A
V=validation
case "$PART" in
  A)  bash calibrate/gpu/session.sh "$BUDGET" llama-3.1-8b \
        "suffix:24@chat:32:512:$V,math:32:512:$V,code-reasoning:32:800:$V" ;;
  B)  bash calibrate/gpu/session.sh "$BUDGET" llama-3.1-8b \
        "kpad:12@math:32:512:$V,code-reasoning:32:800:$V" \
        "vanilla:0@math:32:512:$V,code-reasoning:32:800:$V" ;;
  C)  bash calibrate/gpu/session.sh "$BUDGET" qwen2.5-7b \
        "suffix:24@math:32:512:$V,code:32:1024:$V" \
        "vanilla:0@math:32:512:$V,code:32:1024:$V" ;;
  *)  echo "usage: $0 A|B|C [BUDGET_S]"; exit 2 ;;
esac
ls -la "$OUT"
