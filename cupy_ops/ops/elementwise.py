"""The elementwise kernel family (cuda_src/elementwise.cuh: relu, relu_div, relu_backward):
its geometry, its launch plan, and its launcher with torch's layout and ``out=`` rules.

Geometry, measured on an H200 (docs/tuning.md, "Elementwise"): 128 threads a block, each
thread 2 vectors of 16 bytes, one block per chunk (no grid-stride loop) reached 98-100 % of a
device-to-device copy; the scalar path (operands aligned differently) does 8 elements a
thread (16 raised the kernel to ~80 registers). The numbers reach the kernels as -D defines.
"""
from __future__ import annotations

import torch

from .. import checks, launch
from ..dtypes import CUDA_NAMES
from ..kernel import Kernel

THREADS = 128
VECS_PER_THREAD = 2
SCALAR_PER_THREAD = 8
DEFINES = {"EW_VECS_PER_THREAD": VECS_PER_THREAD, "EW_SCALAR_PER_THREAD": SCALAR_PER_THREAD}
BLOCK = (THREADS, 1, 1)
_VECS_PER_BLOCK = THREADS * VECS_PER_THREAD
_SCALAR_PER_BLOCK = THREADS * SCALAR_PER_THREAD


def plan(n: int, itemsize: int, ptrs: tuple) -> tuple[int, int, int]:
    """``(blocks, head, vec)`` of an elementwise launch over ``n`` > 0 elements at the
    addresses ``ptrs`` (inputs, then the output). Pure: a CPU test can call it.

    16-byte vectors (``vec`` = 1) only when all pointers are equally aligned modulo 16 bytes;
    ``head`` scalar elements then bring them to the boundary and a block covers
    ``THREADS * VECS_PER_THREAD`` vectors. Otherwise a block covers ``SCALAR_PER_THREAD``
    elements a thread. The eager hot path: no loop, no allocation.
    """
    p0 = ptrs[0]
    if (p0 - ptrs[1]) & 15 == 0 and (len(ptrs) == 2 or (p0 - ptrs[2]) & 15 == 0):
        head = ((-p0) & 15) // itemsize
        if head > n:
            head = n
        return ((((n - head) * itemsize) >> 4) + _VECS_PER_BLOCK - 1) // _VECS_PER_BLOCK or 1, head, 1
    return (n + _SCALAR_PER_BLOCK - 1) // _SCALAR_PER_BLOCK, 0, 0


is_dense = checks.dense
_bump_version = getattr(torch.autograd.graph, "increment_version", None) or torch._C._increment_version
_grad_enabled = torch.is_grad_enabled
_is_compiling = torch.compiler.is_compiling
_empty_like = torch.empty_like
_handles = launch.handles
_launch = launch.launch
_Tensor = torch.Tensor


class Elementwise:
    """A kernel of the family: ``template <class T> name(x, [x2,] y, n, head, vec, ...extra)``."""

    def __init__(self, filename: str, name: str):
        self.name = name
        self.kernel = Kernel.builtin(filename, name, {dt: f"{name}<{c}>" for dt, c in CUDA_NAMES.items()},
                                     defines=DEFINES)
        self._variants = {dt: self.kernel.variant(dt) for dt in CUDA_NAMES}

    def fast(self, x, extra: tuple):
        """The eager fast path: the result, or None when ``x`` needs the general path (not a
        contiguous CUDA tensor of a dtype already compiled on its device, or autograd or
        torch.compile involved)."""
        if type(x) is _Tensor and x.is_contiguous() and x.is_cuda and not (x.requires_grad and _grad_enabled()):
            h = _handles.get((self._variants.get(x.dtype), x.get_device()))
            if h is not None and not _is_compiling():
                y = _empty_like(x)
                n = x.numel()
                if n:
                    blocks, head, vec = plan(n, x.element_size(), (x.data_ptr(), y.data_ptr()))
                    _launch(h, (blocks, 1, 1), BLOCK, (x.data_ptr(), y.data_ptr(), n, head, vec, *extra))
                return y
        return None

    def __call__(self, x, out, extra: tuple, device: int, inputs: tuple = ()) -> torch.Tensor:
        """Apply to ``x`` (already checked: a CUDA tensor of a supported dtype on ``device``).

        ``out=None`` allocates the result as torch does (same strides when ``x`` is dense);
        ``out=x`` works in place; any other ``out`` must pass ``checks.out`` (``inputs``: the
        other tensors the kernel reads, e.g. a GPU divisor). Dense inputs are read where they
        are; views with gaps are gathered into a dense copy first (and, for ``out``/in place,
        copied back). A written ``out`` has its version counter bumped, as torch's in-place
        and out= ops do, so autograd sees the write.
        """
        if out is None:
            if not is_dense(x):
                # gather into the layout torch.empty_like picks (dense, in x's stride order), so
                # the result's strides are what torch.relu and the ops' fake kernels give
                x = torch.empty_like(x).copy_(x)
            y = torch.empty_like(x)  # dense x: same strides, so both are walked as flat arrays
            self.launch((x, y), extra, device)
            return y
        checks.out(out, x, device, self.name, inputs)
        if (out is x or out.stride() == x.stride()) and is_dense(x):
            self.launch((x, out), extra, device)
            _bump_version(out)
            return out
        out.copy_(self(x, None, extra, device))   # (copy_ bumps the version itself)
        return out

    def launch(self, tensors: tuple, extra: tuple, device: int) -> None:
        """Launch on dense ``tensors`` (inputs, then the output), all of one layout (the output
        may be an input)."""
        x = tensors[0]
        n = x.numel()
        if n:
            h = self.kernel.handle(x.dtype, device)
            ptrs = tuple(t.data_ptr() for t in tensors)
            blocks, head, vec = plan(n, x.element_size(), ptrs)
            _launch(h, (blocks, 1, 1), BLOCK, (*ptrs, n, head, vec, *extra))
