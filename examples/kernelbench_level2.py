"""KernelBench level 2: a GEMM and its elementwise chain as one kernel, by declaration.

Six problems (12, 29, 70, 76, 86, 99). Each ``ModelNew`` replaces the ``nn.Linear`` and the
chain after it with ``cupy_ops.linear(..., epilogue=...)``: the chain, written in CUDA C for
one element, runs in the GEMM's store. Each is checked against its ``Model`` (same weights:
KernelBench's seed; KernelBench's tolerance on ``torch.rand`` and ``torch.randn`` inputs; error
against float64 at most torch's own) and timed against torch eager and ``torch.compile`` of
``Model`` in one process (CUDA events, warm-up, L2 flush, median of interleaved rounds). Exits
1 if any is wrong.

    python examples/kernelbench_level2.py                     # fp32 ("accurate") and bf16
    python examples/kernelbench_level2.py --dtype bfloat16 --problems 12 76 --batch-size 256
"""

import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

import cupy_ops
from cupy_ops.bench import gpu_problem
from cupy_ops.bench.env import environment
from cupy_ops.bench.results import LEVEL2, append, record
from cupy_ops.timing import time_cuda_interleaved

# --- the epilogues: one output element, v = the Linear's output (rounded to the dtype) -------
# round_out(x): x rounded to the dtype as torch rounds each op's result (float32: kept apart
# from the next op, which the compiler would otherwise fuse into one FMA)
MULTIPLY_LEAKY_RELU = cupy_ops.epilogue(
    """__device__ acc_t apply(acc_t v, acc_t multiplier, acc_t slope) {
         v = round_out(v * multiplier);
         return v > 0 ? v : v * slope; }""",
    scalars=("multiplier", "slope"),
    derivative="""__device__ acc_t grad(acc_t v, acc_t multiplier, acc_t slope) {
         return round_out(v * multiplier) > 0 ? multiplier : multiplier * slope; }""",
    name="multiply_leaky_relu",
)
MISH_MISH = cupy_ops.epilogue(
    # tanh(log1p(e^x)) = t / (t + 2) with t = e^x (e^x + 2): one exp instead of exp, log1p and
    # tanh (past x = 20 it is 1 in float32, and t would overflow)
    """__device__ acc_t mish(acc_t x) { acc_t e = exp(x), t = e * (e + 2); return x > 20 ? x : x * (t / (t + 2)); }
       __device__ acc_t apply(acc_t v) { return mish(round_out(mish(v))); }""",
    name="mish_mish",
)
SIGMOID_SCALE_RESIDUAL = cupy_ops.epilogue(
    """__device__ acc_t apply(acc_t v, acc_t scaling) {
         acc_t s = round_out(acc_t(1) / (acc_t(1) + exp(-v)));
         return round_out(s * scaling) + v; }""",
    scalars=("scaling",),
    name="sigmoid_scale_residual",
)
ADD_RELU = cupy_ops.epilogue(
    """__device__ acc_t apply(acc_t v, acc_t bias2) {
         v = round_out(v + bias2);
         return v > 0 || v != v ? v : acc_t(0); }""",
    columns=("bias2",),
    name="add_relu",
)
GELU = """__device__ acc_t gelu(acc_t x) {
              return x * acc_t(0.5) * (acc_t(1) + erf(x * acc_t(0.70710678118654752440))); }"""
DIVIDE_GELU = cupy_ops.epilogue(
    GELU + "\n__device__ acc_t apply(acc_t v, acc_t inv) { return gelu(round_out(v * inv)); }",
    scalars=("inv",),
    name="divide_gelu",
)
GELU_ONLY = cupy_ops.epilogue(GELU + "\n__device__ acc_t apply(acc_t v) { return gelu(v); }", name="gelu")


def algo(x):  # float32 at float32's accuracy; 16-bit on the tensor cores
    return "accurate" if x.dtype == torch.float32 else "auto"


