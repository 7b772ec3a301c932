#!/usr/bin/env bash
# Session 22: GPU 0 runs tests then profile steps (s20prof.sh: S20_TESTS, S20_STEPS) while
# GPUs 1.. run zoo row sets (s18zoo.sh: ZOO_RUNS, the i-th set on GPU i+1), in one call on a
# multi-GPU box. Usage: bash tools/device/s22mix.sh (carry `.whl`). Outputs in $OUT.
set -uo pipefail
source tools/device/install.sh >/dev/null 2>&1
ZOO_GPU0=1 ZOO_TESTS= bash tools/device/s18zoo.sh > "$OUT/zoo_summary.txt" 2>&1 &
CUDA_VISIBLE_DEVICES=0 bash tools/device/s20prof.sh
wait
cat "$OUT/zoo_summary.txt"
