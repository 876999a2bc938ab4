#!/usr/bin/env bash
# Spark GPU resource discovery script (spark.{driver,executor}.resource.gpu.discoveryScript):
# prints this host's GPUs as {"name":"gpu","addresses":["0","1",...]}.
# The addresses become torch device ordinals (cuda:<address>), and CUDA numbers the devices in
# CUDA_VISIBLE_DEVICES from 0, so when that is set (container/YARN isolation) we print 0..n-1.
set -euo pipefail
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu_discovery.sh: nvidia-smi not found; this host has no usable NVIDIA GPU" >&2
  exit 1
fi
if [[ -n "${CUDA_VISIBLE_DEVICES:-}" && "${CUDA_VISIBLE_DEVICES}" != "NoDevFiles" ]]; then
  IFS=',' read -ra visible <<<"$CUDA_VISIBLE_DEVICES"
  addrs=$(seq 0 $((${#visible[@]} - 1)))
else
  addrs=$(nvidia-smi --query-gpu=index --format=csv,noheader | tr -d ' ')
fi
json=$(awk 'NF { printf "%s\"%s\"", sep, $1; sep = "," }' <<<"$addrs")
echo "{\"name\":\"gpu\",\"addresses\":[${json}]}"
