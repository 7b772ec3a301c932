# Sourced by the device scripts: the carried wheels into /tmp/site and our five packages
# from the working tree into /tmp/ours (non-editable), both on PYTHONPATH with tools/bench.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | grep -v -i warn
export PYTHONPATH=/tmp/site
for p in guards capture aotgrad inductor compiler-api; do
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/ours ./packages/$p 2>&1 | grep -v -i warn
done
export PYTHONPATH=/tmp/site:/tmp/ours:$PWD/tools/bench:$PWD/tools/device
