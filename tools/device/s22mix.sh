#!/usr/bin/env bash
# Session 22: GPU 0 runs tests then ';'-separated profile steps (as s20prof.sh) while GPUs
# 1.. run zoo row sets (as s18zoo.sh), all in one call on a multi-GPU box.
# MIX_TESTS: pytest arguments; MIX_STEPS: steps run from tools/bench on GPU 0;
# MIX_RUNS: "dtype:mode:rows:budget[:models]" row sets, the i-th on GPU i+1.
# Usage: bash tools/device/s22mix.sh (carry `.whl`). Outputs in $OUT.
set -uo pipefail
source tools/device/install.sh >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
cd tools/bench
i=1
for run in ${MIX_RUNS:-}; do
  IFS=: read -r dtype mode rows budget models <<< "$run"
  flag=$([ "$rows" = infer ] && echo --no-train || echo --no-infer)
  sel=$([ -n "${models:-}" ] && echo "--models $models" || echo "")
  out="$OUT/zoo_${i}_${dtype}_${mode}_${rows}.txt"
  CUDA_VISIBLE_DEVICES=$i timeout ${ZOO_TIMEOUT:-480} python3 -P zoo.py --device cuda --suite gpu \
    $flag --no-warm --budget $budget --dtype $dtype --mode $mode $sel > "$out" 2>&1 &
  i=$((i+1))
done
cd ../..
export CUDA_VISIBLE_DEVICES=0
if [ -n "${MIX_TESTS:-}" ]; then
  python3 -m pytest -q -p no:cacheprovider $MIX_TESTS > "$OUT/tests.txt" 2>&1
  tail -5 "$OUT/tests.txt"
fi
cd tools/bench
j=0
IFS=';' read -ra steps <<< "${MIX_STEPS:-}"
for step in "${steps[@]}"; do
  j=$((j+1))
  echo "== step $j: $step" | tee "$OUT/step_$j.txt"
  timeout ${MIX_TIMEOUT:-240} bash -c "$step" >> "$OUT/step_$j.txt" 2>&1
  echo "rc=$?" >> "$OUT/step_$j.txt"
done
wait
for f in "$OUT"/zoo_*.txt; do
  [ -e "$f" ] || continue
  echo "== $(basename "$f")"
  grep -v -i "warn\|^\[transformers\]\|autotun\|select_algorithm" "$f" \
    | grep -E "(infer|train) +(capture|aot)|geomean|accuracy|Error|error:" | grep -v "error vs"
done
