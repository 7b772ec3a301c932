#!/usr/bin/env bash
# The GPU zoo at realistic sizes in one device call: the Triton tests on CUDA, then
# `zoo.py --suite gpu` (ours vs eager vs torch.compile) for inference, then training of
# ZOO_TRAIN models. Usage: bash tools/device/gpuzoo.sh [dtype]. Carry `.whl`.
set -uo pipefail
source tools/device/install.sh
python3 -m guards.native > /dev/null 2>&1
export PYTHONUNBUFFERED=1
timeout ${TEST_TIMEOUT:-120} python3 -m pytest -n 8 -q -p no:cacheprovider tests/inductor/test_triton_kernels.py \
  tests/inductor/test_triton_programs.py tests/inductor/test_devices.py 2>&1 | tail -15 | tee "$OUT/tests.txt"
cd tools/bench
INDUCTOR_CACHE_DIR=/tmp/ic_inf timeout ${INFER_TIMEOUT:-300} python3 -P zoo.py --device cuda --suite gpu \
  --dtype ${1:-float32} --no-train --no-warm --budget 1.5 ${ZOO_INFER:-} 2>&1 | grep -v -i "warn\|^\[transformers\]" | tee $OUT/zoo_infer.log
INDUCTOR_CACHE_DIR=/tmp/ic_train timeout ${TRAIN_TIMEOUT:-200} python3 -P zoo.py --device cuda --suite gpu \
  --dtype ${1:-float32} --no-warm --no-infer --budget 1.5 --models ${ZOO_TRAIN:-gpt2,resnet50} 2>&1 \
  | grep -v -i "warn\|^\[transformers\]" | tee $OUT/zoo_train.log
