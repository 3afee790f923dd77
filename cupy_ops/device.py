"""What cupy_ops reads of a CUDA device, read once per device and kept: its compute
capability, its driver attributes (multiprocessors, shared memory, registers, ...), and the
limits CUDA sets for every device.

The launch layer, ``Kernel``, the autotuner and the GEMM plans all ask here; nothing else
queries the driver for a device's facts.
"""

from __future__ import annotations

import dataclasses
import enum

import torch

from . import compiler

# Dynamic shared memory any block may use without opting in; more is checked against the
# device's own limit (Attr.SMEM_PER_BLOCK_OPTIN) and opted in per kernel.
SHARED_DEFAULT = 48 * 1024
# CTAs a cluster may have on every GPU with clusters; up to MAX_CLUSTER on Hopper once the
# kernel opts in to non-portable sizes.
PORTABLE_CLUSTER = 8
MAX_CLUSTER = 16
# CUDA's limits for every device: grid (x, y, z), block (x, y, z) and threads in a block.
GRID_MAX = (2**31 - 1, 65535, 65535)
BLOCK_MAX = (1024, 1024, 64)
BLOCK_THREADS = 1024


class Attr(enum.IntEnum):
    """The ``cudaDeviceAttr`` values cupy_ops reads (driver_types.h)."""

    REGS_PER_BLOCK = 12  # cudaDevAttrMaxRegistersPerBlock
    MULTIPROCESSORS = 16  # cudaDevAttrMultiProcessorCount
    MEMORY_CLOCK_KHZ = 36  # cudaDevAttrMemoryClockRate
    MEMORY_BUS_BITS = 37  # cudaDevAttrGlobalMemoryBusWidth
    THREADS_PER_SM = 39  # cudaDevAttrMaxThreadsPerMultiProcessor
    SMEM_PER_SM = 81  # cudaDevAttrMaxSharedMemoryPerMultiprocessor
    REGS_PER_SM = 82  # cudaDevAttrMaxRegistersPerMultiprocessor
    COOPERATIVE_LAUNCH = 95  # cudaDevAttrCooperativeLaunch
    SMEM_PER_BLOCK_OPTIN = 97  # cudaDevAttrMaxSharedMemoryPerBlockOptin
    BLOCKS_PER_SM = 106  # cudaDevAttrMaxBlocksPerMultiprocessor
    SMEM_RESERVED_PER_BLOCK = 111  # cudaDevAttrReservedSharedMemoryPerBlock


class MemoryType(enum.IntEnum):
    """``cudaMemoryType`` of a pointer (``cudaPointerGetAttributes``)."""

    UNREGISTERED = 0
    HOST = 1
    DEVICE = 2
    MANAGED = 3


_attributes: dict[tuple[int, int], int] = {}
_capabilities: dict[int, tuple[int, int]] = {}


def attribute(device: int, attr: Attr) -> int:
    """``cudaDeviceGetAttribute(attr, device)``, read once per device."""
    v = _attributes.get((device, attr))
    if v is None:
        rt = compiler.import_cupy().cuda.runtime
        v = _attributes[(device, attr)] = int(rt.deviceGetAttribute(int(attr), device))
    return v


def capability(device: int) -> tuple[int, int]:
    """The compute capability ``(major, minor)`` of CUDA device ``device``."""
    cc = _capabilities.get(device)
    if cc is None:
        cc = _capabilities[device] = tuple(torch.cuda.get_device_capability(device))
    return cc


def arch(device: int) -> str:
    """``"sm_XY"`` of CUDA device ``device``."""
    major, minor = capability(device)
    return f"sm_{major}{minor}"


def sm_count(device: int) -> int:
    """The multiprocessors of CUDA device ``device``."""
    return attribute(device, Attr.MULTIPROCESSORS)


def memory_bandwidth(device: int) -> float:
    """The peak memory bandwidth of CUDA device ``device`` in bytes per microsecond (two
    transfers a memory clock over the bus: an H100 SXM's 3.35e6), 0.0 where the driver does
    not say."""
    try:
        return 2.0 * attribute(device, Attr.MEMORY_CLOCK_KHZ) * attribute(device, Attr.MEMORY_BUS_BITS) / 8 / 1000
    except compiler.import_cupy().cuda.runtime.CUDARuntimeError:  # an attribute this driver lacks
        return 0.0


def smem_optin(device: int) -> int:
    """The dynamic shared memory a block may opt in to on CUDA device ``device``."""
    return attribute(device, Attr.SMEM_PER_BLOCK_OPTIN)


# --- occupancy -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one SM of a GPU holds, for the occupancy estimate: registers, threads, blocks and
    shared memory per SM, shared memory one block may opt in to, what the system reserves of
    shared memory per block, and the registers one block may have."""

    regs_per_sm: int
    threads_per_sm: int
    blocks_per_sm: int
    smem_per_sm: int
    smem_per_block: int
    smem_reserved: int
    regs_per_block: int = 65536


# The CUDA occupancy calculator's figures, for estimates without a GPU (the device's own
# figures are read when there is one).
LIMITS = {
    "sm_80": Limits(65536, 2048, 32, 167936, 166912, 1024),
    "sm_86": Limits(65536, 1536, 16, 102400, 101376, 1024),
    "sm_89": Limits(65536, 1536, 24, 102400, 101376, 1024),
    "sm_90": Limits(65536, 2048, 32, 233472, 232448, 1024),
}


def device_limits(device: int) -> Limits:
    """The ``Limits`` of CUDA device ``device``, from the driver."""
    return Limits(
        *(
            attribute(device, a)
            for a in (
                Attr.REGS_PER_SM,
                Attr.THREADS_PER_SM,
                Attr.BLOCKS_PER_SM,
                Attr.SMEM_PER_SM,
                Attr.SMEM_PER_BLOCK_OPTIN,
                Attr.SMEM_RESERVED_PER_BLOCK,
                Attr.REGS_PER_BLOCK,
            )
        )
    )


def estimated_blocks_per_sm(registers: int, threads: int, shared_bytes: int, limits: Limits) -> int:
    """Blocks of ``threads`` threads using ``registers`` registers each and ``shared_bytes`` of
    shared memory (static + dynamic) that one SM holds, counted as CUDA's occupancy calculator
    (cuda_occupancy.h) counts them: registers are given per warp in units of 256 from each of
    the SM's four sub-partitions, and a block whose warps, rounded up to a multiple of four,
    would need more than a block's registers does not launch; shared memory is given per
    block in units of 128 bytes with the system's reserve. 0: such a block cannot run."""
    warps = -(-threads // 32)
    if threads > 1024 or registers > 255 or shared_bytes > limits.smem_per_block:
        return 0
    regs_per_warp = -(-max(registers, 1) * 32 // 256) * 256
    if regs_per_warp * (-(-warps // 4) * 4) > limits.regs_per_block:
        return 0
    by_regs = (limits.regs_per_sm // 4 // regs_per_warp) * 4 // warps
    by_threads = limits.threads_per_sm // (warps * 32)
    smem = -(-(shared_bytes + limits.smem_reserved) // 128) * 128
    by_smem = limits.smem_per_sm // smem
    return max(0, min(by_regs, by_threads, by_smem, limits.blocks_per_sm))
