"""Compile layer: CUDA C in ``cuda_src/`` -> NVRTC (through CuPy) -> kernel functions.

Nothing here runs at ``import cupy_ops``: a kernel source is compiled the first time one of
its functions is asked for, once per process (CuPy's disk cache, ``CUPY_CACHE_DIR``, makes
later processes skip NVRTC), and each function is loaded once per device.

Every op module registers the template instantiations it launches (``register``), so the
offline check (``python -m cupy_ops compile``) compiles exactly the variants that run,
with the same source assembly (``assemble``) and the same options.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

# Options given to NVRTC on every path. CuPy adds ``-arch=sm_XX`` (the device's) and
# ``-ftz=true`` itself; the offline compile adds the same two (see ``compile_offline``).
OPTIONS: tuple[str, ...] = ("-std=c++17",)

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[ \t]*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*$", re.MULTILINE)


class KernelCompileError(RuntimeError):
    """NVRTC rejected a kernel source. ``source`` names the file, ``log`` is NVRTC's log."""

    def __init__(self, source: str, log: str, options: tuple[str, ...] = ()):
        self.source = source
        self.log = log
        self.options = options
        super().__init__(f"NVRTC failed to compile {source} (options {' '.join(options)}):\n{log}")


def source_dir() -> Path:
    """The folder holding the ``.cu`` sources.

    An installed wheel carries them inside the package (``cupy_ops/_cuda_src``); a source
    checkout or editable install reads the repository's ``cuda_src/`` directly.
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / "_cuda_src", here.parent / "cuda_src"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"cupy_ops kernel sources not found: looked in {here / '_cuda_src'} and "
        f"{here.parent / 'cuda_src'}; reinstall the package"
    )


def assemble(filename: str, directory: Path | None = None) -> str:
    """Return the source of ``filename`` with its quoted ``#include``s pasted in place.

    Inlining (rather than passing ``-I``) puts every header's text into the string CuPy
    hashes for its disk cache, so an edited header can never reuse a stale kernel.
    Each header is pasted once (``#pragma once`` semantics).
    """
    directory = source_dir() if directory is None else directory
    path = directory / filename
    if not path.is_file():
        raise FileNotFoundError(f"kernel source {path} not found")
    return assemble_text(path.read_text(), filename, [directory])


def assemble_text(text: str, name: str, search: list[Path]) -> str:
    """``text`` (the source called ``name``) with quoted includes pasted from ``search``."""
    seen: set[str] = set()

    def expand(text: str, name: str, chain: tuple[str, ...]) -> str:
        seen.add(name)
        text = _PRAGMA_ONCE.sub("", text)

        def paste(match: re.Match) -> str:
            inc = match.group(1)
            if inc in seen:
                return f"// {inc}: already included"
            for folder in search:
                if (folder / inc).is_file():
                    body = expand((folder / inc).read_text(), inc, chain + (name,))
                    return f"// begin {inc}\n{body}\n// end {inc}"
            raise FileNotFoundError(f"kernel source {inc} not found (included from {name}; looked in "
                                    f"{', '.join(map(str, search))})")

        return _INCLUDE.sub(paste, text)

    return expand(text, name, ())


@dataclass(frozen=True)
class SourceSpec:
    """One kernel source and the template instantiations launched from it.

    Built-in kernels are files of ``cuda_src/`` (``code`` None); user kernels
    (``cupy_ops.Kernel``) carry their ``code`` and the folder their includes are looked up in
    first (``cuda_src/`` after it, so ``#include "common.cuh"`` always works).
    """

    filename: str
    name_expressions: tuple[str, ...]
    code: str | None = None
    directory: str | None = None
    arch: str | None = None   # built only for this architecture (e.g. "sm_90a"); None: the device's

    def options(self) -> tuple[str, ...]:
        """NVRTC options of this source at run time (CuPy adds ``-arch`` and ``-ftz=true`` to
        those of a source built for the device's architecture; see ``_load_arch_specific``)."""
        return OPTIONS + ((f"-arch={self.arch}", "-ftz=true") if self.arch else ())

    def builds_for(self, arch: str) -> str | None:
        """The ``-arch`` value to compile this source with for a device of ``arch`` (``"sm_90"``),
        or None when the source is not built for it (an ``sm_90a`` file on ``sm_80``)."""
        if self.arch is None:
            return arch
        return self.arch if self.arch.rstrip("a") == arch.rstrip("a") else None

    def text(self) -> str:
        if self.code is None:
            return assemble(self.filename)
        search = ([Path(self.directory)] if self.directory else []) + [source_dir()]
        return assemble_text(self.code, self.filename, search)


_registry: dict[str, SourceSpec] = {}
_modules: dict[str, object] = {}          # filename -> cupy.RawModule
_lock = threading.RLock()


def register(filename: str, name_expressions, *, code: str | None = None,
             directory: str | None = None, arch: str | None = None) -> SourceSpec:
    """Declare that ``name_expressions`` (e.g. ``"relu<float>"``) of ``filename`` are used.

    Called by each op module at import (cheap: no file is read). Registering the same file
    twice merges the expressions (a module compiled earlier is then compiled again).
    ``code``/``directory``: the source of a user kernel; ``arch``: see ``SourceSpec``.
    """
    with _lock:
        old = _registry.get(filename)
        exprs = tuple(dict.fromkeys((old.name_expressions if old else ()) + tuple(name_expressions)))
        spec = SourceSpec(filename, exprs, code, directory, arch)
        if old != spec:  # a module compiled before lacks the new expressions: build it again
            _registry[filename] = spec
            _modules.pop(filename, None)
            _arch_binaries.pop(filename, None)
            for key in [k for k in _arch_modules if k[0] == filename]:
                del _arch_modules[key]
        return spec


def registered(builtin_only: bool = True) -> dict[str, SourceSpec]:
    """Registered sources by name (after importing the op modules); built-in ones by default."""
    from . import kernel, ops  # noqa: F401  (importing the ops declares their kernels)

    for k in kernel.BUILTINS:
        k.params  # parsing a built-in kernel registers its instantiations
    return {k: v for k, v in _registry.items() if not builtin_only or v.code is None}


# --- run-time path ---------------------------------------------------------------------

_functions: dict[tuple, object] = {}      # (filename, expr, device) -> cupy Function


def get_function(filename: str, expr: str, device: int):
    """The compiled kernel ``expr`` of ``filename`` loaded on CUDA device ``device``.

    Returns a ``cupy.cuda.function.Function`` (launch it with ``launch.launch``). The first
    call compiles the whole file (all its registered instantiations at once); later calls are
    a dictionary lookup. Raises ``KernelCompileError`` with NVRTC's log on a compile error.
    """
    fn = _functions.get((filename, expr, device))
    if fn is None:
        fn = _load(filename, expr, device)
    return fn


def _import_cupy():
    """Import CuPy; if its kernel cache folder (``CUPY_CACHE_DIR``) cannot be created, warn and
    use a fresh temporary folder for this process instead of failing (CuPy creates the folder
    when it is imported)."""
    try:
        import cupy

        return cupy
    except OSError as exc:
        fallback = tempfile.mkdtemp(prefix="cupy_ops_kernel_cache_")
        warnings.warn(f"cupy_ops: the CuPy kernel cache {cache_dir()!r} is not usable ({exc}); caching compiled "
                      f"kernels in {fallback} for this process instead", RuntimeWarning, stacklevel=3)
        os.environ["CUPY_CACHE_DIR"] = fallback
        for name in [m for m in sys.modules if m == "cupy" or m.startswith("cupy.")]:
            del sys.modules[name]
        import cupy

        return cupy


def _load(filename: str, expr: str, device: int):
    cupy = _import_cupy()
    from cupy.cuda.compiler import CompileException

    with _lock:
        key = (filename, expr, device)
        if key in _functions:
            return _functions[key]
        spec = _registry.get(filename)
        if spec is None or expr not in spec.name_expressions:
            raise KeyError(f"{expr!r} of {filename} was never registered with cupy_ops.compiler.register")
        if spec.arch is not None:
            fn = _functions[key] = _load_arch_specific(cupy, spec, expr, device)
            return fn
        module = _modules.get(filename)
        if module is None:
            module = cupy.RawModule(
                code=spec.text(), options=spec.options(), name_expressions=list(spec.name_expressions)
            )
            _modules[filename] = module
        with cupy.cuda.Device(device):
            try:
                try:
                    fn = module.get_function(expr).kernel
                except OSError as exc:  # the cache folder stopped being writable
                    warnings.warn(f"cupy_ops: writing to the CuPy kernel cache {cache_dir()!r} failed ({exc}); "
                                  "compiling in memory from now on", RuntimeWarning, stacklevel=3)
                    os.environ["CUPY_CACHE_IN_MEMORY"] = "1"
                    module = _modules[filename] = cupy.RawModule(
                        code=spec.text(), options=spec.options(), name_expressions=list(spec.name_expressions))
                    fn = module.get_function(expr).kernel
            except CompileException as exc:
                # A failed module must not be reused: drop it so a later call retries.
                _modules.pop(filename, None)
                raise KernelCompileError(filename, exc.get_message() if hasattr(exc, "get_message") else str(exc),
                                         spec.options()) from None
        _functions[key] = fn
        return fn


_arch_binaries: dict[str, tuple[bytes, dict[str, str]]] = {}   # filename -> (cubin, {expr: lowered name})
_arch_modules: dict[tuple[str, int], object] = {}                # (filename, device) -> loaded module


def _load_arch_specific(cupy, spec: SourceSpec, expr: str, device: int):
    """A function of a source built for one architecture (``spec.arch``, e.g. sm_90a).

    CuPy cannot build these: it always appends the device's own ``-arch`` (sm_90), and
    whether NVRTC then still accepts sm_90a-only instructions depends on its version. So
    NVRTC is called here with that one ``-arch`` (as the offline check does), the cubin is
    kept on disk next to CuPy's cache (keyed by source, options and NVRTC version) and
    loaded with the driver. Raises ``RuntimeError`` on a device of another architecture and
    ``KernelCompileError`` with NVRTC's log when the source does not compile.
    """
    cc = cupy.cuda.Device(device).compute_capability
    if spec.builds_for(f"sm_{cc}") is None:
        raise RuntimeError(f"{spec.filename} is built for {spec.arch} only; cuda:{device} is sm_{cc}")
    binary = _arch_binaries.get(spec.filename)
    if binary is None:
        binary = _arch_binaries[spec.filename] = _arch_binary(spec)
    cubin, lowered = binary
    module = _arch_modules.get((spec.filename, device))
    with cupy.cuda.Device(device):
        if module is None:
            module = _arch_modules[(spec.filename, device)] = cupy.cuda.function.Module()
            module.load(cubin)
        return module.get_function(lowered[expr])


def _arch_binary(spec: SourceSpec) -> tuple[bytes, dict[str, str]]:
    import hashlib
    import json

    nvrtc = offline_nvrtc()
    src, options, exprs = spec.text(), spec.options(), list(spec.name_expressions)
    tag = "\0".join([src, *options, *exprs, str(nvrtc.getVersion())])
    stem = Path(cache_dir()) / f"cupy_ops_{spec.arch}_{hashlib.sha256(tag.encode()).hexdigest()[:32]}"
    try:
        lowered = json.loads(stem.with_suffix(".json").read_text())
        return stem.with_suffix(".cubin").read_bytes(), lowered
    except (OSError, ValueError):
        pass
    log, cubin, lowered = _nvrtc_compile(nvrtc, src, spec.filename, exprs, options)
    if cubin is None:
        raise KernelCompileError(spec.filename, log, options)
    try:  # best effort: an unwritable cache only costs the next process a compile
        stem.parent.mkdir(parents=True, exist_ok=True)
        for suffix, data in ((".cubin", cubin), (".json", json.dumps(lowered).encode())):
            tmp = stem.with_suffix(f"{suffix}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, stem.with_suffix(suffix))
    except OSError:
        pass
    return cubin, lowered


# --- offline path (no GPU) -------------------------------------------------------------

@dataclass
class OfflineResult:
    """What compiling one instantiation for one architecture produced."""

    filename: str
    expr: str
    arch: str
    ok: bool
    registers: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    stack_bytes: int | None = None
    shared_bytes: int | None = None
    log: str = ""
    skipped: str = ""   # why this variant is not built for ``arch`` (an sm_90a-only file on sm_80)


_PTXAS_FUNC = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")


def offline_options(arch: str) -> tuple[str, ...]:
    """The run-time options plus what CuPy adds at run time, for ``arch`` (e.g. ``"sm_90"``)."""
    return OPTIONS + (f"-arch={arch}", "-ftz=true", "-Xptxas=-v")


def compile_offline(filename: str, name_expressions, arch: str) -> list[OfflineResult]:
    """Compile ``filename`` for ``arch`` with NVRTC directly (no GPU, no driver needed).

    Returns one ``OfflineResult`` per name expression with ptxas's register and spill report
    (its ``arch`` is the one compiled for: ``sm_90a`` for an sm_90a-only file asked for
    ``sm_90``; such a file asked for another architecture gives results with ``skipped`` set).
    """
    exprs = list(name_expressions)
    spec = _registry.get(filename)
    target = spec.builds_for(arch) if spec is not None else arch
    if target is None:
        return [OfflineResult(filename, e, arch, True, skipped=f"built for {spec.arch} only") for e in exprs]
    nvrtc = offline_nvrtc()
    src = spec.text() if spec is not None and spec.code is not None else assemble(filename)
    log, cubin, names = _nvrtc_compile(nvrtc, src, filename, exprs, offline_options(target))
    if cubin is None:
        return [OfflineResult(filename, e, target, False, log=log) for e in exprs]
    lowered = {name: e for e, name in names.items()}
    results = _parse_ptxas(filename, target, log, lowered)
    info = {lowered[name]: v for name, v in _cubin_resources(cubin).items() if name in lowered}
    for r in results:
        if r.registers is None and r.expr in info:
            # This NVRTC returned no ptxas report (seen with NVRTC 13.0, now and then): read the
            # cubin. Spilled registers live in the local stack frame, so a 0-byte frame proves
            # there are no spills; a larger frame leaves them unknown.
            r.registers, r.stack_bytes = info[r.expr]
            r.spill_stores = r.spill_loads = 0 if r.stack_bytes == 0 else None
            r.ok, r.log = True, "registers and stack frame read from the cubin (NVRTC gave no ptxas report)"
    return results


def _nvrtc_compile(nvrtc, src: str, filename: str, exprs: list[str], options) -> tuple[str, bytes | None, dict]:
    """One NVRTC compile: ``(log, cubin, {expr: lowered name})``; ``cubin`` None on an error."""
    prog = nvrtc.createProgram(src, filename, [], [])
    try:
        for e in exprs:
            nvrtc.addNameExpression(prog, e)
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError:
            return nvrtc.getProgramLog(prog), None, {}
        return nvrtc.getProgramLog(prog), nvrtc.getCUBIN(prog), {e: nvrtc.getLoweredName(prog, e) for e in exprs}
    finally:
        nvrtc.destroyProgram(prog)


def offline_nvrtc():
    """CuPy's NVRTC binding, loaded as the run-time path loads it (torch, then CuPy first:
    importing only the binding can bind another libnvrtc on machines that carry several)."""
    import torch  # noqa: F401
    import cupy  # noqa: F401
    from cupy_backends.cuda.libs import nvrtc

    return nvrtc


def _cubin_resources(cubin: bytes) -> dict[str, tuple[int, int]]:
    """``{mangled kernel name: (registers, stack frame bytes)}`` from a cubin's ``.nv.info``
    records (EIATTR_REGCOUNT 0x2f, EIATTR_FRAME_SIZE 0x11: (symbol index, value) each)."""
    import struct

    if cubin[:4] != b"\x7fELF":
        return {}
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]

    def cstr(offset: int) -> str:
        return cubin[offset:cubin.index(b"\0", offset)].decode()

    names = [cstr(sections[shstrndx][4] + sec[0]) for sec in sections]
    symtab = sections[names.index(".symtab")]
    strtab = sections[names.index(".strtab")][4]
    regs: dict[str, int] = {}
    frames: dict[str, int] = {}
    for name, sec in zip(names, sections):
        if name != ".nv.info":
            continue
        pos, end = sec[4], sec[4] + sec[5]
        while pos + 4 <= end:
            fmt, attr, size = struct.unpack_from("<BBH", cubin, pos)
            if fmt != 0x04:          # only EIFMT_SVAL records carry a payload
                pos += 4
                continue
            if attr in (0x2F, 0x11):
                sym, value = struct.unpack_from("<II", cubin, pos + 4)
                st_name, = struct.unpack_from("<I", cubin, symtab[4] + sym * 24)
                (regs if attr == 0x2F else frames)[cstr(strtab + st_name)] = value
            pos += 4 + size
    return {k: (v, frames.get(k, -1)) for k, v in regs.items()}


def _parse_ptxas(filename: str, arch: str, log: str, lowered: dict[str, str]) -> list[OfflineResult]:
    results: dict[str, OfflineResult] = {}
    current = None
    for line in log.splitlines():
        m = _PTXAS_FUNC.search(line)
        if m:
            expr = lowered.get(m.group(1))
            current = None
            if expr is not None:
                current = results.setdefault(expr, OfflineResult(filename, expr, arch, True, log=log))
            continue
        if current is None:
            continue
        if (m := _PTXAS_SPILL.search(line)):
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
        if (m := _PTXAS_REGS.search(line)):
            current.registers = int(m.group(1))
            if (s := _PTXAS_SMEM.search(line)):
                current.shared_bytes = int(s.group(1))
    out = []
    for expr in lowered.values():
        r = results.get(expr)
        if r is None or r.registers is None:
            r = OfflineResult(filename, expr, arch, False, log="no ptxas report for this kernel; NVRTC log:\n" + log)
        out.append(r)
    return out


def cache_dir() -> str:
    """CuPy's kernel cache folder (``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``)."""
    return os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache"))
