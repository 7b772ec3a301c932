# Sourced by the device scripts: the carried wheels into /tmp/site and our five packages
# from the working tree into /tmp/ours (non-editable), both on PYTHONPATH with tools/bench.
# Once per call: scripts that run other scripts install first, and the others skip it.
if [ -z "${DEVICE_INSTALLED:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | grep -v -i warn
  for p in guards capture aotgrad inductor compiler-api; do
    PYTHONPATH=/tmp/site python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/ours ./packages/$p 2>&1 | grep -v -i warn
  done
fi
export DEVICE_INSTALLED=1
export PYTHONPATH=/tmp/site:/tmp/ours:$PWD/tools/bench:$PWD/tools/device
# device_tests ARGS: the GPU name, then pytest ARGS (when any) into $OUT/tests.txt, its tail shown.
device_tests() {
  nvidia-smi --query-gpu=name --format=csv,noheader | head -1
  if [ -n "${1:-}" ]; then
    python3 -m pytest -q -p no:cacheprovider $1 > "$OUT/tests.txt" 2>&1
    tail -5 "$OUT/tests.txt"
  fi
}
