#!/usr/bin/env bash
# Session 17: GPU zoo rows, eager vs ours vs torch.compile in one process per row set.
# ZOO_RUNS: space-separated "dtype:mode:rows:budget[:models]" (mode default|reduce-overhead,
# rows infer|train), e.g. "float32:default:infer:1.0 bfloat16:reduce-overhead:train:0.6".
# Usage: bash tools/device/s17zoo.sh (carry `.whl`). Outputs $OUT/zoo_<i>_<dtype>_<mode>_<rows>.txt
set -uo pipefail
source tools/device/install.sh >/dev/null 2>&1
export PYTHONUNBUFFERED=1
cd tools/bench
i=0
for run in ${ZOO_RUNS:-float32:default:infer:1.0}; do
  IFS=: read -r dtype mode rows budget models <<< "$run"
  i=$((i+1))
  flag=$([ "$rows" = infer ] && echo --no-train || echo --no-infer)
  sel=$([ -n "${models:-}" ] && echo "--models $models" || echo "")
  out="$OUT/zoo_${i}_${dtype}_${mode}_${rows}.txt"
  timeout ${ZOO_TIMEOUT:-280} python3 -P zoo.py --device cuda --suite gpu $flag --no-warm \
    --budget $budget --dtype $dtype --mode $mode $sel > "$out" 2>&1
  echo "== $dtype $mode $rows (budget $budget) rc=$?"
  grep -v -i "warn\|^\[transformers\]\|autotun\|select_algorithm" "$out" \
    | grep -E "(infer|train) +(capture|aot)|geomean|accuracy|Error|error:" | grep -v "error vs"
done
