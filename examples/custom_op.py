"""Your own fused op: bias + GELU (torch's exact, erf form) as a torch op in about 30 lines, with
its backward kernel; then checked with torch.library.opcheck and gradcheck and trained in a small
model under torch.compile and autocast, side by side with ``F.gelu(x + bias)``.

    python examples/custom_op.py
"""

import argparse
import sys

import torch
import torch.nn.functional as F

import cupy_ops
from cupy_ops.bench import gpu_problem

# --- the op: the kernels, the declaration, the backward (this is all it takes) -------------------
SOURCE = r"""
template <class T>   // x + bias rounded to T as torch's add rounds it, then GELU in float (double)
__device__ auto biased(const T* x, const T* bias, long long i, long long cols) {
  return to_float(from_float<T>(to_float(x[i]) + to_float(bias[i % cols])));
}
template <class T>   // instantiated for float, f16, bf16 and double
__global__ void bias_gelu(const T* x, const T* bias, T* y, long long n, long long cols) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  auto v = biased(x, bias, i, cols);
  y[i] = from_float<T>(v * 0.5f * (1.0f + erf(v * 0.70710678118654752f)));
}
template <class T>   // d gelu(v) / dv = cdf(v) + v pdf(v), times the incoming gradient
__global__ void bias_gelu_grad(const T* grad, const T* x, const T* bias, T* dx, long long n, long long cols) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  auto v = biased(x, bias, i, cols);
  auto d = 0.5f * (1.0f + erf(v * 0.70710678118654752f)) + v * 0.39894228040143268f * exp(-0.5f * v * v);
  dx[i] = from_float<T>(to_float(grad[i]) * d);
}
"""
forward_kernel = cupy_ops.Kernel(SOURCE, "bias_gelu")
grad_kernel = cupy_ops.Kernel(SOURCE, "bias_gelu_grad")


@cupy_ops.op("example::bias_gelu", output=cupy_ops.like("x"), autocast="promote")
def bias_gelu(x: torch.Tensor, bias: torch.Tensor, *, out: torch.Tensor) -> None:
    """``F.gelu(x + bias)``: x (..., C), bias (C,), one dtype."""
    n = x.numel()
    forward_kernel(x, bias, out, n, bias.numel(), grid=cupy_ops.cdiv(n, 256), block=256)


@cupy_ops.op("example::bias_gelu_grad", output=cupy_ops.like("grad"))
def bias_gelu_grad(grad: torch.Tensor, x: torch.Tensor, bias: torch.Tensor, *, out: torch.Tensor) -> None:
    n = x.numel()
    grad_kernel(grad, x, bias, out, n, bias.numel(), grid=cupy_ops.cdiv(n, 256), block=256)


@bias_gelu.backward(save=("x", "bias"))
def _(ctx, grad):
    dx = bias_gelu_grad(grad, ctx.x, ctx.bias)
    return dx, dx.reshape(-1, ctx.bias.numel()).sum(0)


@bias_gelu.jvp(save=("x", "bias"))
def _(ctx, tx, tbias):
    t = tx if tbias is None else tbias.expand_as(ctx.x) if tx is None else tx + tbias
    return bias_gelu_grad(t, ctx.x, ctx.bias)


# --------------------------------------------------------------------------------------------------


class Mlp(torch.nn.Module):
    def __init__(self, width: int, fused: bool):
        super().__init__()
        self.up = torch.nn.Linear(width, 4 * width, bias=False)
        self.bias = torch.nn.Parameter(torch.zeros(4 * width))
        self.down = torch.nn.Linear(4 * width, width)
        self.fused = fused

    def forward(self, x):
        h = self.up(x)
        return self.down(bias_gelu(h, self.bias) if self.fused else F.gelu(h + self.bias))


def check(device) -> None:
    x = torch.randn(64, 96, device=device, dtype=torch.float64, requires_grad=True)
    b = torch.randn(96, device=device, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(torch.ops.example.bias_gelu.default, (x, b))
    assert torch.autograd.gradcheck(bias_gelu, (x, b))
    primals, tangents = (x.detach(), b.detach()), (torch.randn_like(x), torch.randn_like(b))
    torch.testing.assert_close(
        torch.func.jvp(bias_gelu, primals, tangents)[1],
        torch.func.jvp(lambda v, c: F.gelu(v + c), primals, tangents)[1],
    )
    for dtype in (torch.float32, torch.bfloat16):
        xs, bs = x.detach().to(dtype), b.detach().to(dtype)
        torch.testing.assert_close(bias_gelu(xs, bs), F.gelu(xs + bs))
    print("opcheck, gradcheck, forward-mode AD and values against F.gelu(x + bias): ok")


def train(device, steps: int) -> None:
    torch.manual_seed(0)
    data = torch.randn(512, 64, device=device)
    target = torch.sin(data)
    losses = {}
    for fused in (False, True):
        torch.manual_seed(1)
        model = torch.compile(Mlp(64, fused).to(device), fullgraph=True)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        for _ in range(steps):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.mse_loss(model(data).float(), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses["bias_gelu" if fused else "F.gelu"] = loss.item()
    print(
        f"{steps} steps of AdamW under torch.compile(fullgraph=True) and bf16 autocast: final loss "
        + ", ".join(f"{k} {v:.4f}" for k, v in losses.items())
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200, help="training steps (default %(default)s)")
    args = p.parse_args()
    problem = gpu_problem()
    if problem:  # what works without a GPU: NVRTC compiles the kernels offline
        for k in (forward_kernel, grad_kernel):
            for r in k.compile_offline("sm_90"):
                print(
                    f"{r.expr} for {r.arch}: "
                    + (f"{r.registers} registers, {r.spill_stores} bytes spilled" if r.ok else f"failed\n{r.log}")
                )
        print(problem, file=sys.stderr)
        return 1
    device = torch.device("cuda")
    check(device)
    train(device, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
