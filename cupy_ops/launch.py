"""Launch layer: torch tensors -> kernel arguments, device guard, torch's stream, grid sizes.

Tensors are passed to kernels as raw device pointers (``tensor.data_ptr()``): no DLPack and
no CuPy array is built, which the design notes measured as the cheapest zero-copy path. The
kernel runs on torch's current stream of the tensor's device, so it is ordered with the
surrounding torch work (and captured by CUDA graphs) with no synchronisation.

Validation helpers raise typed errors that name the offending argument:
``TypeError`` for a wrong type or dtype, ``ValueError`` for a wrong device, shape or value.
"""
from __future__ import annotations

import ctypes
import struct
import threading

import torch

from . import compiler

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


_DTYPE_SET = frozenset(DTYPE_NAMES)


def check_cuda_tensor(name: str, x) -> int:
    """``check_tensor`` + ``check_cuda`` in one step (the eager hot path): the device index."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _DTYPE_SET:
        raise TypeError(f"{name} must have dtype {_DTYPE_LIST}, got {x.dtype}")
    if not x.is_cuda:
        raise ValueError(f"{name} must be a CUDA tensor, got a tensor on {x.device}; move it with .cuda() first")
    return x.get_device()


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

# Elementwise launch shape, measured on an H200 (notes/elementwise_tuning.md): 128 threads a
# block, 2 vectors of 16 bytes a thread, one block per chunk (no grid-stride loop) reached
# 98-100 % of a device-to-device copy; must match VECS_PER_THREAD in cuda_src/elementwise.cuh.
ELEMENTWISE_THREADS = 128
ELEMENTWISE_VECS_PER_THREAD = 2
_CHUNK_BYTES = ELEMENTWISE_THREADS * ELEMENTWISE_VECS_PER_THREAD * 16
_SCALAR_CHUNK = ELEMENTWISE_THREADS * 8  # elements a block on the scalar path (8 a thread)
_VECS_PER_BLOCK = ELEMENTWISE_THREADS * ELEMENTWISE_VECS_PER_THREAD


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def launch_elementwise(handle: "KernelHandle", n: int, itemsize: int, ptrs: tuple, extra: tuple = ()) -> None:
    """Launch an elementwise kernel (cuda_src/elementwise.cuh) over ``n`` > 0 elements.

    ``ptrs`` are the kernel's tensor pointers (inputs then output); the kernel gets
    ``(*ptrs, n, head, vec, *extra)``. 16-byte vectors are used only when all pointers are
    equally aligned modulo 16 bytes (``vec`` = 1); ``head`` scalar elements then bring them to
    the boundary, and a block covers ``_CHUNK_BYTES``. Otherwise a block covers 8 elements a
    thread. This is the eager hot path (no generator, no extra call: each costs ~0.1-0.4 us).
    """
    p0 = ptrs[0]
    if (p0 - ptrs[1]) & 15 == 0 and (len(ptrs) == 2 or (p0 - ptrs[2]) & 15 == 0):
        head = ((-p0) & 15) // itemsize
        if head > n:
            head = n
        blocks = ((((n - head) * itemsize) >> 4) + _VECS_PER_BLOCK - 1) // _VECS_PER_BLOCK or 1
        vec = 1
    else:
        blocks, head, vec = (n + _SCALAR_CHUNK - 1) // _SCALAR_CHUNK, 0, 0
    if _several_devices and _get_device() != handle.device:
        return launch(handle, (blocks, 1, 1), (ELEMENTWISE_THREADS, 1, 1), (*ptrs, n, head, vec, *extra))
    try:
        storage, params, _ = handle._tls.buf
    except AttributeError:
        storage, params, _ = handle.buffers()
    handle.pack(storage, 0, *ptrs, n, head, vec, *extra)
    try:
        _driver_launch(handle.ptr, blocks, 1, 1, ELEMENTWISE_THREADS, 1, 1, 0, _raw_stream(handle.device), params, 0)
    except _DriverError:
        launch(handle, (blocks, 1, 1), (ELEMENTWISE_THREADS, 1, 1), (*ptrs, n, head, vec, *extra))


def gemm_naive_grid(M: int, N: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Grid and block of the naive GEMM (cuda_src/gemm_naive.cuh): 16x16 threads, one per output."""
    return (cdiv(N, 16), max(1, min(cdiv(M, 16), 65535)), 1), (16, 16, 1)


# --- launching ---------------------------------------------------------------------------
#
# Kernels are launched with cuLaunchKernel directly (CuPy's driver binding), with the
# arguments packed by ``struct`` into a per-thread buffer of 8-byte slots. CuPy's own
# ``Function.__call__`` builds a Python object per argument on every call; this path costs
# a struct.pack_into and one driver call, which is what keeps the eager call near torch's.

