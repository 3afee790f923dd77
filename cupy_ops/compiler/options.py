"""A user's NVRTC options: checked when the kernel is declared, not when it first compiles.

Options that shape the code (``-lineinfo``, ``-G``, ``--use_fast_math``, ``-maxrregcount=N``,
``-Xptxas=...``, ``-D``, ``-I``, ``-std=...``, ...) pass through, on the run-time and offline
paths alike (an ``-I`` folder is searched as ``include_dirs`` are, its headers tracked for the
cache key). Options that cannot work with how cupy_ops compiles and loads a kernel are a
``ValueError`` naming the option and why: the target is the device's or the one ``arch=``
fixes, the output must be a cubin or PTX that loads on its own, and every header a kernel
reads must be one cupy_ops can see (to recompile when it changes). An option NVRTC does not
have is a ``ValueError`` too, with the nearest spelling it has (``--use-fast-math`` is
``--use_fast_math``), or, for one of nvcc's (``-gencode``, ``--expt-relaxed-constexpr``), what
stands for it here. nvcc's options for the host compiler alone (``-O3``, ``-Xcompiler ...``:
nvcc optimizes device code at ``-O3`` whatever ``-O`` says) are dropped, as they change no
device code; a value may follow its option as the next entry (``["-D", "BLOCK=256"]``,
``["-Xptxas", "-v"]``), as NVRTC takes it.
"""

from __future__ import annotations

import difflib
import math
import re
import shlex
from pathlib import Path

_BOOL = ("true", "false")

# Every NVRTC option (CUDA 12 and 13): each spelling -> (canonical long name, what its value
# must be). Values: None (a flag), a tuple of choices, "int", "ints" (comma-separated), "text".
_OPTIONS: dict[str, tuple[str, object]] = {}


def _add(long: str, short: str | None, value) -> None:
    for spelling in (long, short):
        if spelling:
            _OPTIONS[spelling] = (long, value)


for _long, _short, _value in [
    ("--device-debug", "-G", None),
    ("--generate-line-info", "-lineinfo", None),
    ("--dopt", "-dopt", ("on",)),
    ("--ptxas-options", "-Xptxas", "text"),
    ("--maxrregcount", "-maxrregcount", "int"),
    ("--ftz", "-ftz", _BOOL),
    ("--prec-sqrt", "-prec-sqrt", _BOOL),
    ("--prec-div", "-prec-div", _BOOL),
    ("--fmad", "-fmad", _BOOL),
    ("--use_fast_math", "-use_fast_math", None),
    ("--extra-device-vectorization", "-extra-device-vectorization", None),
    ("--modify-stack-limit", "-modify-stack-limit", _BOOL),
    ("--device-stack-protector", "-device-stack-protector", _BOOL),
    ("--jump-table-density", "-jtd", "int"),
    ("--split-compile", "-split-compile", "int"),
    ("--Ofast-compile", "-Ofc", ("0", "min", "mid", "max")),
    ("--frandom-seed", "-frandom-seed", "text"),
    ("--no-cache", None, None),
    ("--no-lineinfo-inlined-at", None, None),
    ("--define-macro", "-D", "text"),
    ("--undefine-macro", "-U", "text"),
    ("--include-path", "-I", "text"),
    ("--no-source-include", "-no-source-include", None),
    ("--std", "-std", ("c++03", "c++11", "c++14", "c++17", "c++20", "c++23")),
    ("--builtin-move-forward", "-builtin-move-forward", _BOOL),
    ("--builtin-initializer-list", "-builtin-initializer-list", _BOOL),
    ("--disable-warnings", "-w", None),
    ("--restrict", "-restrict", None),
    ("--device-as-default-execution-space", "-default-device", None),
    ("--device-int128", "-device-int128", None),
    ("--device-float128", "-device-float128", None),
    ("--optimization-info", "-opt-info", "text"),
    ("--display-error-number", "-err-no", None),
    ("--no-display-error-number", "-no-err-no", None),
    ("--diag-error", "-diag-error", "ints"),
    ("--diag-suppress", "-diag-suppress", "ints"),
    ("--diag-warn", "-diag-warn", "ints"),
    ("--brief-diagnostics", "-brief-diag", _BOOL),
    ("--warning-as-error", "-Werror", "text"),
    ("--fmax-errors", None, "int"),
    ("--time", "-time", "text"),
    ("--fdevice-time-trace", "-fdevice-time-trace", "text"),
    ("--minimal", "-minimal", None),
]:
    _add(_long, _short, _value)

