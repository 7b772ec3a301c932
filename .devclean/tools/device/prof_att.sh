# Device run: attention-train profiles on cores 0,1 (steady state, wrapper lines, eager ops),
# packed into $OUT/prof.tgz (the device returns at most 8 files).
source tools/device/install.sh
python3 -m guards.native > /dev/null 2>&1
mkdir -p /tmp/p && cd tools/bench
taskset -c 0,1 python3 _profile_steady.py ${1:-attention} train 30 > /tmp/p/steady.txt 2>&1
taskset -c 0,1 python3 _profile_wrapper.py ${1:-attention} train 80 --source > /tmp/p/wrapper.txt 2>&1
taskset -c 0,1 python3 _profile_eager.py ${1:-attention} train 40 > /tmp/p/eager.txt 2>&1
tar czf $OUT/prof.tgz -C /tmp/p .
head -3 /tmp/p/steady.txt
