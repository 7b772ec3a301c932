# Device run: zoo (cores 0,1) and guards bench (core 4), our packages from the working tree.
source tools/device/install.sh
nproc; g++ --version | head -1; python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
(GUARDS_CACHE_DIR=/tmp/gc taskset -c 4,5 python3 -P tools/bench/run.py guards > $OUT/guards.log 2>&1; taskset -c 4 python3 -P tools/bench/run.py guards >> $OUT/guards.log 2>&1) &
INDUCTOR_CACHE_DIR=/tmp/ic taskset -c 0,1 python3 -P tools/bench/zoo.py --models "$1" > $OUT/zoo.log 2>&1
wait
