#!/usr/bin/env bash
# Triton target on the GPU box: the Triton tests on CUDA, then the zoo on the GPU.
# Usage: bash tools/device/triton.sh [tests|zoo|both] [models]. Carry `.whl`.
set -uo pipefail
source tools/device/install.sh
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
what=${1:-both}
if [ "$what" != zoo ]; then
  timeout ${TEST_TIMEOUT:-300} python3 -m pytest -n 8 -q -p no:cacheprovider tests/inductor/test_triton_*.py \
    tests/inductor/test_devices.py ${TEST_EXTRA:-} 2>&1 | tail -60 | tee "$OUT/tests.txt"
fi
if [ "$what" != tests ]; then
  python3 -m guards.native > /dev/null 2>&1
  INDUCTOR_CACHE_DIR=/tmp/ic_zoo_$RANDOM timeout ${ZOO_TIMEOUT:-400} python3 -P tools/bench/zoo.py --device cuda \
    --models "${2:-mlp,attention,gpt2_tiny,bert_tiny}" ${ZOO_ARGS:-} > $OUT/zoo.log 2>&1
  grep -v -i "warn\|transformers\]" $OUT/zoo.log | tail -30
fi
