"""The offline check: every registered variant through NVRTC for a given architecture, with
ptxas's register, spill and shared-memory report. Needs no GPU and no driver.

The options are the run-time ones (``Source.options``) plus ``-Xptxas=-v``, which only adds
the report, and ``--no-cache``, so that ptxas runs (and reports) on code NVRTC has cached. All
variants of a source are compiled in one program (each kernel is compiled on its own by NVRTC
either way; at run time each variant is its own compile). A variant whose compiled parameters
are not the ones its declaration promises (``Variant.layout``) fails the check. ``export``
gives a kernel's PTX or cubin, also without a GPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import cubin, nvrtc
from . import options as nvrtc_options
from .nvrtc import KernelCompileError
from .registry import Source


@dataclass
class OfflineResult:
    """What compiling one variant for one architecture produced."""

    source: str
    expr: str
    arch: str
    ok: bool
    registers: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    stack_bytes: int | None = None
    shared_bytes: int | None = None
    log: str = ""
    skipped: str = ""  # why this variant is not built for ``arch`` (an sm_90a-only source on sm_80)
    # ptxas's "Potential Performance Loss" notes on this kernel ("C7514: wgmma.mma_async
    # instructions are serialized due to ..."): info lines, no warning, that cost a Hopper GEMM
    # several % (docs/epilogues.md#how-it-works)
    perf: tuple = ()


_PTXAS_FUNC = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_PERF = re.compile(r"\((C\d+)\) Potential Performance Loss: (.*?) in the function '([^']+)'")


def compile_offline(source: Source, arch: str, exprs=None) -> list[OfflineResult]:
    """Compile ``exprs`` (default: every registered variant) of ``source`` for ``arch``
    (``"sm_90"``): one ``OfflineResult`` per expression. An ``sm_90a`` source asked for
    ``sm_90`` is built as ``sm_90a``; asked for another architecture its results are
    ``skipped``."""
    exprs = list(source.variants) if exprs is None else list(exprs)
    target = source.target(arch)
    if target is None:
        return [OfflineResult(source.name, e, arch, True, skipped=f"built for {source.arch} only") for e in exprs]
    # NOTES: with a driver present, NVRTC (13.0 seen) keeps compiled code in the CUDA cache
    # (CUDA_CACHE_DISABLE=1 turns it off) and returns a cached cubin with an empty log: no ptxas
    # report for any compile of PTX already compiled, in any process (on an H200 host, every
    # compile after a process's first), so autotune kept spilling configurations. --no-cache
    # runs ptxas.
    report = ("-Xptxas=-v",) + (("--no-cache",) if nvrtc_options.available("--no-cache", nvrtc.version()) else ())
    r = nvrtc.compile(source.text(), source.name, exprs, source.options(target) + report)
    # NVRTC's log is a C string: CuPy's binding keeps its terminating NUL (NVRTC 13.5: on a
    # log with ptxas's report), which would end every log shown or compared
    log = r.log.rstrip("\0")
    if not r.ok:
        return [OfflineResult(source.name, e, target, False, log=log) for e in exprs]
    by_lowered = {name: e for e, name in r.lowered.items()}
    results = _parse_ptxas(source.name, target, log, by_lowered)
    info = {by_lowered[name]: v for name, v in cubin.resources(r.image, target).items() if name in by_lowered}
    for res in results:
        if res.registers is None and res.expr in info:
            # No ptxas report (a cached cubin where NVRTC lacks --no-cache): read the cubin.
            # Spilled registers live in the local stack frame, so a 0-byte frame proves there
            # are no spills; a larger frame leaves them unknown.
            res.registers, res.stack_bytes, res.shared_bytes = info[res.expr]
            res.spill_stores = res.spill_loads = 0 if res.stack_bytes == 0 else None
            res.ok, res.log = True, "registers and stack frame read from the cubin (NVRTC gave no ptxas report)"
    for res in results:
        v = source.variants.get(res.expr)
        if v is not None and v.layout is not None:
            sizes = cubin.param_sizes(r.image, r.lowered[res.expr])
            problem = cubin.check_layout(res.expr, v.layout, sizes)
            if problem:  # a launch would pack other arguments than the kernel takes
                res.ok, res.log = False, problem + "; state the parameter list with signature="
    return results


def _parse_ptxas(source: str, arch: str, log: str, by_lowered: dict[str, str]) -> list[OfflineResult]:
    results: dict[str, OfflineResult] = {}
    perf: dict[str, list] = {}  # (ptxas names the function in the note, before or after its report)
    current = None
    for line in log.splitlines():
        if m := _PTXAS_PERF.search(line):
            perf.setdefault(m.group(3), []).append(f"{m.group(1)}: {m.group(2).strip()}")
            continue
        m = _PTXAS_FUNC.search(line)
        if m:
            expr = by_lowered.get(m.group(1))
            current = None
            if expr is not None:
                current = results.setdefault(expr, OfflineResult(source, expr, arch, True, log=log))
            continue
        if current is None:
            continue
        if m := _PTXAS_SPILL.search(line):
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
        if m := _PTXAS_REGS.search(line):
            current.registers = int(m.group(1))
            s = _PTXAS_SMEM.search(line)  # (no figure: none)
            current.shared_bytes = int(s.group(1)) if s else 0
    out = []
    for name, expr in by_lowered.items():
        r = results.get(expr)
        if r is None or r.registers is None:
            r = OfflineResult(source, expr, arch, False, log="no ptxas report for this kernel; NVRTC log:\n" + log)
        r.perf = tuple(perf.get(name, ()))
        out.append(r)
    return out


_ARCH = re.compile(r"(sm|compute)_(\d{2,3})([af]?)")


@dataclass(frozen=True)
class Export:
    """A kernel's compiled code: ``image`` (PTX text for ``fmt`` "ptx", cubin bytes for
    "cubin") for ``arch``, and ``lowered``: each name expression's symbol in it (what
    ``cuModuleGetFunction`` takes)."""

    source: str
    arch: str
    fmt: str
    image: str | bytes
    lowered: dict


def export(source: Source, arch: str, exprs, fmt: str) -> Export:
    """``exprs`` of ``source`` compiled by NVRTC into one module, as ``fmt`` "ptx" (for
    ``compute_XX``; ``arch`` may say ``sm_XX``) or "cubin" (for ``sm_XX``), with the
    options of a launch. No GPU needed. Raises ``ValueError`` for an architecture or format
    that does not fit, ``KernelCompileError`` with NVRTC's log."""
    if fmt not in ("ptx", "cubin"):
        raise ValueError(f"fmt must be 'ptx' or 'cubin', got {fmt!r}")
    m = _ARCH.fullmatch(arch) if isinstance(arch, str) else None
    if m is None:
        raise ValueError(f"arch must look like sm_90 (or compute_90 for PTX), got {arch!r}")
    if fmt == "cubin" and m.group(1) == "compute":
        raise ValueError(f"a cubin is built for a GPU: arch must be sm_{m.group(2)}{m.group(3)}, not {arch}")
    target = source.target(f"sm_{m.group(2)}{m.group(3)}")
    if target is None:
        raise ValueError(f"{source.name} is built for {source.arch} only, not {arch}")
    if fmt == "ptx":
        target = target.replace("sm_", "compute_")
    options = source.options(target)
    exprs = list(exprs)
    r = nvrtc.compile(source.text(), source.name, exprs, options)
    if not r.ok:
        raise KernelCompileError(source.name, r.log.rstrip("\0"), options)
    image = r.image.decode().rstrip("\0") if fmt == "ptx" else r.image
    return Export(source.name, target, fmt, image, dict(r.lowered))
