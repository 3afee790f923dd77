"""Compile only what is launched: one variant per NVRTC compile, kept per process and on disk."""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass

from . import cache, cubin, nvrtc
from .nvrtc import KernelCompileError
from .registry import Variant

log = logging.getLogger("cupy_ops")


@dataclass(frozen=True)
class Binary:
    """A compiled variant: ``image`` (a cubin, or PTX for a device newer than NVRTC), the
    kernel's lowered name in it, and where it came from (``cached``: the disk cache)."""

    image: bytes
    lowered: str
    arch: str
    cached: bool
    key: bytes


_binaries: dict[tuple, Binary] = {}
_locks: dict[tuple, threading.Lock] = {}
_locks_lock = threading.Lock()


def binary(variant: Variant, arch: str, *, rebuild: bool = False) -> Binary:
    """The binary of ``variant`` for ``-arch=arch`` (e.g. ``"sm_90"``, ``"sm_90a"``).

    Looked up in this process, then in the disk cache (checked, see ``cache``), else compiled
    by NVRTC with the variant's one name expression. ``rebuild``: ignore both caches (a cached
    binary that failed to load). Raises ``KernelCompileError`` with NVRTC's log, and
    ``ValueError`` when the kernel's parameters as compiled are not the ones the variant's
    ``layout`` promises (its launches would pack the wrong arguments).
    """
    mkey = (variant, arch)
    if not rebuild:
        b = _binaries.get(mkey)
        if b is not None:
            return b
    with _locks_lock:
        lock = _locks.setdefault(mkey, threading.Lock())
    with lock:
        if not rebuild and mkey in _binaries:
            return _binaries[mkey]
        src = variant.source
        text, options = src.text(), src.options(arch)
        parts = [text, "\0".join(options), variant.expr, ".".join(map(str, nvrtc.version()))]
        seen = src.fingerprint()
        if seen:  # a user's source: every file it includes (a built-in's text holds its headers)
            parts.append(seen)
        k = cache.key(*parts)
        # an include cupy_ops cannot follow (#include MACRO): the disk cache could be stale
        disk = src.tracked
        stored = None if rebuild or not disk else cache.read(k)
        if stored is not None:
            meta = json.loads(stored[0])
            b = Binary(stored[1], meta["lowered"], arch, True, k)
        else:
            t0 = time.perf_counter()
            r = nvrtc.compile(text, src.name, [variant.expr], options)
            if not r.ok:
                raise KernelCompileError(src.name, r.log, options)
            lowered = r.lowered[variant.expr]
            log.info("compiled %s of %s for %s in %.2f s", variant.expr, src.name, arch, time.perf_counter() - t0)
            if disk and (not seen or (src.rescan() == src.includes and src.fingerprint() == seen)):
                # (a header edited while NVRTC read it: this binary is not the key's)
                cache.write(k, json.dumps({"lowered": lowered, "expr": variant.expr}).encode(), r.image)
            b = Binary(r.image, lowered, arch, False, k)
        check_layout(variant, b.image, b.lowered)
        _binaries[mkey] = b
        return b


def check_layout(variant: Variant, image: bytes, lowered: str) -> None:
    """``ValueError`` when the parameters of ``lowered`` in ``image`` are not the variant's
    ``layout`` (None: nothing promised)."""
    if variant.layout is None:
        return
    problem = cubin.check_layout(variant.expr, variant.layout, cubin.param_sizes(image, lowered))
    if problem:
        raise ValueError(
            f"{problem}; arguments packed that way would not be the kernel's: state the parameter list with signature="
        )


def forget(variant: Variant, arch: str) -> None:
    """Drop ``variant``'s binary for ``arch`` from this process and from the disk cache."""
    b = _binaries.pop((variant, arch), None)
    if b is not None:
        cache.remove(b.key)


def drop(variant: Variant) -> None:
    """Drop ``variant``'s binaries (every arch) from this process, keeping the disk cache."""
    for key in [k for k in list(_binaries) if k[0] is variant]:
        _binaries.pop(key, None)
        with _locks_lock:
            _locks.pop(key, None)
