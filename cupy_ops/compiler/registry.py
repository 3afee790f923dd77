"""The registry of kernel sources and the variants launched from them.

The layers above write into it: each op module declares, at import and without reading any
file, the sources it uses and the template instantiations ("variants") it launches; a user's
``cupy_ops.Kernel`` declares its code. The compile layer reads it back for the offline check
(``python -m cupy_ops compile`` imports the ops first), never the other way round.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from . import headers, nvrtc, targets
from . import options as _options
from . import source as _source
from .source import assemble, assemble_text, source_dir

# Options of every compile of cupy_ops' own sources, at run time and offline alike. -ftz=true:
# what CuPy always passed, and what the kernels are written and measured for; the arithmetic
# that must match torch bit for bit (which does not flush denormals) is written as .rn PTX
# without .ftz (common.cuh). A user's source is compiled as nvcc compiles it (USER_OPTIONS):
# nvcc's and NVRTC's default -ftz=false, so that it keeps denormals as under load_inline.
BASE_OPTIONS: tuple[str, ...] = ("-std=c++17", "-ftz=true")
USER_OPTIONS: tuple[str, ...] = ("-std=c++17",)


class Variant:
    """One instantiation (an NVRTC name expression, e.g. ``"relu<float>"``) of a ``Source``.

    Interned: ``Source.variant`` returns the same object for the same expression, so variants
    hash by identity and key the launch layer's handle cache cheaply. ``layout``: what the
    declaration promises of the compiled kernel's parameters, ``[(name, C type, bytes or
    None, at most bytes)]``, checked against each binary NVRTC builds (None: not checked).
    """

    __slots__ = ("expr", "layout", "source")

    def __init__(self, source: Source, expr: str):
        self.source = source
        self.expr = expr
        self.layout = None

    def __repr__(self) -> str:
        return f"<variant {self.expr} of {self.source.name}>"


class Source:
    """One CUDA source and how it is compiled.

    ``name``: a file of ``cuda_src/`` (built-in) or the name a user's kernel is known by (for
    a file, its absolute path: NVRTC looks for the file's quoted includes next to it);
    ``code``: the user's text (None for built-ins, whose file is read on first compile);
    ``defines``: ``-D`` options (kernel geometry the host decides, ``(name, value)`` pairs);
    ``arch``: the one target the source is built for (``"sm_90a"``: wgmma, TMA; see
    ``targets``), or None for the architecture of the device it runs on; ``flags``: a user's
    own NVRTC options (checked: ``options.check``), after the others, which they may override.

    A user's source is compiled as written, its headers found by NVRTC: ``search`` holds the
    include folders (``-I``, in order: the user's, then ``cuda_src/``, before CUDA's header
    folders), ``includes`` what it includes (``source.scan``), for the cache key. A built-in
    source (``search`` empty) is compiled with its headers pasted in (``source.assemble``).
    """

    __slots__ = (
        "_base",
        "_lock",
        "_text",
        "arch",
        "code",
        "defines",
        "extended",
        "flags",
        "includes",
        "name",
        "search",
        "suffix",
        "variants",
    )

    def __init__(
        self,
        name: str,
        code: str | None,
        defines: tuple,
        arch: str | None,
        flags: tuple = (),
        *,
        search=(),
        includes: _source.Includes | None = None,
        suffix: str = "",
        extended: bool = False,
    ):
        self.name = name
        self.suffix = suffix  # a built-in file's: code compiled after it (GEMM epilogues)
        self.extended = extended  # ... holding a user's code (not one of the package's sources)
        self.code = code  # the text compiled, for user code
        self.defines = defines
        self.arch = targets.check(arch)
        self.flags = tuple(flags)
        self.search = tuple(Path(d) for d in search)
        self.includes = includes
        self.variants: dict[str, Variant] = {}
        self._text = code
        self._lock = threading.Lock()
        # a user's -std= or -ftz= replaces the default one (NVRTC warns of two, the last wins)
        replaced = _options.overridden(self.flags)
        base = BASE_OPTIONS if code is None else USER_OPTIONS
        self._base = tuple(o for o in base if _options.canonical(o) not in replaced)

    @property
    def builtin(self) -> bool:
        return self.code is None

    def text(self) -> str:
        """The text NVRTC compiles: a user's code as written (after its ``prelude``), or a
        built-in file with its headers pasted in (then its ``suffix``), read on the first call
        and kept."""
        if self._text is None:
            self._text = assemble(self.name) + self.suffix
        return self._text

    def options(self, arch: str) -> tuple[str, ...]:
        """NVRTC options for ``-arch=arch`` (``sm_90``, ``sm_90a`` or ``compute_XX``): the
        cache key holds them all, so an edited option or define compiles anew. A user's source
        adds its include folders, then CUDA's header folders and cupy_ops' C headers
        (``headers``), and ``-default-device`` when it includes ``cuda.h`` (whose host
        function declarations NVRTC refuses otherwise)."""
        opts = (
            self._base + (f"-arch={arch}",) + tuple(_options.define_option(k, v) for k, v in self.defines) + self.flags
        )
        if self.builtin:
            return opts
        dirs = self.search + headers.include_dirs(nvrtc.version())
        opts += tuple(f"-I{d}" for d in dict.fromkeys(dirs))
        if self._includes_cuda_h() and not {"--device-as-default-execution-space"} & _options.overridden(self.flags):
            opts += ("-default-device",)
        return opts

    def _includes_cuda_h(self) -> bool:
        if self.includes is None or "cuda.h" not in self.includes.system:
            return False
        found = headers.resolve("cuda.h", nvrtc.version())
        return found is not None and found.parent != headers.SHIMS

    def fingerprint(self) -> str:
        """What the cache key holds of the files a user's source includes, read now: each
        header of the user's folders by its SHA-256 (``includes``), each name left to CUDA's
        header folders by the file it finds there and its SHA-256 (or its absence), and the
        folders' distributions and versions. Empty for a built-in source (its text holds its
        headers)."""
        if self.builtin or self.includes is None:
            return ""
        version = nvrtc.version()
        parts = [f"{p}\0{h}" for p, h in self.includes.files]
        for name in self.includes.system:
            found = headers.resolve(name, version)
            parts.append(f"<{name}>\0{found}\0{_sha256(found) if found else ''}")
        parts += [f"#include {op}" for op in self.includes.computed]
        return "\n".join(parts) + "\n" + headers.fingerprint(version)

    def rescan(self) -> _source.Includes | None:
        """What the source includes as its files are now (None for a built-in one)."""
        if self.builtin or self.includes is None:
            return None
        return _source.scan(self.text(), _main_dir(self.name), self.search)

    @property
    def tracked(self) -> bool:
        """Whether the cache key covers every file the source may include: not when an include
        names its header with a macro (``#include HEADER``), which ``scan`` cannot follow."""
        return self.includes is None or not self.includes.computed

    def target(self, device_arch: str) -> str | None:
        """The target to build for a device of ``device_arch`` (``"sm_90"``), or None when this
        source's code cannot run there (an ``sm_90a`` source on ``sm_80``: see ``refusal``)."""
        return targets.for_device(self.arch, device_arch)

    def refusal(self, major: int, minor: int) -> str | None:
        """Why this source cannot run on a device of compute capability ``major.minor`` (a
        sentence naming its target and the device's), or None when it can."""
        if self.arch is None:
            return None
        return targets.refusal(self.arch, major, minor, self.name)

    def variant(self, expr: str) -> Variant:
        """The ``Variant`` of ``expr`` (registered on first request)."""
        v = self.variants.get(expr)
        if v is None:
            with self._lock:
                v = self.variants.setdefault(expr, Variant(self, expr))
        return v

    def __repr__(self) -> str:
        return f"<source {self.name}{' for ' + self.arch if self.arch else ''}>"


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def _main_dir(name: str) -> Path:
    """Where NVRTC looks for the quoted includes of a program called ``name``: the folder of
    that path, relative to the working directory (a string's name has none: the working
    directory itself)."""
    return Path(os.path.dirname(os.path.abspath(name)))


_sources: dict[tuple, Source] = {}
_lock = threading.Lock()


def _defines(defines) -> tuple:
    items = sorted(dict(defines or {}).items())
    for k, v in items:
        if not isinstance(k, str) or not k.isidentifier() or not isinstance(v, (int, str)) or isinstance(v, bool):
            raise TypeError(f"defines must map identifiers to ints or strings, got {k!r}: {v!r}")
    return tuple(items)


def builtin(
    filename: str, *, defines=None, arch: str | None = None, suffix: str = "", extended: bool = False
) -> Source:
    """The ``Source`` of ``cuda_src/filename`` compiled with ``defines`` (a dict) for ``arch``,
    ``suffix`` (code) after it (``extended``: a user's code among it). Cheap (no file is read);
    the same arguments give the same object."""
    key = ("builtin", filename, _defines(defines), targets.check(arch), suffix)
    with _lock:
        src = _sources.get(key)
        if src is None:
            src = _sources[key] = Source(filename, None, key[2], key[3], suffix=suffix, extended=extended)
        return src


def assemble_user(code: str, name: str, *, path: str | Path | None = None, include_dirs=(), prelude=()) -> str:
    """A user's ``code`` (read from the file ``path``, or a string: None) with its includes
    pasted (``assemble_text``): a quoted one from next to its includer, then ``include_dirs``,
    then ``cuda_src/``; an angled one from ``include_dirs``. The text declarations are read
    from (``user`` compiles the code as written). NVRTC's messages name the file by its
    absolute path (a string by ``name``) and the lines as the user wrote them."""
    dirs = [Path(d) for d in include_dirs]
    shown = str(Path(path).resolve()) if path is not None else name
    return assemble_text(code, shown, dirs + [source_dir()], path=path, angled=dirs, prelude=prelude)


def user(
    code: str,
    name: str,
    *,
    directory: str | Path | None = None,
    path: str | Path | None = None,
    include_dirs=(),
    prelude=(),
    defines=None,
    options=(),
    arch: str | None = None,
    tag=None,
    assembled: str | None = None,
) -> Source:
    """The ``Source`` of a user's ``code``, compiled as written: NVRTC finds its headers.

    ``name``: what NVRTC's messages call a code string; the code of a file (``path``) is called
    by the file's absolute path, and its quoted includes are looked up next to it first (a
    string's, in the working directory, as NVRTC and a C compiler reading standard input look).
    Include folders, in order: ``directory`` (for code that is not from a file), ``include_dirs``,
    the ``-I`` folders of ``options``, ``cuda_src/``, then CUDA's header folders (``headers``).
    ``prelude``: headers (found as the code's quoted includes would be, the working directory
    aside) included before the code, its lines counted from 1 after them. ``defines`` (a dict),
    ``options`` (checked NVRTC options) and ``arch`` (a target such as ``"sm_90a"``, see
    ``targets``; None: the device's) are part of every compile of it.

    ``assembled``, alone (no ``path``, folders or prelude): a text whose quoted includes are
    pasted already (``assemble_user``), compiled as it is.

    The source is identified by its text, every header it includes as read now (``scan``), its
    defines, options, folders, target and ``tag`` (what the caller reads from the text, e.g.
    its parameter list), so an edited file, header or option is a new source, compiled anew.
    Raises ``TypeError`` / ``ValueError`` for an option, define or target refused (naming it),
    ``FileNotFoundError`` for a prelude header found nowhere."""
    flags = _options.check(options)
    arch = targets.check(arch)
    defines = _options.defines(defines)
    flag_dirs, flags = _options.include_paths(flags)
    if assembled is not None and path is None and not include_dirs and directory is None and not prelude:
        text, shown, dirs = assembled, name, flag_dirs
    else:
        dirs = ([Path(directory).resolve()] if directory else []) + [Path(d).resolve() for d in include_dirs]
        dirs += flag_dirs + [source_dir()]
        shown = str(Path(path).resolve()) if path is not None else name
        text = _with_prelude(code, shown, prelude, Path(shown).parent if path is not None else None, dirs)
    dirs = tuple(dict.fromkeys(dirs))
    includes = _source.scan(text, _main_dir(shown), dirs)
    digest = hashlib.sha256(text.encode()).hexdigest()
    key = ("user", shown, digest, defines, flags, dirs, arch, tag, includes)
    with _lock:
        src = _sources.get(key)
        if src is None:
            src = _sources[key] = Source(shown, text, defines, arch, flags, search=dirs, includes=includes)
        return src


def _with_prelude(code: str, name: str, prelude, here: Path | None, dirs) -> str:
    """``code`` after an ``#include`` of each ``prelude`` header by its absolute path (found
    next to the code's file, then in ``dirs``: never in the working directory, where a header
    of the same name would stand in for cupy_ops' own), then ``#line 1`` for the code."""
    if not prelude:
        return code
    head = ""
    for inc in prelude:
        folders = ([here] if here is not None else []) + list(dirs)
        found = next((f / inc for f in folders if (f / inc).is_file()), None)
        if found is None:
            raise FileNotFoundError(f"header {inc} not found (looked in {', '.join(map(str, folders))})")
        head += f'#include "{Path(os.path.abspath(found)).as_posix()}"\n'
    return head + f'#line 1 "{name.replace(chr(92), "/").replace(chr(34), chr(39))}"\n' + code


def release(source: Source) -> None:
    """Forget a user ``source`` (its last ``Kernel`` is gone): ``user`` makes a new one for the
    same text. Built-in sources stay for the process."""
    if source.builtin:
        return
    with _lock:
        for key in [k for k, s in _sources.items() if s is source]:
            del _sources[key]


def sources(builtin_only: bool = True) -> list[Source]:
    """The registered sources (the package's own by default, not those with a user's epilogue
    after them), in registration order."""
    with _lock:
        return [s for s in _sources.values() if (s.builtin and not s.extended) or not builtin_only]
