# Device run: attention-train profiles (cores 0,1, nothing else running), the torch-2.11
# crash per sample, then our inductor conformance (inference, --grad) on cores 2-15.
source tools/device/install.sh
python3 -m guards.native > $OUT/native_build.log 2>&1
lscpu > $OUT/lscpu.txt
cd tools/bench
taskset -c 0,1 python3 _profile_steady.py attention train 30 > $OUT/steady_att.txt 2>&1
taskset -c 0,1 python3 _profile_wrapper.py attention train 60 --source > $OUT/wrapper_att.txt 2>&1
taskset -c 0,1 python3 _profile_eager.py attention train 40 > $OUT/eager_att.txt 2>&1
cd ../..
for op in zeros_like ones_like new_full full_like; do
  PYTHONFAULTHANDLER=1 timeout 60 python3 tools/device/seg2.py $op > $OUT/seg_$op.txt 2>&1; echo "$op rc=$?" >> $OUT/seg_rc.txt
done
cd .devcarry
(INDUCTOR_CACHE_DIR=/tmp/ic1 timeout -s TERM 330 taskset -c 2-8 python3 opinfo_conformance.py --compiler ours --backend inductor -j 7 -o $OUT/ours-ind-f32.json --compare torch-ind-f32.json > $OUT/conf-inf.log 2>&1 &)
(INDUCTOR_CACHE_DIR=/tmp/ic2 timeout -s TERM 330 taskset -c 9-15 python3 opinfo_conformance.py --compiler ours --backend inductor --grad -j 7 -o $OUT/ours-ind-f32-grad.json --compare torch-ind-f32-grad.json > $OUT/conf-grad.log 2>&1 &)
sleep 5
while pgrep -f opinfo_conformance > /dev/null; do sleep 5; done
cat $OUT/seg_rc.txt; head -3 $OUT/steady_att.txt; tail -4 $OUT/conf-inf.log $OUT/conf-grad.log
