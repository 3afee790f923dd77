"""Running the benchmark's cases (``cases``) on the GPU, KernelBench's way.

For each case every variant (cupy_ops kernels, torch eager, ``torch.compile``) is checked
against torch once and timed in this process on the same inputs: CUDA events, warm-up, an L2
flush before every run, median (p20/p80 kept), all of a case's variants in interleaved rounds.
Bandwidth-bound cases also time a device-to-device copy of the same bytes, the practical
roofline.
"""

from __future__ import annotations

import sys
import time

import torch

from .cases import COMPILED, DTYPES, EAGER, Row, Variant, build_case, cases, fit
from .timing import Stats, time_cuda, time_cuda_interleaved


def run_case(problem, dname, size, *, compile_too: bool, runs: int, max_seconds: float, device="cuda") -> Row:
    """The ``Row`` of one case, every variant checked and timed."""
    dtype = DTYPES[dname]
    itemsize = torch.empty((), dtype=dtype).element_size()
    size, scaled_from = fit(problem, size, itemsize)
    torch.manual_seed(0)
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dname == "tf32"
    try:
        shape, ours, ref, nbytes, flops, copy = build_case(problem, size, dtype, device)
        row = Row(problem, dname, shape, nbytes, flops, scaled_from)
        time_variants(row, ours, ref, copy, compile_too, runs, max_seconds)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    torch.cuda.empty_cache()
    return row


_COPY = object()  # the copy baseline's key among the functions timed together


def _first_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]


def time_variants(row: Row, ours, ref, copy, compile_too: bool, runs: int, max_seconds: float) -> None:
    """Check and time ``ours`` (``[(Variant, fn)]``, or ``{name: fn}``), torch eager (``ref``)
    and, with ``compile_too``, ``torch.compile(ref)`` into ``row``; ``copy`` (a function or
    None): the copy baseline. A variant that fails is recorded with its error, the others
    keep their times."""
    if isinstance(ours, dict):
        ours = [(Variant(name), fn) for name, fn in ours.items()]
    with torch.no_grad():
        expected = ref()
        fns = [*ours, (Variant.of(EAGER), ref)]
        if compile_too:
            torch._dynamo.reset()
            fns.append((Variant.of(COMPILED), torch.compile(ref, dynamic=False)))
        timed = {}
        for v, fn in fns:
            try:
                got = fn()
                v.max_abs_error = (
                    float((got.float() - expected.float()).abs().nan_to_num(nan=float("inf")).max())
                    if got.numel()
                    else 0.0
                )
                v.bitwise_equal = bool(torch.equal(got, expected))
                del got
                timed[v.name] = fn
            except Exception as exc:  # noqa: BLE001  (a failing variant is reported, not fatal)
                v.error = _first_line(exc)
            row.variants.append(v)
        del expected
        if copy is not None:
            timed[_COPY] = copy
        # all variants (and the copy) in interleaved rounds: the ratios of one row are taken
        # under the same GPU conditions
        try:
            stats = time_cuda_interleaved(timed, runs=runs, max_seconds=max_seconds)
        except Exception:  # noqa: BLE001  (find the variant that fails, time the others)
            stats = {}
            for name, fn in timed.items():
                try:
                    stats[name] = time_cuda(fn, runs=runs, max_seconds=max_seconds)
                except Exception as exc:  # noqa: BLE001
                    stats[name] = _first_line(exc)
        for v in row.variants:
            if isinstance(stats.get(v.name), Stats):
                v.stats = stats[v.name]
            elif v.name in stats:
                v.error = stats[v.name]
        row.copy = stats.get(_COPY) if isinstance(stats.get(_COPY), Stats) else None


# GPU work before the first timed case, so that it runs at the clocks the later ones see: a
# fresh H100 machine idles at 345 MHz, and the first rows of a bench started on one spread 3x
# (torch fp32 1024^3: p20 0.086 ms, p80 0.239).
SPIN_UP_SECONDS = 2.0


def spin_up(seconds: float = SPIN_UP_SECONDS, device="cuda") -> None:
    """Keep the GPU busy with matrix products for ``seconds`` (untimed)."""
    a = torch.randn(2048, 2048, device=device)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(20):
            a = torch.tanh(a @ a)
        torch.cuda.synchronize(device)


def run(problems, dtypes, *, quick=False, compile_too=True, runs=100, max_seconds=3.0, log=None) -> list[Row]:
    """The rows of every case of ``problems`` and ``dtypes`` (``cases``), after ``spin_up``;
    ``log(text)``: a line before each case."""
    todo = list(cases(problems, dtypes, quick))
    spin_up()
    rows = []
    for i, (problem, dname, size) in enumerate(todo, 1):
        if log:
            log(f"[{i}/{len(todo)}] {problem} {dname} {size} ...")
        rows.append(run_case(problem, dname, size, compile_too=compile_too, runs=runs, max_seconds=max_seconds))
    return rows


def log_stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
