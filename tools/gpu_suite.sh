#!/usr/bin/env bash
# cupy_ops' GPU suite, run from the repository root on a machine with an NVIDIA GPU. It first
# compiles every built-in kernel variant into the kernel cache (`python -m cupy_ops warm`), then
# runs the steps asked for:
#   tests       pytest over $PYTEST_TARGETS (default: tests; name a folder or files to run a part).
#               It also executes the quickstart notebook: LOGS/quickstart.ipynb is the executed copy.
#               The 20 slowest tests are listed at the end of pytest.log.
#   examples    examples/linear_relu_div.py, relu.py and matmul.py
#   first_call  python -m cupy_ops.bench.first_call: each op's first call in a fresh process
#   bench       python -m cupy_ops.bench: the table (Markdown), every measurement (JSON lines), the plot
# Usage: [OUT=LOGS] bash tools/gpu_suite.sh [tests|examples|first_call|bench|all]...   (default: all)
# Logs and results go to the folder LOGS, $OUT if set, else ./gpu-logs (created if missing):
# gpu.txt (GPU, driver, torch and CuPy versions), pytest.log, examples.log, first_call.json and
# .log, bench.jsonl, bench.md, bench.png and bench.log.
# Environment:
#   CUPY_CACHE_DIR   the kernel cache (default /tmp/cupy_cache)
#   CUPY_OPS_COMMIT  the commit written into the result files, where the tree is not a git
#                    checkout (e.g. CUPY_OPS_COMMIT=$(git rev-parse --short HEAD) from your clone)
#   CUPY_OPS_WHEELS  a folder of wheels (hypothesis, ...) installed first, for a machine that
#                    cannot reach a package index
# Exits non-zero if any step failed.
set -uo pipefail
OUT=${OUT:-./gpu-logs}; mkdir -p "$OUT"
if [ -n "${CUPY_OPS_WHEELS:-}" ]; then
  site=${TMPDIR:-/tmp}/cupy_ops_site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    "$CUPY_OPS_WHEELS"/*.whl && export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy_cache}
export CUPY_OPS_NOTEBOOK_OUT=$OUT/quickstart.ipynb
what=${*:-all}
rc=0
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)" | tee -a "$OUT/gpu.txt"
# every kernel variant compiled up front, in parallel: a fresh machine otherwise spends most of
# a full pytest in NVRTC, one variant at a time
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
      python3 -m cupy_ops.bench --json "$OUT/bench.jsonl" --plot "$OUT/bench.png" --markdown "$OUT/bench.md" 2>&1 \
        | tee "$OUT/bench.log" | tail -60 || rc=1 ;;
  esac
done
exit $rc
