"""Autotuning of a user's kernel: configurations of defines, template arguments and block
sizes, pruned from ptxas' figures before any is timed, the winner kept on disk.

    scale = cupy_ops.autotune(SOURCE, "scale",
                              cupy_ops.configs(block=[128, 256, 512], ITEMS=[1, 2, 4]),
                              grid=lambda cfg, x, y, s, n: cupy_ops.cdiv(n, cfg.threads * cfg["ITEMS"]))
    scale(x, y, 2.0, n)              # the first call per shape key tunes; later ones launch the winner
    print(scale.report(x, y, 2.0, n))

For a new shape key (by default the shapes and dtypes of the arrays and the ints passed)
each configuration is compiled offline for the GPU's architecture with ptxas' report
(``compile_offline``); one that spills registers, needs more shared memory than a block may
have, or cannot keep ``min_occupancy`` of an SM's warps resident (estimated from its registers,
threads and shared memory as the occupancy calculator does) is pruned untimed. The others are
timed the bench's way (``cupy_ops.timing``: CUDA events, warm-up, L2 flushed before each run,
interleaved rounds, median) and the fastest is kept, in memory and in the checked disk cache
(``compiler.cache``) under the source text, the configurations, the shape key, the GPU's name,
the driver and NVRTC: a new process takes it from there without timing anything.
``python -m cupy_ops warm --tune FILE.py`` tunes ahead of time every autotuned kernel FILE.py
declares with ``examples=``.
"""

from .configs import Config, Trial, configs, prune_reason, table
from .tuner import Autotuned, Choice, Environment, autotune, declared, tuning_problem

__all__ = [
    "Autotuned",
    "Choice",
    "Config",
    "Environment",
    "Trial",
    "autotune",
    "configs",
    "declared",
    "prune_reason",
    "table",
    "tuning_problem",
]