# Options that cannot work here, by canonical name, with the reason shown to the user.
_OUTPUT = (
    "cupy_ops loads the cubin (or PTX) NVRTC produces as a module of its own, with no link step; this option produces "
)
_TRACKED = "cupy_ops keeps every header a kernel reads in its cache key, so that an edited header recompiles; "
_PCH = _TRACKED + "NVRTC goes on using a precompiled header after a header in it is edited"
_REFUSED = {
    "--gpu-architecture": "the target is the device's own, or the one the kernel fixes with arch= (e.g. "
    'Kernel(..., arch="sm_90a")); to build for another, use compile_offline(arch), ptx(arch) '
    "or cubin(arch)",
    "--relocatable-device-code": _OUTPUT + "relocatable code that needs one (-rdc=false is the default)",
    "--device-c": _OUTPUT + "relocatable code that needs one",
    "--extensible-whole-program": _OUTPUT + "code meant to be linked with other modules",
    "--dlink-time-opt": _OUTPUT + "LTO IR, which does not load",
    "--gen-opt-lto": "it only shapes LTO IR (-dlto), which cupy_ops cannot load",
    "--optix-ir": _OUTPUT + "OptiX IR, which does not load",
    "--fdevice-syntax-only": _OUTPUT + "no code at all",
    "--pre-include": _TRACKED + "#include the header at the top of the source instead",
    "--pch": _PCH,
    "--create-pch": _PCH,
    "--use-pch": _PCH,
    "--pch-dir": _PCH,
    "--pch-verbose": _PCH,
    "--pch-messages": _PCH,
    "--instantiate-templates-in-pch": _PCH,
}
for _long, _short in [
    ("--gpu-architecture", "-arch"),
    ("--relocatable-device-code", "-rdc"),
    ("--device-c", "-dc"),
    ("--extensible-whole-program", "-ewp"),
    ("--dlink-time-opt", "-dlto"),
    ("--gen-opt-lto", "-gen-opt-lto"),
    ("--optix-ir", "-optix-ir"),
    ("--fdevice-syntax-only", "-fdevice-syntax-only"),
    ("--pre-include", "-include"),
    ("--pch", "-pch"),
    ("--create-pch", "-create-pch"),
    ("--use-pch", "-use-pch"),
    ("--pch-dir", "-pch-dir"),
    ("--pch-verbose", "-pch-verbose"),
    ("--pch-messages", "-pch-messages"),
    ("--instantiate-templates-in-pch", "-instantiate-templates-in-pch"),
]:
    _add(_long, _short, "any")

# nvcc's options NVRTC does not have, with what stands for each here
_NVCC = {
    "-gencode": "the target is the device's own, or the one the kernel fixes with arch=",
    "--generate-code": "the target is the device's own, or the one the kernel fixes with arch=",
    "--expt-relaxed-constexpr": "NVRTC has no such option; -default-device (cupy_ops.load_inline_kernels "
    "adds it) makes a constexpr function device code",
    "-expt-relaxed-constexpr": "NVRTC has no such option; -default-device makes a constexpr function device code",
    "--expt-extended-lambda": "NVRTC has no such option: it compiles no host code, so a lambda written in "
    "device code needs none",
    "--extended-lambda": "NVRTC has no such option: it compiles no host code, so a lambda written in device "
    "code needs none",
}
# nvcc's options for the host compiler alone (with the next entry for a value): dropped
_HOST_ONLY = re.compile(r"-O[0-3s]?|--optimize(=.*)?")
_HOST_ONLY_WITH_VALUE = frozenset(("-Xcompiler", "--compiler-options", "-ccbin", "--compiler-bindir"))

