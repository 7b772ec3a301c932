#!/usr/bin/env bash
# Session 18: GPU zoo row sets in parallel, one per GPU of a multi-GPU box (eager vs ours vs
# torch.compile in one process per row set, so each set's ratios come from one GPU).
# ZOO_RUNS: space-separated "dtype:mode:rows:budget[:models]" as in s17zoo.sh; the i-th set
# runs on GPU ZOO_GPU0+i (CUDA_VISIBLE_DEVICES; ZOO_GPU0 defaults to 0). ZOO_TESTS: pytest
# arguments run first on GPU ZOO_GPU0.
# Usage: bash tools/device/s18zoo.sh (carry `.whl`). Outputs $OUT/zoo_<i>_<dtype>_<mode>_<rows>.txt
set -uo pipefail
source tools/device/install.sh >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
if [ -n "${ZOO_TESTS:-}" ]; then
  CUDA_VISIBLE_DEVICES=${ZOO_GPU0:-0} python3 -m pytest -q -p no:cacheprovider $ZOO_TESTS > "$OUT/tests.txt" 2>&1
  tail -3 "$OUT/tests.txt"
fi
cd tools/bench
i=0
for run in ${ZOO_RUNS:-float32:default:infer:1.0}; do
  IFS=: read -r dtype mode rows budget models <<< "$run"
  flag=$([ "$rows" = infer ] && echo --no-train || echo --no-infer)
  sel=$([ -n "${models:-}" ] && echo "--models $models" || echo "")
  out="$OUT/zoo_${i}_${dtype}_${mode}_${rows}.txt"
  CUDA_VISIBLE_DEVICES=$((i + ${ZOO_GPU0:-0})) timeout ${ZOO_TIMEOUT:-480} python3 -P zoo.py --device cuda --suite gpu \
    $flag --no-warm --budget $budget --dtype $dtype --mode $mode $sel > "$out" 2>&1 &
  i=$((i+1))
done
wait
for f in "$OUT"/zoo_*.txt; do
  echo "== $(basename "$f")"
  grep -v -i "warn\|^\[transformers\]\|autotun\|select_algorithm" "$f" \
    | grep -E "(infer|train) +(capture|aot)|geomean|accuracy|Error|error:" | grep -v "error vs"
done
