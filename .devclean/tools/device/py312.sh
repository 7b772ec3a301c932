#!/usr/bin/env bash
# Python 3.12 check on the device box (torch 2.11): capture, guards, compiler and the
# transformers tests. Carry `.whl` (cp312 wheels: bytecode, hatchling and deps, pytest-xdist,
# execnet, hypothesis, expecttest). Output: $OUT/py312.txt
set -uo pipefail
source tools/device/install.sh
python3 --version
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
python3 -m pytest -n 12 -q -p no:cacheprovider tests/guards tests/capture tests/compiler \
  tests/e2e/test_transformers_models.py 2>&1 | tail -40 | tee "$OUT/py312.txt"
