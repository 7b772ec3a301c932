#!/usr/bin/env bash
# Session 24: one call on a 4-GPU box. GPU 0: pytest S24_TESTS, then S24_STEPS (';'-separated,
# from tools/bench); GPU 1: cold then warm first calls (coldprof.py twice over the same cache
# folders, a fresh process each) of WARM_RUNS ("model:mode" ...), ours and torch.compile each
# in its own folders; GPUs 2..: ZOO_RUNS row sets (s18zoo.sh, from GPU 2).
# Usage: bash tools/device/s24.sh (carry `.whl`). Outputs in $OUT.
set -uo pipefail
source tools/device/install.sh >/dev/null 2>&1
export PYTHONUNBUFFERED=1
ZOO_GPU0=2 ZOO_TESTS= bash tools/device/s18zoo.sh > "$OUT/zoo_summary.txt" 2>&1 &
( cd tools/bench
  for run in ${WARM_RUNS:-}; do
    IFS=: read -r m mode <<< "$run"
    dir=$(mktemp -d)
    for who in ours torch; do
      for pass in cold warm; do
        echo "-- $m $mode $who $pass"
        CUDA_VISIBLE_DEVICES=1 COLDPROF_DIR=$dir/$who timeout ${WARM_TIMEOUT:-120} \
          python3 -P ../device/coldprof.py $m $mode --which $who 2>&1 | grep "^=="
      done
    done
  done > "$OUT/warm.txt" 2>&1 ) &
CUDA_VISIBLE_DEVICES=0 S20_TESTS="${S24_TESTS:-}" S20_STEPS="${S24_STEPS:-}" bash tools/device/s20prof.sh
wait
cat "$OUT/warm.txt" "$OUT/zoo_summary.txt"
