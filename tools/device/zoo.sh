# Device run: the zoo alone on cores 0,1 (nothing else running), after building the native
# guard checker (so cold compile times exclude that one-time build).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | grep -v -i warn
export PYTHONPATH=/tmp/site
for p in guards capture aotgrad inductor compiler-api; do
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/ours ./packages/$p 2>&1 | grep -v -i warn
done
export PYTHONPATH=/tmp/site:/tmp/ours:$PWD/tools/bench
python3 -m guards.native > /dev/null 2>&1
INDUCTOR_CACHE_DIR=/tmp/ic_zoo_$RANDOM taskset -c 0,1 python3 -P tools/bench/zoo.py --models "${1:-mlp,attention,lstm,inplace_views,gpt2_tiny,bert_tiny}" > $OUT/zoo.log 2>&1
grep -v -i "warn\|transformers\]" $OUT/zoo.log | tail -20
