"""Launch layer: torch tensors -> kernel arguments, device guard, torch's stream, grid sizes.

Tensors are passed to kernels as raw device pointers (``tensor.data_ptr()``): no DLPack and
no CuPy array is built, which the design notes measured as the cheapest zero-copy path. The
kernel runs on torch's current stream of the tensor's device, so it is ordered with the
surrounding torch work (and captured by CUDA graphs) with no synchronisation.

Validation helpers raise typed errors that name the offending argument:
``TypeError`` for a wrong type or dtype, ``ValueError`` for a wrong device, shape or value.
"""
from __future__ import annotations

import functools

import torch

# torch dtype -> the element type name used in the kernels' templates (cuda_src/common.cuh).
DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float32: "float",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float64: "double",  # for gradient checks; not a speed target
}
SUPPORTED_DTYPES = tuple(DTYPE_NAMES)
_DTYPE_LIST = "float32, float16, bfloat16 or float64"


def check_tensor(name: str, x, dtypes=SUPPORTED_DTYPES) -> None:
    """Raise ``TypeError`` unless ``x`` is a torch tensor of one of ``dtypes``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in dtypes:
        raise TypeError(f"{name} must have dtype {_DTYPE_LIST}, got {x.dtype}")


def check_same_dtype(name: str, x: torch.Tensor, ref_name: str, ref: torch.Tensor) -> None:
    """Raise ``TypeError`` if ``x`` and ``ref`` differ in dtype."""
    if x.dtype != ref.dtype:
        raise TypeError(f"{name} must have the same dtype as {ref_name} ({ref.dtype}), got {x.dtype}")


def check_cuda(name: str, x: torch.Tensor) -> int:
    """Return the CUDA device index of ``x``; ``ValueError`` if it is not on a CUDA device.

    Never copies: a CPU tensor is an error, not a silent transfer.
    """
    if not x.is_cuda:
        raise ValueError(
            f"{name} must be a CUDA tensor, got a tensor on {x.device}; move it with .cuda() first"
        )
    return x.get_device()


def check_same_device(name: str, x: torch.Tensor, ref_name: str, device: int) -> None:
    """``ValueError`` unless ``x`` is a CUDA tensor on device ``device`` (the one ``ref_name`` is on)."""
    if not x.is_cuda or x.get_device() != device:
        raise ValueError(f"{name} must be on the same device as {ref_name} (cuda:{device}), got {x.device}")


def is_dense(x: torch.Tensor) -> bool:
    """True when ``x``'s elements fill one gap-free block of memory in some order.

    Contiguous tensors, transposes and permutations of them are dense: an elementwise
    kernel can walk them as a flat array (into an output with the same strides).
    """
    if x.is_contiguous():
        return True
    expected = 1
    for stride, size in sorted((st, sz) for st, sz in zip(x.stride(), x.shape) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


# --- grid sizing -------------------------------------------------------------------------

ELEMENTWISE_THREADS = 256
# Blocks per SM for the grid-stride elementwise kernels: 8 x 256 threads fills an SM's
# 2048-thread limit, so every SM keeps its maximum of loads in flight.
ELEMENTWISE_BLOCKS_PER_SM = 8


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def elementwise_plan(n: int, itemsize: int, x_ptr: int, y_ptr: int, sm_count: int) -> tuple[int, int, int]:
    """Launch plan for the elementwise loop (cuda_src/elementwise.cuh): ``(blocks, head, vec)``.

    16-byte vectors are used only when ``x`` and ``y`` are equally aligned modulo 16 bytes;
    ``head`` scalar elements then bring both to the boundary. ``n`` must be > 0.
    """
    if x_ptr % 16 == y_ptr % 16:
        head = min(n, ((16 - x_ptr % 16) % 16) // itemsize)
        items = cdiv(n - head, 16 // itemsize)
        vec = 1
    else:
        head, items, vec = 0, n, 0
    blocks = max(1, min(cdiv(items, ELEMENTWISE_THREADS), sm_count * ELEMENTWISE_BLOCKS_PER_SM))
    return blocks, head, vec


def gemm_naive_grid(M: int, N: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Grid and block of the naive GEMM (cuda_src/gemm_naive.cuh): 16x16 threads, one per output."""
    return (cdiv(N, 16), max(1, min(cdiv(M, 16), 65535)), 1), (16, 16, 1)


@functools.lru_cache(maxsize=None)
def sm_count(device: int) -> int:
    """Number of streaming multiprocessors of CUDA device ``device`` (cached)."""
    return torch.cuda.get_device_properties(device).multi_processor_count


# --- launching ---------------------------------------------------------------------------

class _StreamRef:
    """What CuPy's launcher needs of a stream: its handle as ``.ptr``.

    Cheaper than ``cupy.cuda.Stream.from_external`` (5 us a call in the design notes);
    cached per handle all the same.
    """

    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr


_stream_refs: dict[int, _StreamRef] = {}
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_get_device = getattr(torch._C, "_cuda_getDevice", None)


def current_stream_handle(device: int) -> int:
    """torch's current CUDA stream handle on ``device`` (the capture stream under a graph)."""
    if _raw_stream is not None:
        return _raw_stream(device)
    return torch.cuda.current_stream(device).cuda_stream


def _stream_ref(device: int) -> _StreamRef:
    handle = current_stream_handle(device)
    ref = _stream_refs.get(handle)
    if ref is None:
        ref = _stream_refs[handle] = _StreamRef(handle)
    return ref


def launch(fn, grid, block, args, device: int, shared_mem: int = 0) -> None:
    """Launch CuPy function ``fn`` (from ``compiler.get_function``) on torch's current stream.

    ``args`` are the kernel arguments: Python ints for pointers and 64-bit integers,
    ``numpy.int32`` / ``numpy.float32`` / ``numpy.float64`` for the rest (CuPy checks nothing).
    Makes ``device`` current for the launch when it is not already.
    """
    current = _get_device() if _get_device is not None else torch.cuda.current_device()
    if current == device:
        fn(grid, block, args, shared_mem, _stream_ref(device))
    else:
        with torch.cuda.device(device):
            fn(grid, block, args, shared_mem, _stream_ref(device))
