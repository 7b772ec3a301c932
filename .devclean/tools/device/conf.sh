# Device run: our inductor conformance on torch 2.11 (inference on cores 0-7, --grad on
# 8-15), compared with torch.compile's results from the same machine (.devcarry/base), and
# the GPU-only inductor test.
source tools/device/install.sh
python3 -m guards.native > /dev/null 2>&1
python3 -m pytest -q -p no:cacheprovider tests/inductor/test_devices.py 2>&1 | tail -2
cd .devcarry
(INDUCTOR_CACHE_DIR=/tmp/ic1 timeout -s TERM 400 taskset -c 0-7 python3 opinfo_conformance.py --compiler ours --backend inductor -j 8 -o $OUT/ours-ind-f32.json --compare base/torch-ind-f32.json > $OUT/conf-inf.log 2>&1 &)
(INDUCTOR_CACHE_DIR=/tmp/ic2 timeout -s TERM 400 taskset -c 8-15 python3 opinfo_conformance.py --compiler ours --backend inductor --grad -j 8 -o $OUT/ours-ind-f32-grad.json --compare base/torch-ind-f32-grad.json > $OUT/conf-grad.log 2>&1 &)
sleep 5
while pgrep -f opinfo_conformance > /dev/null; do sleep 5; done
for f in $OUT/conf-inf.log $OUT/conf-grad.log; do grep -E "passed|but not here" -A8 $f | grep -v -i warn; done