# Options older NVRTCs do not have: the newest version seen without each (12.1 is the oldest
# tested; 13.0 lacks the last two, 13.5 has them). Such an NVRTC reports the option as
# unrecognized, naming it, when the kernel compiles.
MISSING_UP_TO = {
    **dict.fromkeys(
        (
            "--minimal",
            "--device-stack-protector",
            "--jump-table-density",
            "--Ofast-compile",
            "--frandom-seed",
            "--no-cache",
            "--device-float128",
            "--fdevice-time-trace",
            "--no-lineinfo-inlined-at",
        ),
        (12, 1),
    ),
    "--warning-as-error": (13, 0),
    "--fmax-errors": (13, 0),
}


def available(option: str, version: tuple[int, int]) -> bool:
    """Whether NVRTC ``version`` (``(13, 0)``) has ``option`` (its long name): False for one
    ``MISSING_UP_TO`` says that version lacks."""
    return version > MISSING_UP_TO.get(option, (0, 0))


# -DNAME, -UNAME, -Idir: the value glued to the option's name
_GLUED = re.compile(r"(-D|-U|-I)(?!=)(.+)")


def canonical(option: str) -> str | None:
    """The long name of NVRTC ``option`` (``"-lineinfo"`` -> ``"--generate-line-info"``), or None."""
    m = _GLUED.fullmatch(option)
    name = m.group(1) if m else option.split("=", 1)[0]
    entry = _OPTIONS.get(name)
    return entry[0] if entry else None


def check(options) -> tuple[str, ...]:
    """``options`` (a list of NVRTC option strings, or one string of them separated by
    spaces) checked: the tuple to compile with. Raises ``TypeError`` for a wrong type and
    ``ValueError`` naming an option that NVRTC does not have, that cannot work here, or
    whose value is not one NVRTC takes."""
    if isinstance(options, str):
        options = shlex.split(options)
    if not isinstance(options, (list, tuple)):
        raise TypeError(
            f"options must be a list of NVRTC option strings (e.g. ['-lineinfo', '--use_fast_math']), "
            f"got {type(options).__name__}"
        )
    out = []
    # an entry of several options (torch joins extra_cuda_cflags with spaces): each on its own
    options = [x for o in options for x in (shlex.split(o) if isinstance(o, str) and o.split()[1:] else [o])]
    k = 0
    while k < len(options):
        opt = options[k]
        k += 1
        if not isinstance(opt, str):
            raise TypeError(f"each NVRTC option must be a str, got {opt!r}")
        opt = opt.strip()
        if _HOST_ONLY.fullmatch(opt) or opt.split("=", 1)[0] in _HOST_ONLY_WITH_VALUE:
            # (its value as the next entry: -Xcompiler -fopenmp, -O 3)
            nxt = options[k] if k < len(options) and isinstance(options[k], str) else ""
            k += opt in _HOST_ONLY_WITH_VALUE or (opt in ("-O", "--optimize") and nxt.strip().isdigit())
            continue
        entry = _OPTIONS.get(opt)
        if entry is not None and entry[1] not in (None, "any") and k < len(options) and isinstance(options[k], str):
            # the value as the next entry, as NVRTC takes it: written joined to it
            value = options[k].strip()
            opt = f"{opt}{value}" if opt in ("-D", "-U", "-I") else f"{opt}={value}"
            k += 1
        glued = _GLUED.fullmatch(opt)
        name, has_value, value = (glued.group(1), True, glued.group(2)) if glued else opt.partition("=")
        has_value = bool(has_value)
        entry = _OPTIONS.get(name)
        if entry is None and name in _NVCC:
            raise ValueError(f"option {opt!r} is nvcc's, not NVRTC's: {_NVCC[name]}")
        if entry is None:
            near = difflib.get_close_matches(name, list(_OPTIONS), n=1, cutoff=0.6)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise ValueError(f"option {opt!r} is not an NVRTC option{hint}")
        long, kind = entry
        if long in _REFUSED:
            if long == "--relocatable-device-code" and has_value and value == "false":
                out.append(opt)
                continue
            raise ValueError(f"option {opt!r} cannot be used with cupy_ops.Kernel: {_REFUSED[long]}")
        if kind is None:
            if has_value:
                raise ValueError(f"option {opt!r}: {name} takes no value")
        elif not has_value or not value:
            example = "=" + kind[0] if isinstance(kind, tuple) else {"int": "=64", "ints": "=177"}.get(kind, "=...")
            example = {"-D": "NAME=1", "-U": "NAME", "-I": "include"}.get(name, example)
            raise ValueError(f"option {opt!r} needs its value (e.g. {name}{example})")
        elif isinstance(kind, tuple) and value not in kind:
            raise ValueError(f"option {opt!r}: {name} takes {' or '.join(kind)}, got {value!r}")
        elif kind == "int" and not re.fullmatch(r"\d+", value):
            raise ValueError(f"option {opt!r}: {name} takes a non-negative integer, got {value!r}")
        elif kind == "ints" and not re.fullmatch(r"\d+(,\d+)*", value):
            raise ValueError(f"option {opt!r}: {name} takes diagnostic numbers separated by commas, got {value!r}")
        if long in ("--define-macro", "--undefine-macro"):
            _macro(opt, value)
        out.append(opt)
    return tuple(out)


