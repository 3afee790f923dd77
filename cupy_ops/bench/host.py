"""Host cost per call, beside torch: inference (eager calls on 64x64 tensors, where the GPU is
idle and the host is what is measured), a user's own op (README's ``y = x * s``, declared and
as a bare ``autograd.Function``), training (forward + backward), streams of back-to-back
mid-size GEMMs (512^3 and 1024^3: where a slow host path starves a busy GPU) and the first
call of a fresh process.

Each function is called back to back; the wall time per call (after a final synchronize) is the
host cost, because a 4096-element kernel finishes long before the host can issue the next one.
cupy_ops and torch are interleaved over several rounds (so drifts of the machine hit both alike)
and the median per function is kept. Run it in a fresh process (``python -m cupy_ops.bench.host``):
a process that has run torch.compile and large benchmarks measures slower host paths for
everyone. ``--first-call`` adds the first ``requires_grad`` call and the first ``ModelNew``
forward of fresh processes (the kernel cache warm: run ``python -m cupy_ops warm`` first).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

from .timing import gpu_problem

SIDE = 64  # 64 x 64 = 4096 elements (results.HOST_NUMEL)


def per_call_us(fn, calls: int = 2000, repeats: int = 7) -> float:
    for _ in range(min(200, calls)):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples)


_SCALE_SRC = r"""
template <class T>
__global__ void scale(const T* x, T* y, float s, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = from_float<T>(to_float(x[i]) * s);
}"""


def _user_op():
    """README's "Your own op" (``y = x * s`` as a declared op) and the same kernel behind a bare
    ``torch.autograd.Function``: what a user's op costs beside torch's ``x * s``."""
    import cupy_ops

    kernel = cupy_ops.Kernel(_SCALE_SRC, "scale")

    def launch(x, y, s):
        kernel(x, y, s, x.numel(), grid=cupy_ops.cdiv(x.numel(), 256), block=256)

    @cupy_ops.op("cupy_ops_bench::scale", output=cupy_ops.like("x"))
    def scale(x: torch.Tensor, s: float, *, out: torch.Tensor) -> None:
        launch(x, out, s)

    @scale.backward(save=("s",))
    def _(ctx, grad):
        return scale(grad, ctx.s), None

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, s):
            ctx.s = s
            y = torch.empty_like(x)
            launch(x, y, s)
            return y

        @staticmethod
        def backward(ctx, grad):
            g = torch.empty_like(grad)
            launch(grad.contiguous(), g, ctx.s)
            return g, None

    return scale, Scale.apply


# Back-to-back GEMMs large enough that the GPU works (9 us for 1024^3 in bf16 on an H100) and
# small enough that a slow host path shows: what a model's stream of mid-size layers meets.
STREAM_SIDES = (512, 1024)


def _pairs() -> dict[str, tuple]:
    """``{row: (cupy_ops call, torch call, calls per sample)}``; a row whose name says TF32 runs
    with ``torch.backends.cuda.matmul.allow_tf32`` on (``measure``)."""
    import torch.nn.functional as F

    import cupy_ops
    from cupy_ops.models import linear_relu_div as lrd

    x = torch.randn(SIDE, SIDE, device="cuda")
    xb, w, b = x.bfloat16(), torch.randn(SIDE, SIDE, device="cuda"), torch.randn(SIDE, device="cuda")
    xh = x.half()
    xb3 = torch.randn(32, SIDE, SIDE, device="cuda", dtype=torch.bfloat16)  # torch.bmm's shape
    xg, wg, bg = (t.clone().requires_grad_() for t in (x, w, b))
    g = torch.ones(SIDE, SIDE, device="cuda")
    torch.manual_seed(0)
    ref = lrd.Model(SIDE, SIDE, 2.0).cuda()
    torch.manual_seed(0)
    new = lrd.ModelNew(SIDE, SIDE, 2.0).cuda()
    scale, scale_fn = _user_op()
    pairs = {
        "relu": (lambda: cupy_ops.relu(x), lambda: torch.relu(x), 2000),
        "relu_div / torch.relu(x) / 2": (lambda: cupy_ops.relu_div(x, 2.0), lambda: torch.relu(x) / 2.0, 2000),
        "matmul fp32": (lambda: cupy_ops.matmul(x, w), lambda: torch.matmul(x, w), 2000),
        "matmul bf16": (lambda: cupy_ops.matmul(xb, xb), lambda: torch.matmul(xb, xb), 2000),
        "matmul fp16": (lambda: cupy_ops.matmul(xh, xh), lambda: torch.matmul(xh, xh), 2000),
        "matmul bf16, batch of 32": (lambda: cupy_ops.matmul(xb3, xb3), lambda: torch.matmul(xb3, xb3), 2000),
        # the fp32-accurate path's host cost: its split pass, three products, workspace
        "matmul fp32, algo='fp16x3' / torch fp32": (
            lambda: cupy_ops.matmul(x, w, algo="fp16x3"),
            lambda: torch.matmul(x, w),
            1000,
        ),
        "linear_relu_div / relu(F.linear) / 2": (
            lambda: cupy_ops.linear_relu_div(x, w, b, 2.0),
            lambda: torch.relu(F.linear(x, w, b)) / 2.0,
            2000,
        ),
        "user op y = x * s / x * s": (lambda: scale(x, 2.0), lambda: x * 2.0, 2000),
        "user op as a bare autograd.Function / x * s": (lambda: scale_fn(x, 2.0), lambda: x * 2.0, 2000),
        "training: relu forward + backward": (
            lambda: cupy_ops.relu(xg).backward(g),
            lambda: torch.relu(xg).backward(g),
            300,
        ),
        "training: linear_relu_div forward + backward": (
            lambda: cupy_ops.linear_relu_div(xg, wg, bg, 2.0).backward(g),
            lambda: (torch.relu(F.linear(xg, wg, bg)) / 2.0).backward(g),
            300,
        ),
        "training: user op forward + backward": (
            lambda: scale(xg, 2.0).backward(g),
            lambda: (xg * 2.0).backward(g),
            300,
        ),
        "training: bare autograd.Function fwd + bwd / torch": (
            lambda: scale_fn(xg, 2.0).backward(g),
            lambda: (xg * 2.0).backward(g),
            300,
        ),
        "ModelNew / Model forward, grad mode on": (lambda: new(x), lambda: ref(x), 300),
    }
    for side in STREAM_SIDES:
        for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("TF32", torch.float32)):
            p, q = (torch.randn(side, side, device="cuda", dtype=dtype) for _ in range(2))
            pairs[f"back-to-back matmul {side}^3 {name}"] = (
                lambda p=p, q=q: cupy_ops.matmul(p, q),
                lambda p=p, q=q: torch.matmul(p, q),
                500,
            )
    if torch.cuda.get_device_capability()[0] != 9:  # fp16x3 runs on Hopper only
        pairs = {k: v for k, v in pairs.items() if "fp16x3" not in k}
    return pairs


def measure(rounds: int = 7) -> dict[str, float]:
    """Microseconds per call, ``{"<row>: cupy_ops": us, "<row>: torch": us}``."""
    pairs = _pairs()
    samples: dict[str, list[float]] = {}
    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for _ in range(rounds):
            for row, (ours, theirs, calls) in pairs.items():
                torch.backends.cuda.matmul.allow_tf32 = "TF32" in row
                samples.setdefault(f"{row}: cupy_ops", []).append(per_call_us(ours, calls, repeats=1))
                samples.setdefault(f"{row}: torch", []).append(per_call_us(theirs, calls, repeats=1))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return {k: statistics.median(v) for k, v in samples.items()}


_FIRST = r"""
import time, sys
import torch
x = torch.randn(64, 64, device="cuda", requires_grad=True); torch.cuda.synchronize()
t0 = time.perf_counter()
import cupy_ops
cupy_ops.relu(x).sum().backward(); torch.cuda.synchronize()
t1 = time.perf_counter()
from cupy_ops.models import linear_relu_div as m
torch.manual_seed(42); model = m.ModelNew(*m.get_init_inputs()).cuda(); inp = m.get_inputs()[0].cuda()
torch.cuda.synchronize()
t2 = time.perf_counter()
model(inp); torch.cuda.synchronize()
t3 = time.perf_counter()
print((t1 - t0) * 1e6, (t3 - t2) * 1e6, int("torch._dynamo" in sys.modules))
"""


def first_calls(processes: int = 2) -> dict[str, float]:
    """The first calls of fresh processes (us, the slowest of ``processes``): ``import cupy_ops``
    and a relu forward + backward with ``requires_grad``, and ModelNew's (level2/63) first forward."""
    got = []
    for _ in range(processes):
        out = subprocess.run([sys.executable, "-c", _FIRST], capture_output=True, text=True, timeout=600, check=True)
        got.append([float(v) for v in out.stdout.split()])
    return {
        "first call: import + relu forward + backward with requires_grad": max(g[0] for g in got),
        "first call: ModelNew (level2/63) forward": max(g[1] for g in got),
        "first call: imports torch._dynamo (0 / 1)": max(g[2] for g in got),
    }


