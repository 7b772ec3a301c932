source tools/device/install.sh
export GUARDS_NATIVE=0 PYTHONFAULTHANDLER=1
timeout 90 python3 tools/device/seg2.py "${1:-zeros_like}" 2>&1 | grep -v "^  File\|Extension modules\|^Current\|^Thread\|^$" | tail -45
