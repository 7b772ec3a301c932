#!/usr/bin/env bash
# Session 25: one call on a single-GPU box, everything in sequence on GPU 0.
# S25_TESTS: pytest arguments, run first. ZOO_SETS: space-separated "dtype:mode:rows:budget[:models]"
# (as s18zoo.sh's ZOO_RUNS; models comma-separated), one zoo.py process each, in turn.
# WARM_RUNS: "model:mode" ...: cold then warm first call (coldprof.py twice over the same cache
# folders, a fresh process each), ours then torch.compile; WARM_PROFILE=1 profiles ours' warm
# pass (its profile in $OUT/warmprof_<model>.txt).
# Usage: bash tools/device/s25.sh (carry `.whl`). Outputs in $OUT (tests.txt, zoo.txt, warm.txt).
set -uo pipefail
source tools/device/install.sh >/dev/null 2>&1
export PYTHONUNBUFFERED=1
device_tests "${S25_TESTS:-}"
cd tools/bench
for run in ${ZOO_SETS:-}; do
  IFS=: read -r dtype mode rows budget models <<< "$run"
  flag=$([ "$rows" = infer ] && echo --no-train || echo --no-infer)
  sel=$([ -n "${models:-}" ] && echo "--models $models" || echo "")
  echo "== zoo $run"
  timeout ${ZOO_TIMEOUT:-480} python3 -P zoo.py --device cuda --suite gpu $flag --no-warm \
    --budget $budget --dtype $dtype --mode $mode $sel 2>&1 \
    | grep -v -i "warn\|^\[transformers\]\|autotun\|select_algorithm" \
    | grep -E "(infer|train) +(capture|aot)|geomean|accuracy|Error|error:" | grep -v "error vs"
done >> "$OUT/zoo.txt" 2>&1
cat "$OUT/zoo.txt" 2>/dev/null
for run in ${WARM_RUNS:-}; do
  IFS=: read -r m mode <<< "$run"
  dir=$(mktemp -d)
  for who in ours torch; do
    for pass in cold warm; do
      prof=$([ "${WARM_PROFILE:-}" = 1 ] && [ $who = ours ] && [ $pass = warm ] && echo --profile)
      echo "-- $m $mode $who $pass"
      COLDPROF_DIR=$dir/$who timeout ${WARM_TIMEOUT:-120} \
        python3 -P ../device/coldprof.py $m $mode --which $who $prof > "$OUT/_last.txt" 2>&1
      grep "^==" "$OUT/_last.txt"
      [ -n "$prof" ] && mv "$OUT/_last.txt" "$OUT/warmprof_$m.txt"
    done
  done
done > "$OUT/warm.txt" 2>&1
rm -f "$OUT/_last.txt"
cat "$OUT/warm.txt" 2>/dev/null