def include_paths(options) -> tuple[list[Path], tuple[str, ...]]:
    """The folders of the ``-I`` / ``--include-path`` options among ``options`` (checked), each
    absolute (a relative one from the working directory now), and the other options."""
    dirs, rest = [], []
    for opt in options:
        if canonical(opt) == "--include-path":
            glued = _GLUED.fullmatch(opt)
            dirs.append(Path(glued.group(2) if glued else opt.partition("=")[2]).expanduser().resolve())
        else:
            rest.append(opt)
    return dirs, tuple(rest)


def _macro(opt: str, value: str) -> None:
    name = value.split("=", 1)[0]
    if not name.isidentifier():
        raise ValueError(f"option {opt!r}: {name!r} is not a macro name")


def defines(defines) -> tuple:
    """A user's ``defines`` dict as sorted ``(name, value)`` pairs: each name an identifier,
    each value an int, a finite float, a str (the replacement text) or None (defined, as
    ``-DNAME``). Raises ``TypeError``/``ValueError`` naming the entry."""
    if defines is None:
        return ()
    if not isinstance(defines, dict):
        raise TypeError(f"defines must be a dict of macro names to values, got {type(defines).__name__}")
    for k, v in defines.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise ValueError(f"defines: {k!r} is not a macro name (an identifier)")
        if isinstance(v, bool) or not (v is None or isinstance(v, (int, float, str))):
            raise TypeError(
                f"defines[{k!r}] must be an int, a float, a str or None, got {type(v).__name__}"
                + (" (write 1 or 0, or 'true' / 'false')" if isinstance(v, bool) else "")
            )
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"defines[{k!r}] must be finite, got {v}")
        if isinstance(v, str) and "\n" in v:
            raise ValueError(f"defines[{k!r}] must be one line, got {v!r}")
    return tuple(sorted(defines.items()))


def define_option(name: str, value) -> str:
    """The ``-D`` option of one define."""
    if value is None:
        return f"-D{name}"
    return f"-D{name}={value!r}" if isinstance(value, float) else f"-D{name}={value}"


def overridden(options: tuple[str, ...]) -> frozenset:
    """The canonical names ``options`` set (to drop the same option from every compile's)."""
    return frozenset(canonical(o) for o in options)
