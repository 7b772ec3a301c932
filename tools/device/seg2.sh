python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | grep -v -i warn
for p in guards capture aotgrad inductor compiler-api; do
  PYTHONPATH=/tmp/site python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/ours ./packages/$p 2>&1 | grep -v -i warn
done
export PYTHONPATH=/tmp/site:/tmp/ours GUARDS_NATIVE=0
timeout 90 python3 tools/device/seg2.py "${1:-zeros_like}" 2>&1 | grep -v "^  File\|Extension modules\|^Current\|^Thread\|^$" | tail -45
