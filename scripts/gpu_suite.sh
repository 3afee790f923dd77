#!/usr/bin/env bash
# Run on the GPU machine (the device tool): full pytest, the examples, and the benchmarks.
# Logs go to $OUT (or ./gpu_out). Usage: bash scripts/gpu_suite.sh [tests|examples|bench|all]...
set -uo pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy_cache}
what=${*:-all}
rc=0
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)" | tee -a "$OUT/gpu.txt"
for step in $what; do
  case $step in
    tests|all)
      python3 -m pytest -q -ra -p no:cacheprovider tests 2>&1 | tee "$OUT/pytest.log" | tail -25 || rc=1 ;;&
    examples|all)
      { python3 examples/linear_relu_div.py && python3 examples/relu.py && python3 examples/matmul.py; } \
        2>&1 | tee "$OUT/examples.log" | grep -v "^  " || rc=1 ;;&
    bench|all)
      python3 -m cupy_ops.bench --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | tail -60 || rc=1 ;;
  esac
done
exit $rc
