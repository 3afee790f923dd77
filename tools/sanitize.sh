#!/usr/bin/env bash
# compute-sanitizer over every cupy_ops kernel variant (tools/sanitize_program.py), run from the
# repository root on a machine with an NVIDIA GPU and compute-sanitizer: memcheck, racecheck
# (shared-memory hazards) and initcheck. Every kernel of the program is checked (torch's too: they
# only make and copy the inputs). Prints one summary line per tool; exits non-zero if any tool
# reports an error or does not finish within $SANITIZE_TIMEOUT seconds (default 240).
# Usage: [OUT=LOGS] bash tools/sanitize.sh
# Logs go to the folder LOGS, $OUT if set, else ./gpu-logs: sanitizer_<tool>.log.
set -uo pipefail
OUT=${OUT:-./gpu-logs}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy_cache}
python3 tools/sanitize_program.py > /dev/null   # compile (and cache) outside the sanitizer
rc=0
for tool in memcheck racecheck initcheck; do
  timeout "${SANITIZE_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
    python3 tools/sanitize_program.py > "$OUT/sanitizer_$tool.log" 2>&1
  status=$?
  summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer_$tool.log" | tail -1)
  echo "$tool: exit $status; ${summary:-no summary line (see $OUT/sanitizer_$tool.log)}"
  [ $status -eq 0 ] || rc=1
done
exit $rc
