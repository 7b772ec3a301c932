#!/usr/bin/env bash
# Session 16: cold-compile profiles (coldprof.py) of COLD_RUNS ("model:mode:env-assignments",
# space-separated; env assignments comma-separated), each in its own process with empty caches.
# Usage: bash tools/device/s16cold.sh. Carry `.whl`.
set -uo pipefail
source tools/device/install.sh
export PYTHONUNBUFFERED=1
if [ -n "${COLD_TESTS:-}" ]; then
  timeout ${TEST_TIMEOUT:-120} python3 -m pytest -q -p no:cacheprovider --tb=short $COLD_TESTS > "$OUT/tests.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | tail -12
fi
cd tools/bench
i=0
for run in ${COLD_RUNS:-mobilenetv3:infer:COLDPROF_WHICH=ours mobilenetv3:infer:COLDPROF_WHICH=torch}; do
  IFS=: read -r m mode envs <<< "$run"
  i=$((i+1))
  ( for kv in ${envs//,/ }; do export "$kv"; done
    timeout ${COLD_TIMEOUT:-150} python3 -P ../device/coldprof.py $m $mode ${COLD_ARGS:-} \
      > "$OUT/cold_${i}_${m}_${mode}.txt" 2>&1 )
  grep -A16 "^==" "$OUT/cold_${i}_${m}_${mode}.txt" | grep -v "function calls\|^$\|Ordered\|List reduced"
done
