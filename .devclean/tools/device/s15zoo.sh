#!/usr/bin/env bash
# Session 15: Triton tests on CUDA, host profiles (cpuprof.py) of CPU_MODELS, then the GPU zoo
# (ours vs eager vs torch.compile) for ZOO_MODELS in one (mode, dtype): ZOO_ARGS.
# Usage: bash tools/device/s15zoo.sh. Carry `.whl`.
set -uo pipefail
source tools/device/install.sh
export PYTHONUNBUFFERED=1
python3 -m guards.native > /dev/null 2>&1 &
if [ -n "${TESTS:-1}" ]; then
  timeout ${TEST_TIMEOUT:-150} python3 -m pytest -n 8 -q -p no:cacheprovider tests/inductor/test_triton_*.py \
    tests/inductor/test_devices.py tests/inductor/test_bias_unfuse.py ${TEST_EXTRA:-} 2>&1 | tail -40 > "$OUT/tests.txt"
  grep -E "passed|failed|FAILED|Error" "$OUT/tests.txt" | tail -12
fi
wait
cd tools/bench
for m in ${CPU_MODELS:-}; do
  INDUCTOR_CACHE_DIR=/tmp/icc_$m timeout ${CPU_TIMEOUT:-90} python3 -P ../device/cpuprof.py $m ${CPU_MODE:-infer} \
    > "$OUT/cpu_$m.txt" 2>&1
  grep "^==" "$OUT/cpu_$m.txt"; head -14 "$OUT/cpu_$m.txt" | tail -6
done
INDUCTOR_CACHE_DIR=/tmp/ic_zoo timeout ${ZOO_TIMEOUT:-330} python3 -P zoo.py --device cuda --suite gpu \
  ${ZOO_MODELS:+--models $ZOO_MODELS} ${ZOO_ARGS:---no-train --no-warm --budget 1.5} 2>&1 \
  | grep -v -i "warn\|^\[transformers\]\|autotun\|select_algorithm" > "$OUT/zoo.log"
tail -30 "$OUT/zoo.log"
