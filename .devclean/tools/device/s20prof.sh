#!/usr/bin/env bash
# Session 20: tests, then profiles, each step under its own timeout, outputs in $OUT.
# S20_TESTS: pytest arguments; S20_STEPS: ';'-separated commands run from tools/bench
# (e.g. "python3 ../device/gpuprof.py t5 train --torch --mode reduce-overhead").
# Usage: bash tools/device/s20prof.sh (carry `.whl`).
set -uo pipefail
source tools/device/install.sh >/dev/null 2>&1
export PYTHONUNBUFFERED=1
device_tests "${S20_TESTS:-}"
cd tools/bench
i=0
IFS=';' read -ra steps <<< "${S20_STEPS:-}"
for step in "${steps[@]}"; do
  i=$((i+1))
  echo "== step $i: $step" | tee "$OUT/step_$i.txt"
  timeout ${S20_TIMEOUT:-240} bash -c "$step" >> "$OUT/step_$i.txt" 2>&1
  echo "rc=$?" >> "$OUT/step_$i.txt"
done
