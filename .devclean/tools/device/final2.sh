# Device run: zoo on cores 0,1; our inductor conformance (inference, --grad) on cores 2-15.
source tools/device/install.sh
python3 -m guards.native > $OUT/native_build.log 2>&1 || echo "no guards.native main" >> $OUT/native_build.log
cd .devcarry
(INDUCTOR_CACHE_DIR=/tmp/ic1 timeout -s TERM 500 taskset -c 2-8 python3 opinfo_conformance.py --compiler ours --backend inductor -j 6 -o $OUT/ours-ind-f32.json > $OUT/conf-inf.log 2>&1 &)
(INDUCTOR_CACHE_DIR=/tmp/ic2 timeout -s TERM 500 taskset -c 9-15 python3 opinfo_conformance.py --compiler ours --backend inductor --grad -j 6 -o $OUT/ours-ind-f32-grad.json > $OUT/conf-grad.log 2>&1 &)
cd ..
INDUCTOR_CACHE_DIR=/tmp/ic taskset -c 0,1 python3 -P tools/bench/zoo.py --models "$1" > $OUT/zoo.log 2>&1
while pgrep -f opinfo_conformance > /dev/null; do sleep 5; done
