# Device run: the zoo alone on cores 0,1 (nothing else running), after building the native
# guard checker (so cold compile times exclude that one-time build).
source tools/device/install.sh
python3 -m guards.native > /dev/null 2>&1
INDUCTOR_CACHE_DIR=/tmp/ic_zoo_$RANDOM taskset -c 0,1 python3 -P tools/bench/zoo.py --models "${1:-mlp,attention,lstm,inplace_views,gpt2_tiny,bert_tiny}" > $OUT/zoo.log 2>&1
grep -v -i "warn\|transformers\]" $OUT/zoo.log | tail -20
