"""Where the eager host time of cupy_ops.relu goes (run on the GPU machine)."""
import torch

import cupy_ops
from cupy_ops import launch
from cupy_ops.bench.host import per_call_us
from cupy_ops.ops.relu import KERNEL

x = torch.randn(4096, device="cuda")
y = torch.empty_like(x)
cupy_ops.relu(x)
h = KERNEL.handle(x.dtype, 0)
storage, params, _ = h.buffers()
args = (x.data_ptr(), y.data_ptr(), 4096, 0, 1)
drv = launch._driver_launch
stream = torch._C._cuda_getCurrentRawStream(0)
steps = {
    "torch.relu(x)": lambda: torch.relu(x),
    "cupy_ops.relu(x)": lambda: cupy_ops.relu(x),
    "empty_like": lambda: torch.empty_like(x),
    "check_cuda_tensor": lambda: launch.check_cuda_tensor("x", x),
    "data_ptr x2": lambda: (x.data_ptr(), y.data_ptr()),
    "is_contiguous": lambda: x.is_contiguous(),
    "numel+element_size": lambda: (x.numel(), x.element_size()),
    "pack": lambda: h.pack(storage, 0, *args),
    "raw stream": lambda: torch._C._cuda_getCurrentRawStream(0),
    "getDevice": lambda: torch._C._cuda_getDevice(),
    "driver launch only": lambda: drv(h.ptr, 1, 1, 1, 256, 1, 1, 0, stream, params, 0),
    "launch.launch": lambda: launch.launch(h, (1, 1, 1), (256, 1, 1), args),
    "KERNEL.launch": lambda: KERNEL.launch(x, y, (), 0),
    "KERNEL(x)": lambda: KERNEL(x, None, (), 0),
}
for name, fn in steps.items():
    print(f"{name:<22} {per_call_us(fn, calls=5000):6.2f} us")
