"""The registry of kernel sources and the variants launched from them.

The layers above write into it: each op module declares, at import and without reading any
file, the sources it uses and the template instantiations ("variants") it launches; a user's
``cupy_ops.Kernel`` declares its code. The compile layer reads it back for the offline check
(``python -m cupy_ops compile`` imports the ops first), never the other way round.
"""
from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from . import options as _options
from .source import assemble, assemble_text, source_dir

# Options of every compile, at run time and offline alike. -ftz=true: what CuPy always passed,
# and what the kernels are written and measured for; the arithmetic that must match torch bit
# for bit (which does not flush denormals) is written as .rn PTX without .ftz (common.cuh).
BASE_OPTIONS: tuple[str, ...] = ("-std=c++17", "-ftz=true")


class Variant:
    """One instantiation (an NVRTC name expression, e.g. ``"relu<float>"``) of a ``Source``.

    Interned: ``Source.variant`` returns the same object for the same expression, so variants
    hash by identity and key the launch layer's handle cache cheaply. ``layout``: what the
    declaration promises of the compiled kernel's parameters, ``[(name, C type, bytes or
    None, at most bytes)]``, checked against each binary NVRTC builds (None: not checked).
    """

    __slots__ = ("source", "expr", "layout")

    def __init__(self, source: "Source", expr: str):
        self.source = source
        self.expr = expr
        self.layout = None

    def __repr__(self) -> str:
        return f"<variant {self.expr} of {self.source.name}>"


class Source:
    """One CUDA source and how it is compiled.

    ``name``: a file of ``cuda_src/`` (built-in) or the name a user's kernel is known by;
    ``code``: the user's text (None for built-ins, whose file is read on first compile);
    ``defines``: ``-D`` options (kernel geometry the host decides, ``(name, value)`` pairs);
    ``arch``: the one architecture the source is built for (``"sm_90a"``: wgmma, TMA), or
    None for the architecture of the device it runs on; ``flags``: a user's own NVRTC
    options (checked: ``options.check``), after the others, which they may override.
    """

    __slots__ = ("name", "code", "defines", "arch", "flags", "variants", "_text", "_lock", "_base")

    def __init__(self, name: str, code: str | None, defines: tuple, arch: str | None, flags: tuple = ()):
        self.name = name
        self.code = code            # assembled already (headers pasted) for user code
        self.defines = defines
        self.arch = arch
        self.flags = tuple(flags)
        self.variants: dict[str, Variant] = {}
        self._text = code
        self._lock = threading.Lock()
        # a user's -std= or -ftz= replaces the default one (NVRTC warns of two, the last wins)
        replaced = _options.overridden(self.flags)
        self._base = tuple(o for o in BASE_OPTIONS if _options.canonical(o) not in replaced)

    @property
    def builtin(self) -> bool:
        return self.code is None

    def text(self) -> str:
        """The complete source text (headers pasted in). A built-in file is read on the first
        call and kept for the process."""
        if self._text is None:
            self._text = assemble(self.name)
        return self._text

    def options(self, arch: str) -> tuple[str, ...]:
        """NVRTC options for ``-arch=arch`` (``sm_90``, ``sm_90a`` or ``compute_XX``): the
        cache key holds them all, so an edited option or define compiles anew."""
        return (self._base + (f"-arch={arch}",) + tuple(_options.define_option(k, v) for k, v in self.defines)
                + self.flags)

    def target(self, device_arch: str) -> str | None:
        """The architecture to build for a device of ``device_arch`` (``"sm_90"``), or None
        when this source is not built for it (an ``sm_90a`` source on ``sm_80``)."""
        if self.arch is None:
            return device_arch
        return self.arch if self.arch.rstrip("a") == device_arch.rstrip("a") else None

    def variant(self, expr: str) -> Variant:
        """The ``Variant`` of ``expr`` (registered on first request)."""
        v = self.variants.get(expr)
        if v is None:
            with self._lock:
                v = self.variants.setdefault(expr, Variant(self, expr))
        return v

    def __repr__(self) -> str:
        return f"<source {self.name}{' for ' + self.arch if self.arch else ''}>"


_sources: dict[tuple, Source] = {}
_lock = threading.Lock()


def _defines(defines) -> tuple:
    items = sorted(dict(defines or {}).items())
    for k, v in items:
        if not isinstance(k, str) or not k.isidentifier() or not isinstance(v, (int, str)) or isinstance(v, bool):
            raise TypeError(f"defines must map identifiers to ints or strings, got {k!r}: {v!r}")
    return tuple(items)


def builtin(filename: str, *, defines=None, arch: str | None = None) -> Source:
    """The ``Source`` of ``cuda_src/filename`` compiled with ``defines`` (a dict) for ``arch``.
    Cheap (no file is read); the same arguments give the same object."""
    key = ("builtin", filename, _defines(defines), arch)
    with _lock:
        src = _sources.get(key)
        if src is None:
            src = _sources[key] = Source(filename, None, key[2], arch)
        return src


def assemble_user(code: str, name: str, *, path: str | Path | None = None, include_dirs=(), prelude=()) -> str:
    """A user's ``code`` (read from the file ``path``, or a string: None) with its includes
    pasted (``assemble_text``): a quoted one from next to its includer, then ``include_dirs``,
    then ``cuda_src/``; an angled one from ``include_dirs``. NVRTC's messages name the file
    by its absolute path (a string by ``name``) and the lines as the user wrote them."""
    dirs = [Path(d) for d in include_dirs]
    shown = str(Path(path).resolve()) if path is not None else name
    return assemble_text(code, shown, dirs + [source_dir()], path=path, angled=dirs, prelude=prelude)


def user(code: str, name: str, *, directory: str | Path | None = None, path: str | Path | None = None,
         include_dirs=(), prelude=(), defines=None, options=(), arch: str | None = None, tag=None,
         assembled: str | None = None) -> Source:
    """The ``Source`` of a user's ``code`` (known as ``name`` in messages), with its includes
    pasted now (``assemble_user``; ``directory``: a folder searched first, for code that is not
    from a file; ``assembled``: that text, already made). ``defines`` (a dict) and ``options``
    (checked NVRTC options) are part of every compile of it. The source is identified by the
    resulting text, its defines, options and ``tag`` (what the caller reads from the text, e.g. its
    parameter list), so an edited file, header or option is a new source, compiled anew."""
    if assembled is None:
        dirs = ([Path(directory)] if directory else []) + list(include_dirs)
        assembled = assemble_user(code, name, path=path, include_dirs=dirs, prelude=prelude)
    digest = hashlib.sha256(assembled.encode()).hexdigest()
    flags = _options.check(options)
    key = ("user", name, digest, _options.defines(defines), flags, arch, tag)
    with _lock:
        src = _sources.get(key)
        if src is None:
            src = _sources[key] = Source(name, assembled, key[3], arch, flags)
        return src


def release(source: Source) -> None:
    """Forget a user ``source`` (its last ``Kernel`` is gone): ``user`` makes a new one for the
    same text. Built-in sources stay for the process."""
    if source.builtin:
        return
    with _lock:
        for key in [k for k, s in _sources.items() if s is source]:
            del _sources[key]


def sources(builtin_only: bool = True) -> list[Source]:
    """The registered sources (the built-in ones by default), in registration order."""
    with _lock:
        return [s for s in _sources.values() if s.builtin or not builtin_only]
