"""How a loaded kernel fills its GPU, as the driver computes it: blocks per multiprocessor, the
block size reaching the highest occupancy, and the clusters resident at once; each answer cached
on the kernel's handle. ``Kernel.occupancy`` and the persistent GEMM grids ask here."""

from __future__ import annotations

import ctypes

import torch

from .launch import KernelHandle, LaunchConfig, cluster_attribute, cluster_dims, cuda_fn, driver

_max_active_clusters = None


def resident_clusters(h: KernelHandle, cluster: int, block, shared_mem: int) -> int:
    """How many clusters of ``cluster`` CTAs (an int along x, or ``(x, y, z)``) of ``h`` (launched
    as ``launch(..., cluster=)``
    does), each CTA ``block`` threads with ``shared_mem`` bytes of dynamic shared memory, run
    on its device at once (cuOccupancyMaxActiveClusters; cached on the handle). A persistent
    grid larger than this would run its last clusters after the first ones finished: twice
    the time. Raises ``RuntimeError`` with the driver's code if it fails."""
    global _max_active_clusters
    key = (cluster, tuple(block), shared_mem)
    n = h.resident.get(key)
    if n is not None:
        return n
    if shared_mem > h.smem_limit:
        h.allow_shared_memory(shared_mem)
    if _max_active_clusters is None:
        _max_active_clusters = cuda_fn(
            "cuOccupancyMaxActiveClusters",
            [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.POINTER(LaunchConfig)],
        )
    attr = cluster_attribute(cluster)
    c = cluster_dims(cluster)
    cfg = LaunchConfig(c[0], c[1], c[2], block[0], block[1], block[2], shared_mem, None, ctypes.addressof(attr), 1)
    out = ctypes.c_int(0)
    with torch.cuda.device(h.device):
        rc = _max_active_clusters(ctypes.byref(out), h.ptr, ctypes.byref(cfg))
    if rc != 0:
        raise RuntimeError(
            f"cuOccupancyMaxActiveClusters failed (CUresult {rc}) for {h.name} on cuda:{h.device} "
            f"(cluster {cluster}, block {tuple(block)}, {shared_mem} bytes of shared memory)"
        )
    h.resident[key] = n = out.value
    return n


def blocks_per_sm(h: KernelHandle, block, shared_mem: int = 0) -> int:
    """How many blocks of ``h`` of ``block`` threads (a 3-tuple) with ``shared_mem`` bytes of
    dynamic shared memory one multiprocessor holds at once, as the driver reports it
    (cuOccupancyMaxActiveBlocksPerMultiprocessor; cached on the handle). 0: such a block
    cannot run at all (too many registers or too much shared memory for one SM)."""
    key = ("blocks", tuple(block), shared_mem)
    n = h.resident.get(key)
    if n is None:
        if shared_mem > h.smem_limit:
            h.allow_shared_memory(shared_mem)
        with torch.cuda.device(h.device):
            n = int(
                driver().occupancyMaxActiveBlocksPerMultiprocessor(h.ptr, block[0] * block[1] * block[2], shared_mem)
            )
        h.resident[key] = n
    return n


def suggested_block(h: KernelHandle, shared_mem: int = 0, limit: int = 0) -> tuple[int, int]:
    """``(block size, grid size)``: the block size of ``h`` that reaches the highest occupancy
    with ``shared_mem`` bytes of dynamic shared memory per block (``limit``: at most that many
    threads, 0 for none) and the fewest blocks that fill the device with it
    (cuOccupancyMaxPotentialBlockSize)."""
    key = ("suggested", shared_mem, limit)
    got = h.resident.get(key)
    if got is None:
        if shared_mem > h.smem_limit:
            h.allow_shared_memory(shared_mem)
        with torch.cuda.device(h.device):
            min_grid, block = driver().occupancyMaxPotentialBlockSize(h.ptr, shared_mem, limit)
        h.resident[key] = got = (int(block), int(min_grid))
    return got