def format_table(us: dict[str, float]) -> str:
    lines = [f"  {'call':<52} {'cupy_ops us':>11} {'torch us':>9} {'ratio':>6}"]
    for key, v in us.items():
        if key.endswith(": cupy_ops"):
            row = key[: -len(": cupy_ops")]
            t = us.get(f"{row}: torch")
            lines.append(f"  {row:<52} {v:11.2f} {t:9.2f} {v / t:5.2f}x" if t else f"  {row:<52} {v:11.2f}")
        elif key.startswith("first call"):
            shown = f"{v / 1e6:10.3f} s" if "imports" not in key else f"{'yes' if v else 'no':>11}"
            lines.append(f"  {key:<52} {shown}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m cupy_ops.bench.host", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds; the median is kept (default 7)")
    p.add_argument("--first-call", action="store_true", help="also time the first calls of fresh processes")
    p.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    p.add_argument("--results", metavar="PATH", help="append the figures to a benchmark results file (JSON lines)")
    args = p.parse_args(argv)
    problem = gpu_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    result = measure(args.rounds)
    if args.first_call:
        result.update(first_calls())
    if not args.json:
        print(
            f"{torch.cuda.get_device_name()}, torch {torch.__version__}: host cost per call (64 x 64 float32 unless "
            f"named), median of {args.rounds} interleaved rounds"
        )
    print(json.dumps(result) if args.json else format_table(result))
    if args.results:
        from .env import environment
        from .results import append, to_records

        append(args.results, to_records([], environment(), result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
