"""Launch layer: a compiled variant loaded on a device, and the one launch function.

``handle(variant, device, signature)`` loads the variant's binary (compiled by the compile
layer on first use) on a device and keeps it in the one handle cache, ``handles``, keyed by
``(variant, device)``. ``launch`` packs the arguments and calls ``cuLaunchKernel`` (for
thread-block clusters ``cuLaunchKernelEx``) on torch's current stream of the handle's device,
making that device current when it is not:
the kernel is ordered with the surrounding torch work and captured by CUDA graphs.

Tensors reach kernels as raw device pointers (``tensor.data_ptr()``): no DLPack and no CuPy
array, which the design notes measured as the cheapest zero-copy path. Arguments are packed
by ``struct`` into a per-thread buffer of slots: CuPy's own ``Function.__call__`` builds a
Python object per argument on every call.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import threading
import warnings

import torch

from . import compiler
from .device import PORTABLE_CLUSTER, SHARED_DEFAULT, capability
from .device import arch as device_arch

# The GEMM epilogue's argument (gemm_epilogue.cuh EpiArgs, passed by value): EPI_PTRS pointers and
# as many row strides, EPI_SCALARS doubles, then C's M and N.
EPI_PTRS = 8
EPI_SCALARS = 8
EPI_ARGS_BYTES = 8 * (2 * EPI_PTRS + EPI_SCALARS + 2)

# Argument kinds of a kernel signature -> struct format of its slot: 8 bytes, 128 for a TMA
# tensor map (a CUtensorMap passed by value; see ops/gemm/tma.py), or an EpiArgs.
SLOTS = {
    "ptr": "Q",
    "i64": "q",
    "i32": "I4x",
    "f32": "f4x",
    "f64": "d",
    "f16": "e6x",
    "bf16": "H6x",
    "tmap": "128s",
    "epi": f"{EPI_ARGS_BYTES}s",
}


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers: the number of blocks of ``b`` covering ``a`` items.

    Example:
        >>> cupy_ops.cdiv(1000, 256)     # grid for 1000 elements in blocks of 256 threads
        4
    """
    return -(-a // b)


class KernelHandle:
    """One compiled variant loaded on one device, ready for ``launch``.

    ``signature`` lists the kernel's parameters in order, each one of ``SLOTS``: ``"ptr"`` (a
    device pointer as a Python int; 0 for null), ``"i64"``, ``"i32"``, ``"f32"``, ``"f64"``,
    ``"tmap"`` (128 bytes), ``"epi"`` (``EPI_ARGS_BYTES``).
    """

    __slots__ = (
        "__weakref__",
        "_tls",
        "device",
        "fn",
        "name",
        "nargs",
        "nbytes",
        "non_portable",
        "offsets",
        "pack",
        "pinned",
        "ptr",
        "resident",
        "smem_limit",
    )

    def __init__(self, fn, device: int, signature, name: str):
        for kind in signature:
            if kind not in SLOTS:
                raise ValueError(f"signature entries must be one of {sorted(SLOTS)}, got {kind!r}")
        self.fn = fn  # holds the CUDA module: it stays loaded while the handle lives
        self.ptr = fn.ptr  # the CUfunction
        self.device = device
        self.name = name
        self.nargs = len(signature)
        self.pack = struct.Struct("<" + "".join(SLOTS[k] for k in signature)).pack_into
        sizes = [struct.calcsize("<" + SLOTS[k]) for k in signature]
        self.offsets = [sum(sizes[:i]) for i in range(len(sizes))]
        self.nbytes = sum(sizes)
        self._tls = threading.local()  # argument buffers are per thread: launches may race
        self.smem_limit = SHARED_DEFAULT  # dynamic shared memory a launch may use without opt-in (_load: the driver's)
        self.pinned = False  # launched into a CUDA graph: never unloaded (see retire)
        self.resident: dict[tuple, int] = {}  # occupancy answers (resident_clusters, blocks_per_sm)
        self.non_portable = False  # clusters of more than 8 CTAs allowed (allow_non_portable_clusters)

    def allow_shared_memory(self, nbytes: int) -> None:
        """Let launches use ``nbytes`` of dynamic shared memory (above the 48 KB default)."""
        if nbytes > self.smem_limit:
            with torch.cuda.device(self.device):
                _driver.funcSetAttribute(self.ptr, _driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
            self.smem_limit = nbytes

    def allow_non_portable_clusters(self) -> None:
        """Let launches use clusters of more than 8 CTAs (up to 16 on Hopper)."""
        with torch.cuda.device(self.device):
            _driver.funcSetAttribute(self.ptr, _NON_PORTABLE_CLUSTER, 1)
        self.non_portable = True

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

    def packed(self, *args) -> tuple:
        """``args`` packed once into buffers of their own, for ``launch_packed``: a launch that
        repeats its arguments (a GEMM's maps and sizes at the same addresses) skips packing.
        Read-only once made, so any thread may launch them (the driver copies them)."""
        storage = (ctypes.c_uint64 * max(1, self.nbytes // 8))()
        base = ctypes.addressof(storage)
        params = (ctypes.c_void_p * max(1, self.nargs))(*[base + off for off in self.offsets])
        self.pack(storage, 0, *args)
        return (storage, ctypes.addressof(params), params)

    def __repr__(self) -> str:
        return f"<KernelHandle {self.name} on cuda:{self.device}>"


# The one handle cache. Hot paths read it directly (``handles.get((variant, device))``): one
# dictionary lookup; ``handle`` fills it.
handles: dict[tuple, KernelHandle] = {}
_lock = threading.RLock()
_driver = None  # cupy_backends' driver binding, bound with the first handle
_driver_launch = None
_memset_async = None
_memcpy_async = None
_DriverError = Exception
_several_devices = True  # with one GPU every tensor is on the current device: skip the check

_get_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def current_stream_handle(device: int) -> int:
    """torch's current CUDA stream handle on ``device`` (the capture stream under a graph)."""
    return torch.cuda.current_stream(device).cuda_stream


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", current_stream_handle)


def handle(variant: compiler.Variant, device: int, signature) -> KernelHandle:
    """The ``KernelHandle`` of ``variant`` on CUDA device ``device`` (compiled and loaded on
    first use). Raises ``KernelCompileError`` (NVRTC's log), or ``RuntimeError`` when the
    source is not built for this device or its binary does not load."""
    h = handles.get((variant, device))
    if h is None:
        h = _load(variant, device, tuple(signature))
    return h


def driver():
    """CuPy's driver binding, as the launch layer bound it with the first handle (None before)."""
    return _driver


def _bind_driver() -> None:
    global _driver, _driver_launch, _memset_async, _memcpy_async, _DriverError, _several_devices
    if _driver is None:
        compiler.import_cupy()
        from cupy_backends.cuda.api import driver, runtime

        _several_devices = torch.cuda.device_count() > 1
        _DriverError = driver.CUDADriverError
        _driver_launch = driver.launchKernel
        _memset_async = runtime.memsetAsync
        _memcpy_async = lambda dst, src, n, stream: runtime.memcpyAsync(dst, src, n, runtime.memcpyDefault, stream)  # noqa: E731
        _driver = driver


# Handles of released user kernels (``retire``) wait here until no launch of theirs can be
# in flight; graph-captured ones are kept for the life of the process (a graph may replay them).
_retired: list[KernelHandle] = []
_pinned: list[KernelHandle] = []


def retire(variants) -> None:
    """Take the handles of ``variants`` (of a user kernel no longer referenced) out of the
    cache. Their modules are unloaded by ``unload_retired``, at the next module load: not now,
    as launches may still be queued on some stream, and this may run inside the garbage
    collector, where no CUDA call belongs."""
    variants = set(variants)
    with _lock:
        for key in [k for k in handles if k[0] in variants]:
            _retired.append(handles.pop(key))


def unload_retired() -> int:
    """Unload the modules of retired handles (``retire``) once their devices are idle: each
    device they live on is synchronized first, so no launch of theirs is in flight. Skipped
    while this thread captures a CUDA graph. Handles once launched into a graph stay loaded.
    Returns how many were released."""
    if not _retired or torch.cuda.is_current_stream_capturing():
        return 0
    with _lock:
        batch, _retired[:] = list(_retired), []
    keep = [h for h in batch if h.pinned]
    _pinned.extend(keep)
    for device in {h.device for h in batch if not h.pinned}:
        torch.cuda.synchronize(device)
    released = len(batch) - len(keep)
    del batch, keep  # the last references: CuPy unloads each module as its Function goes
    return released


def _load(variant: compiler.Variant, device: int, signature: tuple) -> KernelHandle:
    unload_retired()
    with _lock:
        h = handles.get((variant, device))
        if h is not None:
            return h
        _bind_driver()
        src = variant.source
        arch = device_arch(device)
        target = src.target(arch)
        if target is None:
            why = src.refusal(*capability(device)) or f"{src.name} is built for {src.arch} only"
            raise RuntimeError(f"kernel {variant.expr} on cuda:{device}: {why}")
        if src.arch is None:
            target = compiler.arch_for(*capability(device))  # the device's own, or PTX if NVRTC is older
        b = compiler.binary(variant, target)
        try:
            fn = _load_image(b, device)
        except _DriverError as exc:
            if not b.cached:
                raise RuntimeError(f"loading {variant.expr} of {src.name} on cuda:{device} failed: {exc}") from None
            # a checked cache entry that still does not load (e.g. another driver): build it
            # again; a failed load is never kept
            warnings.warn(
                f"cupy_ops: the cached binary of {variant.expr} ({src.name}) did not load on "
                f"cuda:{device} ({exc}); compiling it again",
                RuntimeWarning,
                stacklevel=4,
            )
            compiler.forget(variant, target)
            b = compiler.binary(variant, target, rebuild=True)
            try:
                fn = _load_image(b, device)
            except _DriverError as exc2:
                raise RuntimeError(f"loading {variant.expr} of {src.name} on cuda:{device} failed: {exc2}") from None
        h = KernelHandle(fn, device, signature, variant.expr)
        h.smem_limit = _smem_default(fn)
        handles[(variant, device)] = h
        return h


def _smem_default(fn) -> int:
    """The dynamic shared memory a launch of kernel function ``fn`` may have without opting in:
    48 KB less its static shared memory (the driver's default for the attribute)."""
    return _driver.funcGetAttribute(_driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn.ptr)


def _load_image(b: compiler.Binary, device: int):
    """Load binary ``b`` into the current context of ``device``: its kernel function."""
    cupy = compiler.import_cupy()
    image = b.image
    if b.arch.startswith("compute_") and not image.endswith(b"\0"):
        image += b"\0"  # the driver reads PTX as a C string
    with cupy.cuda.Device(device):
        module = cupy.cuda.function.Module()
        module.load(image)
        return module.get_function(b.lowered)


def context_was_missing() -> bool:
    """After a failed driver call (a launch, a tensor map's encoding): whether this thread had
    no current CUDA context (a thread that never touched CUDA through the runtime, e.g. a fresh
    worker thread or autograd's), which this makes current (the device's primary context, as
    the runtime would), so one retry can succeed."""
    if _driver.ctxGetCurrent() != 0:
        return False
    from cupy.cuda import runtime

    runtime.free(0)  # the runtime's first call on this thread makes the device's context current
    return True


def launch(
    h: KernelHandle,
    grid,
    block,
    args,
    shared_mem: int = 0,
    cluster=1,
    *,
    stream: int | None = None,
    cooperative: bool = False,
) -> None:
    """Launch ``h`` with ``args`` on torch's current stream of the handle's device (``stream``:
    that raw CUDA stream handle instead, which must belong to the handle's device).

    ``grid`` and ``block`` are 3-tuples; ``args`` match the handle's signature. Makes the
    handle's device current for the launch when it is not (a tensor on ``cuda:1`` runs on
    ``cuda:1`` whatever the current device is). The eager hot path: no allocation, one
    ``struct.pack_into`` and one driver call. ``cluster``: thread-block clusters, an int
    (that many CTAs along x) or an ``(x, y, z)`` tuple, each grid dimension a multiple of
    it; ``cooperative``: a cooperative launch (every block resident at once, so the grid may
    synchronize). Either goes as a launch attribute to ``cuLaunchKernelEx`` (through ctypes:
    two small structs per launch), so a kernel needs no ``__cluster_dims__``.
    """
    device = h.device
    if shared_mem > h.smem_limit:
        h.allow_shared_memory(shared_mem)
    if _several_devices and _get_device() != device:
        with torch.cuda.device(device):
            return launch(h, grid, block, args, shared_mem, cluster, stream=stream, cooperative=cooperative)
    try:
        storage, params, _ = h._tls.buf
    except AttributeError:
        storage, params, _ = h.buffers()
    h.pack(storage, 0, *args)
    if stream is None:
        stream = _raw_stream(device)
    if cluster != 1 or cooperative:
        return _launch_ex(h, grid, block, shared_mem, stream, params, cluster, cooperative)
    # (the plain launch here, not behind a helper: a Python call less on every eager launch)
    try:
        _driver_launch(h.ptr, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_mem, stream, params, 0)
    except _DriverError as e:
        _relaunch(h, grid, block, params, shared_mem, stream, e)


def launch_packed(h: KernelHandle, grid, block, packed: tuple, shared_mem: int = 0, cluster=1) -> None:
    """``launch`` with arguments packed ahead by ``h.packed(*args)``, on torch's current stream
    of the handle's device."""
    device = h.device
    if shared_mem > h.smem_limit:
        h.allow_shared_memory(shared_mem)
    if _several_devices and _get_device() != device:
        with torch.cuda.device(device):
            return launch_packed(h, grid, block, packed, shared_mem, cluster)
    stream, params = _raw_stream(device), packed[1]
    if cluster != 1:
        return _launch_ex(h, grid, block, shared_mem, stream, params, cluster, False)
    try:
        _driver_launch(h.ptr, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_mem, stream, params, 0)
    except _DriverError as e:
        _relaunch(h, grid, block, params, shared_mem, stream, e)


def memset(device: int, ptr: int, nbytes: int) -> None:
    """Zero ``nbytes`` bytes from device address ``ptr`` on torch's current stream of
    ``device``: one cudaMemsetAsync (in place of a torch slice's ``zero_``: a view and a
    dispatched op on a call's path to its first kernel)."""
    if _memset_async is None:
        _bind_driver()
    if _several_devices and _get_device() != device:
        with torch.cuda.device(device):
            return memset(device, ptr, nbytes)
    if nbytes > 0:
        _memset_async(ptr, 0, nbytes, _raw_stream(device))


# NOTES: a call's first kernel may accumulate (atomicMax, a count) in memory that must start at
# zero; a memset before it is host time while the GPU waits (docs/design.md#host-cost). Kernels
# that accumulate here leave it zero again (fp16x3's t pass: its last block), so it is zeroed
# once, when made. One buffer a (device, stream): the kernels of every call there run one after
# another, each finding it zero (torch's pooled streams live as long as the process; an external
# stream destroyed with kernels queued, its handle taken by a new one, would share it). Made by
# another thread: this one may be inside a CUDA graph pool's allocation context (torch.compile's
# cudagraph warm-up), a pool that must hold nothing past the call. Never freed (a launch may
# still use one outgrown).
_accumulators: dict[tuple[int, int], torch.Tensor] = {}
_outgrown: list[torch.Tensor] = []
_ACCUMULATOR_STREAMS = 64  # past this many (device, stream) pairs, callers zero their own
_ACCUMULATOR_BYTES = 1 << 22  # a buffer held for the process's life: past 4 MiB, callers zero their own
_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", torch.cuda.is_current_stream_capturing)


def accumulators(device: int, nbytes: int) -> int | None:
    """The address of ``nbytes`` (or more) of zeros on CUDA device ``device`` for a kernel on
    torch's current stream there to accumulate in (atomics, counters) and leave zero again,
    shared by every call on that stream. None where the caller zeroes its own: while the stream
    captures a CUDA graph (its replays may run beside another stream's calls), with another
    device current, past ``_ACCUMULATOR_STREAMS`` streams or ``_ACCUMULATOR_BYTES`` bytes."""
    if nbytes > _ACCUMULATOR_BYTES or (_several_devices and _get_device() != device) or _capturing():
        return None
    key = (device, _raw_stream(device))
    buf = _accumulators.get(key)
    if buf is None or buf.shape[0] < nbytes:
        with _lock:  # (one buffer a stream, whichever threads ask at once)
            buf = _accumulators.get(key)
            if buf is None and len(_accumulators) >= _ACCUMULATOR_STREAMS:
                return None
            if buf is None or buf.shape[0] < nbytes:
                size = min(max(nbytes, 4096, 0 if buf is None else 2 * buf.shape[0]), _ACCUMULATOR_BYTES)
                made = _allocated_elsewhere(device, size)
                memset(device, made.data_ptr(), made.shape[0])  # on this stream, before any kernel of it
                if buf is not None:
                    _outgrown.append(buf)
                buf = _accumulators[key] = made
    return buf.data_ptr()


def _allocated_elsewhere(device: int, nbytes: int) -> torch.Tensor:
    """``torch.empty`` of ``nbytes`` bytes on CUDA device ``device``, allocated by a thread of its
    own (outside any graph pool this thread allocates to)."""
    made: list = []

    def allocate():
        try:
            made.append(torch.empty((nbytes,), dtype=torch.uint8, device=torch.device("cuda", device)))
        except BaseException as exc:  # noqa: BLE001 (raised again in the caller's thread)
            made.append(exc)

    worker = threading.Thread(target=allocate, name="cupy_ops accumulators")
    worker.start()
    worker.join()
    if isinstance(made[0], BaseException):
        raise made[0]
    return made[0]


def memcpy(device: int, dst: int, src: int, nbytes: int) -> None:
    """Copy ``nbytes`` bytes from device address ``src`` to ``dst`` on torch's current stream of
    ``device``: one cudaMemcpyAsync, no tensor (memory of another library's array alike)."""
    if _memcpy_async is None:
        _bind_driver()
    if _several_devices and _get_device() != device:
        with torch.cuda.device(device):
            return memcpy(device, dst, src, nbytes)
    if nbytes > 0:
        _memcpy_async(dst, src, nbytes, _raw_stream(device))


def _relaunch(h: KernelHandle, grid, block, params: int, shared_mem: int, stream: int, error: Exception) -> None:
    """A plain launch that failed with ``error``: once more where this thread had no current
    context (a new thread's first launch), else ``error``."""
    if not context_was_missing():
        raise error
    _driver_launch(h.ptr, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_mem, stream, params, 0)


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute (cuda.h): the id, padding to 8 bytes, and the 64-byte value union,
    whose clusterDim member is three unsigned ints and whose cooperative member is one int
    (``x`` here)."""

    _fields_ = [
        ("id", ctypes.c_int),
        ("pad", ctypes.c_int),
        ("x", ctypes.c_uint),
        ("y", ctypes.c_uint),
        ("z", ctypes.c_uint),
        ("rest", ctypes.c_char * 52),
    ]


_COOPERATIVE = 2  # CU_LAUNCH_ATTRIBUTE_COOPERATIVE
_CLUSTER_DIMENSION = 4  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
_libcuda = None


def cuda_fn(name: str, argtypes):
    """libcuda's ``name`` through ctypes, returning a CUresult (int): for the driver calls CuPy
    does not bind (cluster launches and occupancy here, ``cuTensorMapEncodeTiled`` in ops/gemm/tma.py).
    libcuda is loaded already (by torch)."""
    global _libcuda
    if _libcuda is None:
        _libcuda = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
    fn = getattr(_libcuda, name)
    fn.restype = ctypes.c_int
    fn.argtypes = argtypes
    return fn


def cluster_dims(cluster) -> tuple[int, int, int]:
    """A cluster shape as ``(x, y, z)``: an int is ``(cluster, 1, 1)``."""
    return (cluster, 1, 1) if isinstance(cluster, int) else tuple(cluster) + (1,) * (3 - len(cluster))


def _attributes(cluster, cooperative: bool):
    """The launch attributes of a cluster shape and / or a cooperative launch: ``(array, count)``."""
    attrs = []
    if cluster != 1:
        attrs.append(_LaunchAttribute(_CLUSTER_DIMENSION, 0, *cluster_dims(cluster)))
    if cooperative:
        attrs.append(_LaunchAttribute(_COOPERATIVE, 0, 1))
    return (_LaunchAttribute * len(attrs))(*attrs), len(attrs)


def cluster_attribute(cluster) -> _LaunchAttribute:
    return _LaunchAttribute(_CLUSTER_DIMENSION, 0, *cluster_dims(cluster))


_launch_kernel_ex = None
_NON_PORTABLE_CLUSTER = 14  # CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED


def _launch_ex(
    h: KernelHandle, grid, block, shared_mem: int, stream: int, params: int, cluster, cooperative: bool
) -> None:
    """``launch``'s path for clusters and cooperative launches: cuLaunchKernelEx with them as
    attributes. The Hopper kernels carry no ``__cluster_dims__``: compiled with clusters of 1, the
    K-splitting kernel ran up to 19 % and the swapped TF32 one 10 % slower than with none, and
    pairs launched this way ran as fast as compiled ones (H100, docs/gemm.md#clusters).
    Raises ``RuntimeError`` with the driver's code if the launch fails."""
    global _launch_kernel_ex
    if _launch_kernel_ex is None:
        _launch_kernel_ex = cuda_fn(
            "cuLaunchKernelEx", [ctypes.POINTER(LaunchConfig), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        )
    try:
        key = (grid, block, shared_mem, stream, cluster, cooperative)
        entry = _ex_configs.get(key)
    except TypeError:  # a list for a grid, block or cluster: built for this launch alone
        key, entry = None, None
    if entry is None:
        entry = _ex_config(grid, block, shared_mem, stream, cluster, cooperative)
        if key is not None:
            if len(_ex_configs) >= _EX_CONFIGS_MAX:
                _ex_configs.clear()
            _ex_configs[key] = entry
    cfg, _attrs, non_portable = entry
    if non_portable and not h.non_portable:
        h.allow_non_portable_clusters()
    rc = _launch_kernel_ex(ctypes.byref(cfg), h.ptr, params, None)
    if rc != 0 and context_was_missing():
        rc = _launch_kernel_ex(ctypes.byref(cfg), h.ptr, params, None)
    if rc != 0:
        how = ", ".join(
            ([f"clusters of {cluster_dims(cluster)}"] if cluster != 1 else [])
            + (["cooperative"] if cooperative else [])
        )
        raise RuntimeError(
            f"cuLaunchKernelEx failed (CUresult {rc}) for {h.name} on cuda:{h.device} (grid "
            f"{tuple(grid)}, {how}, block {tuple(block)}, {shared_mem} bytes of shared memory)"
        )


# cuLaunchKernelEx's configurations by (grid, block, shared memory, stream, cluster, cooperative):
# two ctypes structures built per launch cost ~3 us of host time; read-only once built (the
# driver copies them), so any thread may launch with one.
_ex_configs: dict[tuple, tuple] = {}
_EX_CONFIGS_MAX = 256


def _ex_config(grid, block, shared_mem: int, stream: int, cluster, cooperative: bool) -> tuple:
    """``(LaunchConfig, its attributes, whether the cluster is past the portable size)``."""
    attrs, n = _attributes(cluster, cooperative)
    cfg = LaunchConfig(
        grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_mem, stream, ctypes.addressof(attrs), n
    )
    c = cluster_dims(cluster)
    return cfg, attrs, cluster != 1 and c[0] * c[1] * c[2] > PORTABLE_CLUSTER


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h): a launch of cuLaunchKernelEx, or the one that
    cuOccupancyMaxActiveClusters asks about."""

    _fields_ = [
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("hStream", ctypes.c_void_p),
        ("attrs", ctypes.c_void_p),
        ("numAttrs", ctypes.c_uint),
    ]


_stream_get_device = None


def stream_device(stream: int) -> int | None:
    """The device of the raw CUDA stream ``stream`` (cuStreamGetDevice, CUDA 12.8 and newer
    drivers), or None when the driver cannot tell (an older driver, or the default streams 0,
    1 and 2, which are the current device's)."""
    global _stream_get_device
    if stream in (0, 1, 2):
        return None
    if _stream_get_device is None:
        try:
            _stream_get_device = cuda_fn("cuStreamGetDevice", [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)])
        except (AttributeError, OSError):
            _stream_get_device = False
    if _stream_get_device is False:
        return None
    out = ctypes.c_int(-1)
    if _stream_get_device(ctypes.c_void_p(stream), ctypes.byref(out)) != 0:
        raise ValueError(f"stream {stream:#x} is not a CUDA stream the driver knows (cuStreamGetDevice failed)")
    return out.value
