source tools/device/install.sh
export PYTHONFAULTHANDLER=1
cd .devcarry
for n in 0 sync; do echo "== GUARDS_NATIVE=$n inductor"; GUARDS_NATIVE=$n timeout 120 python3 opinfo_conformance.py --compiler ours --backend inductor --ops '^(zeros_like|new_ones)$' -j 1 --verbose -o /tmp/a$n.json 2>&1 | grep -v -i "warn" | tail -30; done
echo "== aot_eager"; timeout 100 python3 opinfo_conformance.py --compiler ours --backend aot_eager --ops '^(zeros_like)$' -j 1 -o /tmp/b.json 2>&1 | tail -3
echo "== grad aot_eager"; timeout 150 python3 opinfo_conformance.py --compiler ours --backend aot_eager --grad --ops '^(fft.irfft|index_fill|masked.softmax)$' -j 3 -o /tmp/c.json 2>&1 | tail -8
echo "== grad inductor"; timeout 150 python3 opinfo_conformance.py --compiler ours --backend inductor --grad --ops '^(fft.irfft|index_fill|masked.softmax)$' -j 3 -o /tmp/d.json 2>&1 | tail -8
