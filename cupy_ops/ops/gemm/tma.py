"""TMA tensor maps for the Hopper GEMM kernels (cuda_src/gemm_wgmma.cuh), built by the Hopper
families (wgmma.py, tf32x3.py, fp16x3.py).

A tensor map (``CUtensorMap``, 128 opaque bytes) tells the TMA unit where a 2-D matrix lives
and which box one load copies; it is built on the host by the driver's
``cuTensorMapEncodeTiled`` and passed to the kernel by value. CuPy does not bind that driver
function, so it is called through ctypes (``launch.cuda_fn``). Maps
are cached by everything they encode (one dict lookup per launch once warm).
"""

from __future__ import annotations

import ctypes

import torch

from ... import launch

# CUtensorMapDataType (cuda.h). float32 is loaded as TFLOAT32 (11): the TMA unit then rounds
# each value to TF32 (to nearest) on the way to shared memory, exactly as torch's cuBLAS TF32
# and our mma.sync kernel (cvt.rna) do; as FLOAT32 (7) the tensor cores would truncate the raw
# fp32 bits instead, twice the error and biased (docs/numerics.md#tf32-rounding: with FLOAT32
# all 262139 of 262144 K=8 outputs differed from torch's on an H200; with TFLOAT32 none did). The 3xTF32
# kernel needs the exact fp32 values (it splits them itself): ``exact=True`` loads FLOAT32, and
# so does a map of an output (the Hopper kernel's TMA stores of C write the fp32 values as they are).
_DATA_TYPE = {torch.float16: 6, torch.float32: 11, torch.bfloat16: 9}
_FLOAT32 = 7
_SWIZZLE_128B = 3  # CU_TENSOR_MAP_SWIZZLE_128B: what the kernel's wgmma descriptors read
_L2_PROMOTION_256B = 3  # CU_TENSOR_MAP_L2_PROMOTION_L2_256B
_OOB_FILL_ZEROS = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: out-of-bounds elements read as zero
_INVALID_CONTEXT = 201  # CUDA_ERROR_INVALID_CONTEXT: the calling thread has no current context
_CACHE_LIMIT = 4096

_encode = None
_cache: dict[tuple, bytes] = {}


def _encoder():
    global _encode
    if _encode is None:
        _encode = launch.cuda_fn(
            "cuTensorMapEncodeTiled",
            [
                ctypes.c_void_p,
                ctypes.c_int,
                ctypes.c_uint32,
                ctypes.c_void_p,
                ctypes.POINTER(ctypes.c_uint64),
                ctypes.POINTER(ctypes.c_uint64),
                ctypes.POINTER(ctypes.c_uint32),
                ctypes.POINTER(ctypes.c_uint32),
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
            ],
        )
    return _encode


def tensor_map(
    t: torch.Tensor, inner: int, outer: int, ld: int, box_inner: int, box_outer: int, *, exact: bool = False
) -> bytes:
    """The tensor map of the matrix at ``t.data_ptr()``: ``outer`` rows of ``inner``
    contiguous elements, rows ``ld`` elements apart, loaded or stored in boxes of
    ``box_inner`` x ``box_outer`` with the 128-byte swizzle. Parts of a box past the matrix
    read as zero (loads) and are not written (stores). float32 is rounded to TF32 on the way
    (loads) unless ``exact``.

    Raises ``RuntimeError`` with the driver's error code if the driver rejects the map.
    """
    return tensor_map_at(t.data_ptr(), t.dtype, inner, outer, ld, box_inner, box_outer, exact=exact)


def tensor_map_at(
    ptr: int,
    dtype: torch.dtype,
    inner: int,
    outer: int,
    ld: int,
    box_inner: int,
    box_outer: int,
    *,
    exact: bool = False,
    depth: int = 0,
    depth_stride: int = 0,
) -> bytes:
    """``tensor_map`` of the ``dtype`` matrix at device address ``ptr`` (a part of a workspace).
    ``depth`` > 0: a 3-D map of ``depth`` such matrices ``depth_stride`` elements apart (a batch,
    the outermost coordinate; boxes one matrix deep)."""
    key = (ptr, dtype, inner, outer, ld, box_inner, box_outer, exact, depth, depth_stride)
    m = _cache.get(key)
    if m is not None:
        return m
    es = dtype.itemsize
    rank = 3 if depth else 2
    buf = (ctypes.c_uint64 * 16)()
    dims = (ctypes.c_uint64 * rank)(inner, outer, *((depth,) if depth else ()))
    strides = (ctypes.c_uint64 * (rank - 1))(ld * es, *((depth_stride * es,) if depth else ()))
    box = (ctypes.c_uint32 * rank)(box_inner, box_outer, *((1,) if depth else ()))
    elem = (ctypes.c_uint32 * rank)(*((1,) * rank))
    code = _FLOAT32 if exact and dtype == torch.float32 else _DATA_TYPE[dtype]
    for _ in range(2):  # (once more where this thread had no current context: autograd's, a worker's)
        rc = _encoder()(
            buf, code, rank, ptr, dims, strides, box, elem, 0, _SWIZZLE_128B, _L2_PROMOTION_256B, _OOB_FILL_ZEROS
        )
        if rc != _INVALID_CONTEXT or not launch.context_was_missing():
            break
    if rc != 0:
        batch = f" x {depth} ({depth_stride} apart)" if depth else ""
        raise RuntimeError(
            f"cuTensorMapEncodeTiled failed (CUresult {rc}) for a {outer}x{inner}{batch} {dtype} "
            f"matrix with row pitch {ld} at 0x{ptr:x}, box {box_outer}x{box_inner}"
        )
    m = bytes(buf)
    if len(_cache) >= _CACHE_LIMIT:
        _cache.clear()
    _cache[key] = m
    return m
