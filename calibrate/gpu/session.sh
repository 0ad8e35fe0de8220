#!/usr/bin/env bash
# One device call: install vLLM from the carried chunks if this machine lacks it, then start one
# engine per group and make its runs, merging records into $OUT after each engine.
# A sitting's parts call it from their run plan (calibrate/gpu/sitting.sh, calibrate/plans/).
# usage: bash calibrate/gpu/session.sh BUDGET_S MODEL GROUP...
#   GROUP = config:k@corpus:conc:n[:purpose[:history]][:cap=N][*R],...   (history: cold, hot, repeat:P;
#           cap=N: this run's max_tokens cap instead of CAP; *R: made R times, ids -rep2.. ;
#           config dynamic: k = max K, every run once per policy in --policies, default all three)
# env: CAP (max_tokens cap, default 1024), EST (tok/s at c=32 for the skip estimate, default 0),
#      TP (tensor parallel; > 1 runs one rank a GPU under torchrun), ARGS (more runner flags,
#      e.g. "--tag r2" or "--no-force"), OUT (result folder; one per concurrent session)
set -uo pipefail
BUDGET=$1; MODEL=$2; shift 2
T_END=$(( $(date +%s) + BUDGET ))
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/log.txt"
if [ ! -f /root/site/vllm_offline_env.sh ]; then
  t=$(date +%s)
  bash /root/carry/chunk01/install-on-gpu.sh /root/carry > "$OUT/install.log" 2>&1 \
    || { tail -40 "$OUT/install.log"; exit 3; }
  echo "INSTALL ok in $(( $(date +%s) - t ))s"
fi
. /root/site/vllm_offline_env.sh
# simkit's own needs beyond the image (simpy, platformdirs), for the dynamic-K policies
if [ -d .gpu/whl ] && ! python3 -c "import simpy, platformdirs" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /root/site .gpu/whl/*.whl
fi
export PYTHONPATH="$PWD:$PYTHONPATH" VLLM_ENABLE_V1_MULTIPROCESSING=0 PYTHONUNBUFFERED=1
# One WORK per $OUT: each merge below rewrites $OUT from WORK, so a second session.sh in the same
# device command (same $OUT) must add to the first one's WORK, or the first's records are lost.
if [ -z "${WORK:-}" ]; then
  if [ -f "$OUT/work_dir.txt" ]; then WORK=$(cat "$OUT/work_dir.txt")
  else WORK=/root/work/$(date +%s%N); echo "$WORK" > "$OUT/work_dir.txt"; fi
fi
mkdir -p "$WORK"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm,clocks.max.sm,power.draw --format=csv >> "$OUT/env.txt" 2>&1
for g in "$@"; do
  eng=${g%%@*}; runs=${g#*@}; cfg=${eng%%:*}; k=${eng#*:}
  left=$(( T_END - $(date +%s) ))
  if [ $left -lt 100 ]; then echo "SKIP engine $eng: ${left}s left"; continue; fi
  echo "ENGINE $MODEL $eng ($left s left)"
  t=$(date +%s)
  if [ "${TP:-1}" -gt 1 ]; then
    LAUNCH=(python3 -m torch.distributed.run --standalone --nproc-per-node "$TP" -m calibrate.runner)
  else
    LAUNCH=(python3 -m calibrate.runner)
  fi
  # shellcheck disable=SC2086  # ARGS is a list of flags
  timeout $(( left - 8 )) "${LAUNCH[@]}" --model "$MODEL" --config "$cfg" --k "$k" --tp "${TP:-1}" \
    --runs "$runs" --out "$WORK" --requests-dir .gpu/requests --max-tokens-cap "${CAP:-1024}" \
    --deadline "$T_END" --est-tok-s "${EST:-0}" ${ARGS:-} >> "$LOG" 2>&1
  rc=$?
  echo "ENGINE $eng rc=$rc in $(( $(date +%s) - t ))s"
  grep -E "^(RUN|SKIP)" "$LOG" | tail -n 12 | grep -F "_${cfg}" || true
  [ $rc -ne 0 ] && grep -E "Error|error:|Traceback" "$LOG" | tail -n 8
  python3 -m calibrate.merge "$WORK" "$OUT" 2>&1 | tail -1
done
ls -la "$OUT"
