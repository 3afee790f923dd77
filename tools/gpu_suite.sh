#!/usr/bin/env bash
# Run on a GPU machine: full pytest (which executes the quickstart notebook: $OUT/quickstart.ipynb
# is the executed copy to commit), the examples, the benchmarks (table, JSON lines and plot) and
# the first-call figures. Logs go to $OUT (or ./gpu_out).
# Usage: bash tools/gpu_suite.sh [tests|examples|bench|first_call|all]...
# Wheels the GPU machine lacks (hypothesis, ...) are installed from ./.whl when it exists.
# CUPY_OPS_COMMIT names the commit in the result files: set it from your own checkout
# (CUPY_OPS_COMMIT=$(git rev-parse --short HEAD), expanded before the command is sent), as the
# git metadata of a synced copy can be older than its files.
# PYTEST_TARGETS (default: tests) picks what `tests` runs, e.g. half of the files where one
# command may run only 10 minutes: the whole suite takes ~560 s on 2 x H100 after the warm step.
# The 20 slowest tests are listed at the end of pytest.log.
set -uo pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy_cache}
export CUPY_OPS_NOTEBOOK_OUT=$OUT/quickstart.ipynb
what=${*:-all}
rc=0
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)" | tee -a "$OUT/gpu.txt"
# every kernel variant compiled up front, in parallel: a fresh machine otherwise spends most of
# a full pytest in NVRTC, one variant at a time (past 10 minutes on an H100)
python3 -m cupy_ops warm --jobs 16 || rc=1
for step in $what; do
  case $step in
    tests|all)
      # shellcheck disable=SC2086  # PYTEST_TARGETS is a list of paths
      python3 -m pytest -q -ra -p no:cacheprovider --durations=20 ${PYTEST_TARGETS:-tests} 2>&1 \
        | tee "$OUT/pytest.log" | tail -50 || rc=1 ;;&
    examples|all)
      { python3 examples/linear_relu_div.py && python3 examples/relu.py && python3 examples/matmul.py; } \
        2>&1 | tee "$OUT/examples.log" | grep -v "^  " || rc=1 ;;&
    first_call|all)
      python3 -m cupy_ops.bench.first_call --json "$OUT/first_call.json" 2>&1 | tee "$OUT/first_call.log" || rc=1 ;;&
    bench|all)
      python3 -m cupy_ops.bench --json "$OUT/bench.jsonl" --plot "$OUT/bench.png" --markdown "$OUT/bench.md" 2>&1 | tee "$OUT/bench.log" | tail -60 || rc=1 ;;
  esac
done
exit $rc
