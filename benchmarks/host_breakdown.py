"""Experiment (GPU): where the eager host time of cupy_ops.relu goes, step by step, against
torch.relu (4096 fp32 elements: the GPU is idle, the host is measured).

    python benchmarks/host_breakdown.py | tee benchmarks/results/host_breakdown_<gpu>_run<N>.log
"""
import torch

import cupy_ops
from cupy_ops import checks, launch
from cupy_ops.bench.env import describe, environment
from cupy_ops.bench.host import per_call_us
from cupy_ops.ops import elementwise
from cupy_ops.ops.relu import KERNEL

print(describe(environment()))
x = torch.randn(4096, device="cuda")
y = torch.empty_like(x)
cupy_ops.relu(x)
h = KERNEL.kernel.handle(torch.float32, 0)
variant = KERNEL.kernel.variant(torch.float32)
ptrs = (x.data_ptr(), y.data_ptr())
blocks, head, vec = elementwise.plan(4096, 4, ptrs)
args = (*ptrs, 4096, head, vec)
steps = {
    "torch.relu(x)": lambda: torch.relu(x),
    "cupy_ops.relu(x)": lambda: cupy_ops.relu(x),
    "KERNEL.fast(x)": lambda: KERNEL.fast(x, ()),
    "torch.empty_like": lambda: torch.empty_like(x),
    "checks.cuda_tensor": lambda: checks.cuda_tensor("x", x),
    "handle lookup": lambda: launch.handles.get((variant, 0)),
    "data_ptr x2": lambda: (x.data_ptr(), y.data_ptr()),
    "is_contiguous": lambda: x.is_contiguous(),
    "numel+element_size": lambda: (x.numel(), x.element_size()),
    "elementwise.plan": lambda: elementwise.plan(4096, 4, ptrs),
    "launch.launch": lambda: launch.launch(h, (blocks, 1, 1), elementwise.BLOCK, args),
    "KERNEL(x) (general path)": lambda: KERNEL(x, None, (), 0),
}
for name, fn in steps.items():
    print(f"{name:<26} {per_call_us(fn, calls=5000):6.2f} us")