# Argument kinds of a kernel signature -> struct format of its slot: 8 bytes, or 128 for a
# TMA tensor map (a CUtensorMap passed by value, given as 128 bytes; see ops/_tma.py).
_SLOT = {"ptr": "Q", "i64": "q", "i32": "I4x", "f32": "f4x", "f64": "d", "tmap": "128s"}

_get_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def current_stream_handle(device: int) -> int:
    """torch's current CUDA stream handle on ``device`` (the capture stream under a graph)."""
    return torch.cuda.current_stream(device).cuda_stream


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", current_stream_handle)


class KernelHandle:
    """One compiled kernel on one device, ready to launch with ``launch``.

    ``signature`` lists the kernel's parameters in order, each one of ``"ptr"`` (a device
    pointer, passed as a Python int; 0 for null), ``"i64"``, ``"i32"``, ``"f32"``, ``"f64"``,
    ``"tmap"`` (128 bytes: a TMA tensor map).
    """

    __slots__ = ("fn", "ptr", "device", "pack", "nargs", "_tls", "smem_limit", "offsets", "nbytes")

    def __init__(self, fn, device: int, signature):
        global _driver_launch, _DriverError, _several_devices
        for kind in signature:
            if kind not in _SLOT:
                raise ValueError(f"signature entries must be one of {sorted(_SLOT)}, got {kind!r}")
        self.fn = fn                      # keeps the CUDA module loaded
        self.ptr = fn.ptr                 # the CUfunction
        self.device = device
        self.nargs = len(signature)
        self.pack = struct.Struct("<" + "".join(_SLOT[k] for k in signature)).pack_into
        sizes = [struct.calcsize("<" + _SLOT[k]) for k in signature]
        self.offsets = [sum(sizes[:i]) for i in range(len(sizes))]   # each argument's place in the buffer
        self.nbytes = sum(sizes)
        self._tls = threading.local()     # argument buffers are per thread: launches may race
        self.smem_limit = 48 * 1024       # dynamic shared memory a launch may use without opt-in
        if _driver_launch is None:
            _several_devices = torch.cuda.device_count() > 1
            from cupy_backends.cuda.api import driver

            _DriverError = driver.CUDADriverError
            _driver_launch = driver.launchKernel

    def allow_shared_memory(self, nbytes: int) -> None:
        """Let launches use ``nbytes`` of dynamic shared memory (above the 48 KB default)."""
        if nbytes > self.smem_limit:
            from cupy_backends.cuda.api import driver

            with torch.cuda.device(self.device):
                driver.funcSetAttribute(self.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
            self.smem_limit = nbytes

    def buffers(self):
        """This thread's (argument slots, address of the pointer array, pointer array)."""
        try:
            return self._tls.buf
        except AttributeError:
            storage = (ctypes.c_uint64 * max(1, self.nbytes // 8))()
            base = ctypes.addressof(storage)
            params = (ctypes.c_void_p * max(1, self.nargs))(*[base + off for off in self.offsets])
            self._tls.buf = buf = (storage, ctypes.addressof(params), params)
            return buf


_driver_launch = None   # cupy_backends' cuLaunchKernel, bound when the first kernel is loaded
_DriverError = Exception
_several_devices = True  # with one GPU, every tensor is on the current device: skip the check
_handles: dict[tuple, KernelHandle] = {}
_handles_lock = threading.Lock()


def kernel(filename: str, expr: str, device: int, signature) -> KernelHandle:
    """The ``KernelHandle`` of ``expr`` in ``filename`` on ``device`` (compiled on first use)."""
    key = (filename, expr, device)
    h = _handles.get(key)
    if h is None:
        fn = compiler.get_function(filename, expr, device)
        with _handles_lock:
            h = _handles.get(key)
            if h is None:
                h = _handles[key] = KernelHandle(fn, device, tuple(signature))
    return h


def launch(handle: KernelHandle, grid, block, args, shared_mem: int = 0) -> None:
    """Launch ``handle`` with ``args`` on torch's current stream of the handle's device.

    ``grid`` and ``block`` are 3-tuples; ``args`` match the handle's signature. Makes the
    handle's device current for the launch when it is not already (a tensor on ``cuda:1``
    runs on ``cuda:1`` whatever the current device is).
    """
    device = handle.device
    if shared_mem > handle.smem_limit:
        handle.allow_shared_memory(shared_mem)
    if _several_devices and _get_device() != device:
        with torch.cuda.device(device):
            return launch(handle, grid, block, args, shared_mem)
    try:
        storage, params, _ = handle._tls.buf
    except AttributeError:
        storage, params, _ = handle.buffers()
    handle.pack(storage, 0, *args)
    stream = _raw_stream(device)
    try:
        _driver_launch(handle.ptr, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_mem,
                       stream, params, 0)
    except _DriverError:
        from cupy_backends.cuda.api import driver
        from cupy.cuda import runtime

        if driver.ctxGetCurrent() != 0:
            raise
        runtime.free(0)  # this thread has no current CUDA context yet: make the device's current
        _driver_launch(handle.ptr, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_mem,
                       stream, params, 0)
