# Sourced by every sitting script: the result folder, the run-id tag, the machine's description
# in $OUT/env.txt, and a refusal when vLLM is not installed and this part does not install it.
# usage: . calibrate/gpu/sitting_start.sh TAG INSTALLING_PART     (PART is the script's part)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export ARGS="--tag $1" CAP=1024
{ hostname; date -u +%FT%TZ; grep -m1 "model name" /proc/cpuinfo; nproc; uptime; } >> "$OUT/env.txt"
if [ "$PART" != "$2" ] && [ ! -f /root/site/vllm_offline_env.sh ]; then
  echo "vLLM 0.33 is not installed on this machine (part $2 installs it)"; exit 3; fi
