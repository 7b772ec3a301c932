#!/usr/bin/env bash
# Session 15, first GPU call: Triton tests on CUDA, then per-kernel profiles (eager, ours,
# torch.compile) of the GPU zoo's models in PROF_MODELS, with our generated code packed.
# Usage: bash tools/device/s15prof.sh. Carry `.whl`.
set -uo pipefail
source tools/device/install.sh
export PYTHONUNBUFFERED=1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
python3 -m guards.native > /dev/null 2>&1 &
timeout ${TEST_TIMEOUT:-150} python3 -m pytest -n 8 -q -p no:cacheprovider tests/inductor/test_triton_*.py \
  tests/inductor/test_devices.py 2>&1 | tail -40 > "$OUT/tests.txt"
tail -8 "$OUT/tests.txt"
wait
cd tools/bench
for m in ${PROF_MODELS:-gpt2 vit_small mobilenetv3}; do
  INDUCTOR_CACHE_DIR=/tmp/icp_$m timeout ${PROF_TIMEOUT:-100} python3 -P ../device/gpuprof.py $m ${PROF_MODE:-infer} --torch \
    ${PROF_ARGS:-} 2>&1 | grep -v -i "warn\|^\[transformers\]" > "$OUT/prof_$m.txt"
  grep "^==" "$OUT/prof_$m.txt"
done
tar czf "$OUT/code.tgz" /tmp/icp_* 2>/dev/null
timeout ${MM_TIMEOUT:-90} python3 -P mm_templates.py --device cuda 2>&1 | grep -v -i warn | tail -20 | tee "$OUT/mm.txt"