# --- 12: Gemm_Multiply_LeakyReLU --------------------------------------------------------------
class Model12(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier, self.leaky_relu = multiplier, nn.LeakyReLU(negative_slope)

    def forward(self, x):
        return self.leaky_relu(self.gemm(x) * self.multiplier)


class ModelNew12(Model12):
    def forward(self, x):
        mult, slope = self.multiplier, self.leaky_relu.negative_slope
        return cupy_ops.linear(x, self.gemm.weight, self.gemm.bias, epilogue=MULTIPLY_LEAKY_RELU, algo=algo(x),
                               multiplier=mult, slope=slope)  # fmt: skip


# --- 29: Matmul_Mish_Mish ---------------------------------------------------------------------
class Model29(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return F.mish(F.mish(self.linear(x)))


class ModelNew29(Model29):
    def forward(self, x):
        return cupy_ops.linear(x, self.linear.weight, self.linear.bias, epilogue=MISH_MISH, algo=algo(x))


# --- 70: Gemm_Sigmoid_Scaling_ResidualAdd -----------------------------------------------------
class Model70(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(input_size, hidden_size)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.gemm(x)
        return torch.sigmoid(x) * self.scaling_factor + x


class ModelNew70(Model70):
    def forward(self, x):
        return cupy_ops.linear(x, self.gemm.weight, self.gemm.bias, epilogue=SIGMOID_SCALE_RESIDUAL, algo=algo(x),
                               scaling=self.scaling_factor)  # fmt: skip


# --- 76: Gemm_Add_ReLU ------------------------------------------------------------------------
class Model76(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(self.gemm(x) + self.bias)


class ModelNew76(Model76):
    def forward(self, x):
        return cupy_ops.linear(x, self.gemm.weight, None, epilogue=ADD_RELU, algo=algo(x), bias2=self.bias)


# --- 86: Matmul_Divide_GELU -------------------------------------------------------------------
class Model86(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        return F.gelu(self.linear(x) / self.divisor)


class ModelNew86(Model86):
    def forward(self, x):
        inv = 1.0 / self.divisor  # torch divides by a number as a multiply by its reciprocal
        return cupy_ops.linear(x, self.linear.weight, self.linear.bias, epilogue=DIVIDE_GELU, algo=algo(x), inv=inv)


# --- 99: Matmul_GELU_Softmax (the softmax: a row reduction after the epilogue) ----------------
class Model99(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return F.softmax(F.gelu(self.linear(x)), dim=1)


class ModelNew99(Model99):
    def forward(self, x):
        w, b = self.linear.weight, self.linear.bias
        return cupy_ops.linear(x, w, b, epilogue=GELU_ONLY, algo=algo(x), reduce="softmax")


# problem -> (name, Model, ModelNew, init arguments after (in, out))
PROBLEMS = {
    12: ("Gemm_Multiply_LeakyReLU", Model12, ModelNew12, (2.0, 0.1)),
    29: ("Matmul_Mish_Mish", Model29, ModelNew29, ()),
    70: ("Gemm_Sigmoid_Scaling_ResidualAdd", Model70, ModelNew70, (2.0,)),
    76: ("Gemm_Add_ReLU", Model76, ModelNew76, None),  # bias_shape = (out,)
    86: ("Matmul_Divide_GELU", Model86, ModelNew86, (10.0,)),
    99: ("Matmul_GELU_Softmax", Model99, ModelNew99, ()),
}
TOLERANCES = {torch.float32: 1e-4, torch.bfloat16: 1e-2, torch.float16: 1e-2}  # KernelBench's


def init_args(number, in_features, out_features):
    extra = PROBLEMS[number][3]
    return (in_features, out_features) + ((out_features,) if extra is None else extra)


def build(cls, number, in_features, out_features, dtype):
    torch.manual_seed(42)  # KernelBench's seed before each model: ModelNew gets Model's weights
    return cls(*init_args(number, in_features, out_features)).to(device="cuda", dtype=dtype)


def check(number, batch, in_features, out_features, dtype, trials=3):
    """``(passed, our error, torch's error)``: KernelBench's allclose on ``torch.rand`` and
    ``torch.randn`` inputs, and the largest error of each against ``Model`` in float64."""
    _, model_cls, new_cls, _ = PROBLEMS[number]
    ref, new = (build(cls, number, in_features, out_features, dtype) for cls in (model_cls, new_cls))
    exact = build(model_cls, number, in_features, out_features, torch.float64)
    tol, ok, ours, theirs = TOLERANCES[dtype], True, 0.0, 0.0
    with torch.no_grad():
        for seed in range(trials):
            g = torch.Generator(device="cuda").manual_seed(seed)
            fill = torch.rand if seed < trials - 1 else torch.randn
            x = fill(batch, in_features, device="cuda", generator=g).to(dtype)
            got, want, truth = new(x), ref(x), exact(x.double())
            ok &= got.dtype == want.dtype and got.shape == want.shape and torch.allclose(got, want, atol=tol, rtol=tol)
            ours = max(ours, (got.double() - truth).abs().max().item())
            theirs = max(theirs, (want.double() - truth).abs().max().item())
    return ok, ours, theirs


def time(number, batch, in_features, out_features, dtype, runs):
    """Median milliseconds of Model (eager), torch.compile(Model), ModelNew and the same GEMM
    without the epilogue (``cupy_ops.linear`` with the Linear's bias alone), interleaved."""
    _, model_cls, new_cls, _ = PROBLEMS[number]
    ref, new = (build(cls, number, in_features, out_features, dtype) for cls in (model_cls, new_cls))
    compiled = torch.compile(ref)
    x = torch.rand(batch, in_features, device="cuda", dtype=dtype)
    with torch.no_grad():
        compiled(x)  # compiles outside the timing
        w = next(p for p in new.parameters() if p.dim() == 2)
        bias = next((p for n, p in new.named_parameters() if n.endswith("bias") and p.dim() == 1), None)
        fns = {
            "eager": lambda: ref(x),
            "compile": lambda: compiled(x),
            "cupy_ops": lambda: new(x),
            "bare": lambda: cupy_ops.linear(x, w, bias, algo=algo(x)),
        }
        stats = time_cuda_interleaved(fns, runs=runs, max_seconds=5.0)
    return {k: s.median for k, s in stats.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--problems", type=int, nargs="+", default=sorted(PROBLEMS), choices=sorted(PROBLEMS))
    p.add_argument("--dtype", choices=("float32", "bfloat16", "both"), default="both")
    p.add_argument("--batch-size", type=int, default=1024, help="rows of x (default %(default)s)")
    p.add_argument("--in-features", type=int, default=8192, help="default %(default)s")
    p.add_argument("--out-features", type=int, default=8192, help="default %(default)s")
    p.add_argument("--runs", type=int, default=50, help="timed calls of each (default %(default)s)")
    p.add_argument("--no-timing", action="store_true", help="check only")
    p.add_argument("--results", metavar="PATH", help="also append each time to this results file (JSON lines)")
    a = p.parse_args()
    problem_text = gpu_problem()
    if problem_text:
        print(problem_text, file=sys.stderr)
        return 1
    dtypes = {"float32": [torch.float32], "bfloat16": [torch.bfloat16]}.get(a.dtype, [torch.float32, torch.bfloat16])
    shape = (a.batch_size, a.in_features, a.out_features)
    card = torch.cuda.get_device_name()
    print(f"KernelBench level 2, x ({a.batch_size}, {a.in_features}), out {a.out_features}; {card}")
    header = (
        "| problem | dtype | check | error: ours / torch's (vs fp64) | eager ms | compile ms | cupy_ops ms "
        "| vs eager | vs compile | epilogue's cost |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    failed, records = False, []
    env = environment() if a.results else None
    for number in a.problems:
        for dtype in dtypes:
            ok, ours, theirs = check(number, *shape, dtype)
            failed |= not ok
            t = {} if a.no_timing else time(number, *shape, dtype, a.runs)
            times = (
                f"{t['eager']:.3f} | {t['compile']:.3f} | {t['cupy_ops']:.3f} | "
                f"{t['eager'] / t['cupy_ops']:.2f}x | {t['compile'] / t['cupy_ops']:.2f}x | "
                f"{100 * (t['cupy_ops'] / t['bare'] - 1):+.1f} %"
                if t
                else "- | - | - | - | - | -"
            )
            name = f"{number}_{PROBLEMS[number][0]}"
            dt = str(dtype).replace("torch.", "")
            for variant, ms in t.items() if env else ():
                error = ours if variant == "cupy_ops" else theirs if variant == "eager" else None
                shape_text = f"{name} {a.batch_size}x{a.in_features}x{a.out_features}"
                records.append(
                    record(env, LEVEL2, dt, shape_text, variant, ms, ratio=t["eager"] / ms, max_abs_error=error)
                )
            print(f"| {name} | {dt} | {'pass' if ok else 'FAIL'} | {ours:.2e} / {theirs:.2e} | {times} |", flush=True)
    if records:
        append(a.results, records)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
