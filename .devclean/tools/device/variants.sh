# Device run: single-op micro timings and attention-train steady state under OpenMP /
# compiler-flag variants, plus g++'s vectorization report for the kernels; all on cores 0,1.
source tools/device/install.sh
python3 -m guards.native > /dev/null 2>&1
g++ --version | head -1; g++ -march=native -Q --help=target 2>/dev/null | grep -E "^\s+-march=|prefer-vector-width"
for v in "X=1" "GOMP_SPINCOUNT=0" "INDUCTOR_MARCH_NATIVE=0" "OMP_WAIT_POLICY=active"; do
  echo "== $v micro"; env $v INDUCTOR_CACHE_DIR=/tmp/ic_$RANDOM taskset -c 0,1 python3 tools/bench/_micro.py
done
for v in "X=1" "GOMP_SPINCOUNT=0" "INDUCTOR_MARCH_NATIVE=0"; do
  echo "== $v steady"; env $v taskset -c 0,1 python3 tools/bench/_profile_steady.py attention train 0
done
rm -rf /tmp/icm; INDUCTOR_CACHE_DIR=/tmp/icm taskset -c 0,1 python3 tools/bench/_micro.py > /dev/null 2>&1
for f in $(grep -l "ind_erf(tmp\|ind_exp(tmp" /tmp/icm/*.cpp); do
  g++ -O3 -std=c++17 -fopenmp -march=native -fno-math-errno -fno-trapping-math -ffp-contract=off -c $f -o /tmp/x.o -fopt-info-vec-all 2>&1 | grep "loop vectorized\|couldn't vectorize\|not vectorized:" | grep -v "statement clobbers" | head -6
done
