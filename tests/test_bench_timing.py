"""The benchmark's timing (cupy_ops.bench.timing, running): interleaved rounds give every
function its runs and order functions by their GPU time; a slow function sits out the rounds
past its time budget; a variant that fails while being timed is reported as an error and the
other variants of the row keep their times."""

import pytest
import torch

from cupy_ops.bench import cases, running
from cupy_ops.bench.timing import time_cuda_interleaved

pytestmark = pytest.mark.gpu

CYCLES = 200_000  # torch.cuda._sleep: ~0.1 ms of spinning on an H100 at its boost clock


def test_interleaved_rounds_time_every_function_and_order_them(cuda):
    short = lambda: torch.cuda._sleep(CYCLES)  # noqa: E731
    long = lambda: torch.cuda._sleep(4 * CYCLES)  # noqa: E731
    stats = time_cuda_interleaved({"short": short, "long": long}, runs=20, rounds=4, flush_l2=False)
    assert set(stats) == {"short", "long"}
    assert stats["short"].runs == stats["long"].runs == 20
    assert 3.0 < stats["long"].median / stats["short"].median < 5.0
    assert stats["short"].p20 <= stats["short"].median <= stats["short"].p80


def test_a_function_past_its_time_budget_sits_out_later_rounds(cuda):
    slow = lambda: torch.cuda._sleep(100 * CYCLES)  # noqa: E731  (~10 ms a call)
    fast = lambda: torch.cuda._sleep(CYCLES)  # noqa: E731
    stats = time_cuda_interleaved(
        {"slow": slow, "fast": fast}, runs=50, rounds=5, max_seconds=0.05, min_runs=3, flush_l2=False
    )
    assert 3 <= stats["slow"].runs < 50
    assert stats["fast"].runs >= 3


def test_a_variant_failing_while_timed_is_an_error_and_the_others_keep_their_times(cuda):
    x = torch.randn(1000, device=cuda)
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] > 1:  # right the first time (the error check), then fails
            raise RuntimeError("broke while timed")
        return torch.relu(x)

    row = cases.Row("relu", "float32", "1000", 8000, 0, None)
    running.time_variants(
        row,
        {"flaky": flaky, "good": lambda: torch.relu(x)},
        lambda: torch.relu(x),
        lambda: x.clone(),
        compile_too=False,
        runs=10,
        max_seconds=1.0,
    )
    by_name = {v.name: v for v in row.variants}
    assert by_name["flaky"].stats is None and "broke while timed" in by_name["flaky"].error
    assert by_name["good"].stats is not None and by_name["good"].error is None
    assert by_name["torch eager"].stats is not None and row.copy is not None
