# Sourced by every sitting script: the result folder, the run-id tag, the machine's description
# in $OUT/env.txt, and a refusal when vLLM is neither installed nor carried.
# usage: . calibrate/gpu/sitting_start.sh TAG INSTALLING_PART     (PART is the script's part)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export ARGS="--tag $1" CAP=1024
{ hostname; date -u +%FT%TZ; grep -m1 "model name" /proc/cpuinfo; nproc; uptime; } >> "$OUT/env.txt"
# Any part installs vLLM when its chunks are on this machine (a machine lost between calls is a
# fresh one: carry the chunks again and go on with the next part); without them, say so.
if [ ! -f /root/site/vllm_offline_env.sh ] && [ ! -f /root/carry/chunk01/install-on-gpu.sh ]; then
  echo "vLLM 0.33 is neither installed nor carried to this machine (carry the chunks, then run part $PART; part $2 is the usual first)"; exit 3; fi
