"""The kernels of a ``torch.utils.cpp_extension.load_inline`` CUDA source, as written.

A load_inline ``cuda_sources`` string mixes device code with the host side that nvcc and a
C++ compiler build around it: torch's headers, functions taking ``torch::Tensor``,
``<<<...>>>`` launches, a ``TORCH_LIBRARY`` or ``PYBIND11_MODULE`` block. NVRTC compiles
device code only (it refuses every host function), so ``split`` sets the host side aside and
says what it set aside; ``load_inline_kernels`` makes a ``Kernel`` of each ``__global__``
function left. Set-aside text is blanked in place, never deleted: NVRTC's messages keep the
line numbers of the source as written.

Set aside, at namespace scope (inside namespaces and ``extern "C"`` blocks too):

- includes of torch, ATen, c10, pybind11 and ``Python.h``; includes of the C and C++ standard
  libraries that NVRTC has none of (``<vector>``, ``<cmath>``, ``<cstdio>``, ...: CUDA's math
  functions and ``printf`` are built into NVRTC, libcu++ has ``<cuda/std/...>``). In their
  place, on the same line, cupy_ops' ``<load_inline_std.h>`` gives the device code what it
  takes from them through torch/extension.h under nvcc: ``int64_t`` and the other integer
  types, ``M_PI``, ``INFINITY``, ``FLT_MAX``, ``INT_MAX``, and as ``std::`` names the integer
  types, ``min``, ``max`` and ``<cmath>``'s functions (NVRTC's own);
  ``<load_inline_limits.h>`` also ``std::numeric_limits`` where the source names it;
- functions that are neither ``__device__`` nor ``__global__`` (host functions: the wrappers
  taking ``torch::Tensor``, the launchers with ``<<<...>>>``, host utilities), except
  ``constexpr`` ones that name no torch and launch nothing, which device code may use in a
  constant expression;
- ``TORCH_LIBRARY*`` and ``PYBIND11_*`` blocks, and any other declaration naming torch, ATen,
  c10 or pybind11 (``using namespace torch;``, ``namespace py = pybind11;``).

Kept: ``__global__`` and ``__device__`` functions (``__host__ __device__`` ones too),
``__constant__`` and other variables, types, templates, macros, CUDA's includes
(``<cuda_runtime.h>``, ``<cuda_fp16.h>``, ...) and the user's own. The kept source is
compiled with ``-default-device``: what is left without an execution space (a ``constexpr``
function, a struct's member function) is device code, which NVRTC needs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from ..compiler import check_options, declarations
from ..compiler.cxx import tokenize
from ..compiler.headers import TORCH_HEADERS
from ..compiler.options import canonical
from .kernel import Kernel

# The C++ standard library's headers (C++20 included); NVRTC has none of them.
_CXX_LIBRARY = frozenset(
    """algorithm any array atomic barrier bit bitset cassert ccomplex cctype cerrno cfenv cfloat charconv chrono
    cinttypes ciso646 climits clocale cmath codecvt compare complex concepts condition_variable coroutine csetjmp
    csignal cstdalign cstdarg cstdbool cstddef cstdint cstdio cstdlib cstring ctgmath ctime cuchar cwchar cwctype
    deque exception execution filesystem format forward_list fstream functional future initializer_list iomanip ios
    iosfwd iostream istream iterator latch limits list locale map memory memory_resource mutex new numbers numeric
    optional ostream queue random ranges ratio regex scoped_allocator semaphore set shared_mutex source_location span
    sstream stack stdexcept stop_token streambuf string string_view strstream syncstream system_error thread tuple
    type_traits typeindex typeinfo unordered_map unordered_set utility valarray variant
    vector version""".split()
)
# The C library's headers NVRTC lacks; math.h, stdint.h and stdlib.h are not among them: cupy_ops
# gives NVRTC its own (what CUDA's headers include).
_C_LIBRARY = frozenset(
    """assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h limits.h locale.h setjmp.h signal.h
    stdalign.h stdarg.h stdbool.h stddef.h stdio.h string.h tgmath.h time.h uchar.h
    wchar.h wctype.h""".split()
)
# cupy_ops' header in place of each include set aside (compiler/include/): what device code
# takes from torch's and the C and C++ libraries' headers (integer types, math constants,
# std:: names of <cmath>'s functions, min, max); with numeric_limits where the source names it
STAND_IN, STAND_IN_LIMITS = "<load_inline_std.h>", "<load_inline_limits.h>"
_INCLUDE = re.compile(r'[ \t]*#[ \t]*include[ \t]*(?:<([^>\n]+)>|"([^"\n]+)")')
# A macro whose replacement holds an execution space (a function-like one too).
_DEFINE = re.compile(r"[ \t]*#[ \t]*define[ \t]+(\w+)(?:\([^)]*\))?(?=.*\b(__global__|__device__)\b)", re.S)
_CONDITIONAL = re.compile(r"[ \t]*#[ \t]*(?:if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b")
# The preprocessor directives between two tokens: what the tokenizer skips, found with the
# comments beside them so that a `#` in a comment is none (a directive starts a line).
_GAP = re.compile(r"//[^\n]*|/\*.*?\*/|(?P<directive>^[ \t]*#(?:\\\n|/\*.*?\*/|//[^\n]*|[^\n])*)", re.S | re.M)
# Names that stand for torch's C++ side wherever they appear.
_TORCH_NAMES = frozenset(["torch", "c10", "pybind11", "caffe2", "Tensor", "IntArrayRef", "ScalarType"])
_TORCH_MACRO = re.compile(r"(?:TORCH|AT|C10|PYBIND11|THC)_[A-Z0-9_]+")
_BLOCK = re.compile(r"TORCH_LIBRARY\w*|PYBIND11_\w+")
# Words followed by a parenthesis that are no function's name.
_NOT_NAMES = frozenset(
    """__launch_bounds__ __cluster_dims__ __maxnreg__ __attribute__ __declspec alignas __align__ decltype noexcept
    throw sizeof alignof static_assert __nv_register_params__ void int float double char bool long short unsigned
    signed auto const volatile""".split()
)
_CLASS_KEYS = frozenset(("struct", "class", "union", "enum"))
_DEVICE = frozenset(("__global__", "__device__"))


class SetAside(NamedTuple):
    """One piece of a load_inline source left out of the compile: ``what`` it is (``"#include
    <torch/extension.h> (torch's header, for the host code)"``, ``"host function relu_cuda
    (...)"``, ``"PYBIND11_MODULE block"``), its first and last ``line`` (1-based)."""

    what: str
    line: int
    last: int

    def __str__(self) -> str:
        lines = f"line {self.line}" if self.last == self.line else f"lines {self.line}-{self.last}"
        return f"{lines}: {self.what}"


@dataclass(frozen=True)
class Split:
    """``split``'s answer: ``source``, the device code (set-aside text blanked, every line where
    it was); ``set_aside``, what was left out, in source order; ``kernels``, the names of the
    ``__global__`` functions kept (qualified with their namespace where they have one)."""

    source: str
    set_aside: tuple[SetAside, ...]
    kernels: tuple[str, ...]

    def __str__(self) -> str:
        kernels = ", ".join(self.kernels) or "none"
        aside = "".join(f"\n  {s}" for s in self.set_aside) or " nothing"
        return f"kernels: {kernels}; set aside:{aside}"


def split(cuda_sources) -> Split:
    """The device code of a load_inline ``cuda_sources`` (a string, or a list of strings, which
    load_inline joins with newlines) and what was set aside to get it (see the module's
    docstring). Raises ``TypeError`` when ``cuda_sources`` is not a str or a list of str."""
    code = _joined(cuda_sources)
    toks = tokenize(code)
    directives = _directives(code, toks)
    spans: list[tuple[int, int, str]] = []  # (start, end, what) of the text set aside
    stand_in = STAND_IN_LIMITS if "numeric_limits" in code else STAND_IN
    includes = []  # where each include set aside was: its stand-in goes there
    for start, end in directives:
        what = _include(code[start:end])
        if what:
            spans.append((start, end, f"{what}; {stand_in} in its place"))
            includes.append(start)
    # a macro standing for an execution space (`#define HD __host__ __device__`) marks device code too
    device = _DEVICE | {m.group(1) for m in (_DEFINE.match(code, start, end) for start, end in directives) if m}
    for a, b in _declarations(toks):
        what = _host_side(toks[a:b], device)
        if what:
            spans.append((toks[a].pos, toks[b - 1].pos + len(toks[b - 1].text), what))
    spans.sort()
    chars = list(code)
    for start, end, _ in spans:
        for k in range(start, end):
            if chars[k] != "\n":
                chars[k] = " "
    for start, end in directives:
        # a conditional inside set-aside code stays: its partner may stand outside it
        if _CONDITIONAL.match(code, start) and any(s <= start < e for s, e, _ in spans):
            chars[start:end] = code[start:end]
    for start in includes:
        chars[start] = f"#include {stand_in}"
    kept = "".join(chars)
    aside = tuple(SetAside(what, _line(code, start), _line(code, max(start, end - 1))) for start, end, what in spans)
    return Split(kept, aside, tuple(declarations.kernel_names(kept)))


def _joined(cuda_sources) -> str:
    if isinstance(cuda_sources, str):
        return cuda_sources
    if isinstance(cuda_sources, (list, tuple)) and all(isinstance(s, str) for s in cuda_sources):
        return "\n".join(cuda_sources)
    raise TypeError(
        f"cuda_sources must be CUDA code, a str or a list of str (as load_inline takes it), got "
        f"{type(cuda_sources).__name__}"
    )


def _line(code: str, pos: int) -> int:
    return code.count("\n", 0, pos) + 1


def _directives(code: str, toks) -> list[tuple[int, int]]:
    """``(start, end)`` of every preprocessor directive of ``code`` (they lie between tokens)."""
    out = []
    prev = 0
    for start, end in [(t.pos, t.pos + len(t.text)) for t in toks] + [(len(code), len(code))]:
        out += [m.span() for m in _GAP.finditer(code, prev, start) if m.group("directive")]
        prev = end
    return out


def _include(directive: str) -> str | None:
    """What an ``#include`` of the host side is, or None (kept: any other directive too)."""
    m = _INCLUDE.match(directive)
    if m is None:
        return None
    name = m.group(1) or m.group(2)
    shown = f"<{name}>" if m.group(1) else f'"{name}"'
    if name.split("/")[0] in TORCH_HEADERS or name == "Python.h":
        return f"#include {shown} (torch's header, for the host code)"
    if m.group(1) and (name in _CXX_LIBRARY or name in _C_LIBRARY):
        return f"#include {shown} (C/C++ standard library: NVRTC has none)"
    return None


def _close(toks, i: int) -> int:
    """Just past the bracket group (``(``, ``[`` or ``{``) opening at ``i``."""
    depth = 0
    while i < len(toks):
        s = toks[i].text
        if s in ("(", "[", "{"):
            depth += 1
        elif s in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def _declarations(toks) -> list[tuple[int, int]]:
    """``(first, end)`` token indices of each declaration at namespace scope: from the end of
    the one before to its ``;`` or its body's ``}``; namespaces and ``extern "C"`` blocks are
    entered, their declarations listed one by one."""
    out = []
    i = start = 0
    n = len(toks)
    while i < n:
        s = toks[i].text
        if s == ";":
            out.append((start, i + 1))
            i = start = i + 1
        elif s == "}":  # the end of a namespace or extern "C" block
            if start < i:
                out.append((start, i))
            i = start = i + 1
        elif s in ("(", "["):
            i = _close(toks, i)
        elif s == "{":
            head = toks[start:i]
            if _opens_scope(head):
                i = start = i + 1
                continue
            i = _close(toks, i)
            if _runs_to_semicolon(head):  # `struct S {...} s;`, `int a[] = {...};`
                while i < n and toks[i].text != ";":
                    i = _close(toks, i) if toks[i].text in ("(", "[", "{") else i + 1
                i = min(i + 1, n)
            elif i < n and toks[i].text == ";":
                i += 1
            out.append((start, i))
            start = i
        else:
            i += 1
    if start < n:
        out.append((start, n))
    return out


def _opens_scope(head) -> bool:
    """Whether ``head`` (the tokens before a ``{``) opens a namespace or an ``extern "C"`` block."""
    words = [t.text for t in head]
    if words[:1] == ["inline"]:
        words = words[1:]
    if words[:1] == ["namespace"]:
        return all(t == "::" or re.fullmatch(r"\w+", t) for t in words[1:])
    return words in (["extern", '"C"'], ["extern", '"C++"'])


def _after_templates(head):
    """``head`` without its leading ``template <...>`` heads."""
    while len(head) > 1 and head[0].text == "template" and head[1].text == "<":
        depth, i = 0, 1
        while i < len(head):
            s = head[i].text
            if s in ("(", "[", "{"):
                i = _close(head, i)
                continue
            depth += (s == "<") - (s == ">")
            i += 1
            if depth == 0:
                break
        head = head[i:]
    return head


def _runs_to_semicolon(head) -> bool:
    """A declaration whose brace group is not its end: a class (``struct S {...} s;``) or an
    initializer (``int a[] = {...}, b;``)."""
    head = _after_templates(head)
    i = 0
    while i < len(head):
        s = head[i].text
        if s in ("(", "["):
            i = _close(head, i)
            continue
        if s == "=" or s in _CLASS_KEYS:
            return True
        i += 1
    return False


def _function_name(head) -> str | None:
    """The name a declaration's head declares as a function (``ns::f``, ``operator+``,
    ``TORCH_LIBRARY``), or None when it declares none (a variable, a type)."""
    head = _after_templates(head)
    i = 0
    while i < len(head):
        t = head[i]
        if t.text == "=":
            return None  # an initializer: a variable
        if t.text in ("(", "["):
            i = _close(head, i)
            continue
        if t.text == "operator":
            j = i + 1
            while j < len(head) and head[j].text != "(":
                j += 1
            return "operator" + "".join(x.text for x in head[i + 1 : j])
        if t.kind == "ident" and i + 1 < len(head) and head[i + 1].text == "(" and t.text not in _NOT_NAMES:
            k = i
            while k >= 2 and head[k - 1].text == "::" and head[k - 2].kind == "ident":
                k -= 2
            return "".join(x.text for x in head[k : i + 1])
        i += 1
    return None


def _names_torch(toks) -> bool:
    for k, t in enumerate(toks):
        if t.kind != "ident":
            continue
        if t.text in _TORCH_NAMES or _TORCH_MACRO.fullmatch(t.text):
            return True
        # at::, py:: (torch's namespaces by their usual short names), using namespace at;
        if t.text in ("at", "py") and (
            (k + 1 < len(toks) and toks[k + 1].text == "::") or (k > 0 and toks[k - 1].text == "namespace")
        ):
            return True
    return False


def _launches(toks) -> bool:
    """Whether ``toks`` hold a ``<<<...>>>`` launch (the scanner reads ``<<<`` as ``<<`` then ``<``)."""
    return any(a.text == "<<" and b.text == "<" and b.pos == a.pos + 2 for a, b in zip(toks, toks[1:]))


def _host_side(decl, device: frozenset | set) -> str | None:
    """What a declaration at namespace scope is when it belongs to the host side, or None."""
    brace = 0
    while brace < len(decl) and decl[brace].text != "{":
        brace = _close(decl, brace) if decl[brace].text in ("(", "[") else brace + 1
    head = decl[:brace]
    is_class = _runs_to_semicolon(head) and not any(t.text == "=" for t in _after_templates(head))
    if any(t.text in device for t in (decl if is_class else head)):
        return None  # device code, whatever it names
    name = None if is_class else _function_name(head)
    if name and _BLOCK.fullmatch(name):
        return f"{name} block"
    torch_head, torch_body = _names_torch(head), _names_torch(decl[brace:])
    launches = _launches(decl)
    if name:
        if any(t.text == "constexpr" for t in head) and not (torch_head or torch_body or launches):
            return None
        notes = ["torch's types in its signature"] if torch_head else ["calls torch"] if torch_body else []
        notes += ["launches a kernel with <<<...>>>"] if launches else []
        return f"host function {name}" + (f" ({'; '.join(notes)})" if notes else "")
    if torch_head or torch_body:
        text = " ".join(t.text for t in decl)
        return f"{text if len(text) <= 60 else text[:57] + '...'} (names torch)"
    return None


class InlineKernels(Mapping):
    """The ``__global__`` kernels of a load_inline source, each a ``cupy_ops.Kernel``:
    ``kernels["relu_kernel"]`` or ``kernels.relu_kernel`` (made on first use; a template is
    named by a name expression, ``kernels["tile<float, 16>"]``). ``names``: the kernels, in
    source order; ``set_aside``: what was left out (``SetAside`` entries: what, first and last
    line); ``source``: the device code compiled, line for line the source as written;
    ``str()``: all of that, readable. Made by ``load_inline_kernels``."""

    def __init__(self, parts: Split, kernel_args: dict):
        self._split = parts
        self._args = kernel_args
        self._kernels: dict[str, Kernel] = {}

    @property
    def source(self) -> str:
        return self._split.source

    @property
    def set_aside(self) -> tuple[SetAside, ...]:
        return self._split.set_aside

    @property
    def names(self) -> tuple[str, ...]:
        return self._split.kernels

    def __getitem__(self, name: str) -> Kernel:
        kernel = self._kernels.get(name)
        if kernel is None:
            if not isinstance(name, str):
                raise KeyError(f"kernel names are str, got {name!r}")
            try:
                base = declarations.split_name(name)[0]
            except ValueError as exc:
                raise KeyError(str(exc)) from None
            if declarations.find(self.source, base) is None:
                raise KeyError(
                    f"no __global__ kernel {base!r} in the load_inline source; its kernels: "
                    f"{', '.join(self.names) or 'none'}"
                )
            kernel = self._kernels[name] = Kernel(self.source, name, **self._args)
        return kernel

    def __getattr__(self, name: str) -> Kernel:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(exc.args[0]) from None

    def __contains__(self, name) -> bool:
        return name in self.names

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def compile_offline(self, arch: str) -> dict:
        """``{name: [OfflineResult, ...]}``: every kernel compiled for ``arch`` (``"sm_90"``) by
        NVRTC on the CPU, as ``Kernel.compile_offline`` does. A ``template <class T>`` kernel
        named alone is every float dtype's instantiation, in one program: where its body does
        arithmetic that cupy_ops' ``f16`` / ``bf16`` lack, compile the one its wrapper launched,
        ``self["k<float>"].compile_offline(arch)`` (any other template needs such a name)."""
        return {name: self[name].compile_offline(arch) for name in self.names}

    def __str__(self) -> str:
        lines = {d.qualified: d.line for d in declarations.declarations(self.source) if not d.specialization}
        kernels = ", ".join(f"{n} (line {lines[n]})" if n in lines else n for n in self.names) or "none"
        aside = "".join(f"\n  {s}" for s in self.set_aside) or " nothing"
        return f"load_inline source: {len(self.names)} kernel(s): {kernels}\nset aside:{aside}"

    def __repr__(self) -> str:
        return f"<InlineKernels {', '.join(self.names) or 'none'}; {len(self.set_aside)} set aside>"


# torch's own nvcc options for every extension (cpp_extension.COMMON_NVCC_FLAGS): no operators
# or conversions of __half and __nv_bfloat16, so that a source defines its own as it must under
# load_inline (two definitions of `operator*` otherwise); its --expt-relaxed-constexpr NVRTC has
# not, -default-device stands for it
TORCH_NVCC_DEFINES = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
)


def load_inline_kernels(cuda_sources, *, options=(), defines=None, include_dirs=(), arch=None) -> InlineKernels:
    """The ``__global__`` kernels of a ``torch.utils.cpp_extension.load_inline`` CUDA source,
    unchanged: its host side (torch's includes, functions taking ``torch::Tensor``,
    ``<<<...>>>`` launches, ``TORCH_LIBRARY`` / ``PYBIND11_MODULE`` blocks) is set aside (this
    module's docstring lists what) and each kernel left is a ``cupy_ops.Kernel``.

    Args:
        cuda_sources: load_inline's ``cuda_sources``: a str, or a list of str (joined with
            newlines, as load_inline joins them).
        options, defines, include_dirs, arch: as ``cupy_ops.Kernel`` takes them, for every
            kernel (``options`` may be load_inline's ``extra_cuda_cflags``: nvcc's host-only
            ones are dropped). Before ``options``, torch's own for an extension (its
            ``-D__CUDA_NO_HALF_OPERATORS__`` and the three like it: ``TORCH_NVCC_DEFINES``;
            ``-U`` one in ``options`` to undo it) and ``-default-device`` (what is left without
            an execution space is device code).
    Returns:
        ``InlineKernels``: a mapping of kernel names to ``Kernel``s (``kernels.relu_kernel``
        too), with ``set_aside`` (what was left out, by line) and ``source`` (what is compiled,
        with the line numbers of ``cuda_sources``, as NVRTC's messages give them).
    Raises:
        TypeError: ``cuda_sources`` is not a str or a list of str; ``options`` as ``Kernel``.
        ValueError: no ``__global__`` kernel is left; ``options`` or ``defines`` refused.

    Example:
        >>> kernels = cupy_ops.load_inline_kernels(cuda_source)   # the string given to load_inline
        >>> print(kernels)                                         # its kernels, what was set aside
        >>> kernels.relu_kernel(x, out, x.numel(), grid=cupy_ops.cdiv(x.numel(), 256), block=256)
    """
    parts = split(cuda_sources)
    if not parts.kernels:
        aside = "".join(f"\n  {s}" for s in parts.set_aside) or " nothing"
        raise ValueError(
            f"cuda_sources: no __global__ kernel in the source once its host side is set aside (set aside:{aside})"
        )
    if isinstance(options, str):
        options = shlex.split(options)
    if isinstance(options, (list, tuple)):  # nvcc's, needless here: -default-device stands for the first
        options = [o for o in options if o not in ("--expt-relaxed-constexpr", "--expt-extended-lambda")]
    options = TORCH_NVCC_DEFINES + check_options(options)
    if "--device-as-default-execution-space" not in {canonical(o) for o in options}:
        options = ("-default-device",) + options
    return InlineKernels(parts, {"options": options, "defines": defines, "include_dirs": include_dirs, "arch": arch})
