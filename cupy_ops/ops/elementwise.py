"""The elementwise kernel family (cuda_src/elementwise.cuh: relu, relu_div, relu_backward):
its geometry, its launch plan, and its launcher with torch's layout and ``out=`` rules.

Geometry, measured on an H200 (docs/design.md#elementwise): 128 threads a block, each
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
_handles = launch.handles
_launch = launch.launch


class Elementwise:
    """A kernel of the family: ``template <class T> name(x, [x2,] y, n, head, vec, ...extra)``."""

    def __init__(self, filename: str, name: str):
        self.name = name
        self.kernel = Kernel.builtin(
            filename, name, {dt: f"{name}<{c}>" for dt, c in CUDA_NAMES.items()}, defines=DEFINES
        )
        self._variants = {dt: self.kernel.variant(dt) for dt in CUDA_NAMES}

    def fresh(self, x: torch.Tensor, extra: tuple = ()) -> torch.Tensor | None:
        """The eager call's common case in one step (an op's ``fast=``): a new output like a
        contiguous ``x`` written by the kernel; None for anything else, which the op's output
        rule then checks. The handle lookup is the check: only a CUDA tensor of a dtype this
        kernel has, on a device it is loaded on, finds one (a CPU tensor's device is -1)."""
        if x.is_contiguous():
            h = _handles.get((self._variants.get(x.dtype), x.get_device()))
            if h is not None:
                out = torch.empty_like(x)
                n = x.numel()
                if n:
                    px, po = x.data_ptr(), out.data_ptr()
                    blocks, head, vec = plan(n, x.element_size(), (px, po))
                    _launch(h, (blocks, 1, 1), BLOCK, (px, po, n, head, vec) + extra)
                return out
        return None

    def fresh2(self, a: torch.Tensor, b: torch.Tensor, extra: tuple = ()) -> torch.Tensor | None:
        """``fresh`` of a binary kernel: ``a`` and ``b`` contiguous, of one dtype, shape and
        device; None for anything else."""
        if a.is_contiguous() and b.is_contiguous() and a.dtype == b.dtype and a.shape == b.shape:
            device = a.get_device()
            h = _handles.get((self._variants.get(a.dtype), device))
            if h is not None and b.get_device() == device:
                out = torch.empty_like(a)
                n = a.numel()
                if n:
                    pa, pb, po = a.data_ptr(), b.data_ptr(), out.data_ptr()
                    blocks, head, vec = plan(n, a.element_size(), (pa, pb, po))
                    _launch(h, (blocks, 1, 1), BLOCK, (pa, pb, po, n, head, vec) + extra)
                return out
        return None

    def write(self, x: torch.Tensor, out: torch.Tensor, extra: tuple) -> None:
        """``out`` = the kernel applied to ``x`` (a CUDA tensor of a supported dtype; ``out`` of
        its shape and dtype on its device, any strides, ``x`` itself for in place). Dense
        tensors of one layout are walked as flat arrays where they are; anything else goes
        through a dense copy (views with gaps gathered, a differently laid out ``out`` written
        back)."""
        # (in place, out is x, takes the last test: a view with gaps is no flat array)
        if (x.is_contiguous() and out.is_contiguous()) or (out.stride() == x.stride() and is_dense(x)):
            # ``launch`` for two tensors, inlined: the eager hot path of every elementwise op
            n = x.numel()
            if n:
                device = x.get_device()
                h = _handles.get((self._variants.get(x.dtype), device)) or self.kernel.handle(x.dtype, device)
                px, po = x.data_ptr(), out.data_ptr()
                blocks, head, vec = plan(n, x.element_size(), (px, po))
                _launch(h, (blocks, 1, 1), BLOCK, (px, po, n, head, vec) + extra)
        elif is_dense(out):
            self.write(torch.empty_like(out).copy_(x), out, extra)
        else:
            tmp = torch.empty_like(x)
            self.write(x, tmp, extra)
            out.copy_(tmp)

    def launch(self, tensors: tuple, extra: tuple, device: int) -> None:
        """Launch on dense ``tensors`` (inputs, then the output), all of one layout (the output
        may be an input)."""
        x = tensors[0]
        n = x.numel()
        if n:
            h = _handles.get((self._variants.get(x.dtype), device)) or self.kernel.handle(x.dtype, device)
            ptrs = tuple(t.data_ptr() for t in tensors)
            blocks, head, vec = plan(n, x.element_size(), ptrs)
            _launch(h, (blocks, 1, 1), BLOCK, (*ptrs, n, head, vec, *extra))


def elementwise_vmap(fn):
    """A ``torch.func.vmap`` rule for an elementwise op ``fn(*tensors, *rest)``: the batched
    tensor inputs brought to batch dimension 0 (the others broadcast along it), one call."""

    def rule(info, in_dims, *args):
        moved = []
        for a, d in zip(args, in_dims):
            if isinstance(a, torch.Tensor):
                a = a.movedim(d, 0) if d is not None else a.unsqueeze(0).expand(info.batch_size, *a.shape)
            moved.append(a)
        return fn(*moved), 0

    return rule
