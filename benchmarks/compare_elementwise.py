"""Experiment (GPU): the elementwise rows of the benchmark suite at chosen sizes, for comparing
two checkouts on one machine (run it once per checkout, with that checkout on PYTHONPATH).

    PYTHONPATH=. python benchmarks/compare_elementwise.py [rows x cols ...]   (default 1024x8192 4096x65536)
"""
import sys

from cupy_ops.bench import suite

sizes = [tuple(map(int, s.split("x"))) for s in sys.argv[1:]] or [(1024, 8192), (4096, 65536)]
rows = [suite.run_case(p, d, s, compile_too=False, runs=60, max_seconds=2.0)
        for p in ("relu", "relu_div") for d in ("float32", "bfloat16") for s in sizes]
print(suite.format_rows(rows))
