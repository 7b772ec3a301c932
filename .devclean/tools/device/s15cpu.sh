#!/usr/bin/env bash
# Host-side profiles of ours on the GPU (cpuprof.py) for CPU_MODELS, and the matmul
# template table. Usage: bash tools/device/s15cpu.sh. Carry `.whl`.
set -uo pipefail
source tools/device/install.sh
export PYTHONUNBUFFERED=1
cd tools/bench
for m in ${CPU_MODELS:-mobilenetv3 gpt2}; do
  INDUCTOR_CACHE_DIR=/tmp/icc_$m INDUCTOR_DEBUG=1 timeout ${CPU_TIMEOUT:-90} python3 -P ../device/cpuprof.py $m ${CPU_MODE:-infer} \
    > "$OUT/cpu_$m.txt" 2> "$OUT/code_$m.txt"
  grep "^==" "$OUT/cpu_$m.txt"
done
timeout ${MM_TIMEOUT:-90} python3 -P mm_templates.py --device cuda ${MM_ARGS:-} 2>&1 | grep -v -i "warn\|autotun\|triton_mm\|^  \|^strides\|^dtypes\|^{" | tee "$OUT/mm.txt"
