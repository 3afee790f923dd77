"""The C side of a user kernel's declaration: which C types a parameter may have and what
Python value each takes, the kinds of argument slot, and template arguments bound to their
parameters (``specialize``, name expressions)."""

from __future__ import annotations

import re

import torch

from ..compiler import declarations
from ..dtypes import CUDA_NAMES
from ..launch import EPI_ARGS_BYTES

_QUALIFIERS = re.compile(
    r"\b(const|volatile|__restrict__|__restrict|restrict|typename|struct|signed|__grid_constant__)\b"
)
KINDS = {
    "float": "f32",
    "double": "f64",
    "int": "i32",
    "unsigned": "i32",
    "unsigned int": "i32",
    "int32_t": "i32",
    "uint32_t": "i32",
    "i32": "i32",
    "u32": "i32",
    "long long": "i64",
    "long long int": "i64",
    "unsigned long long": "i64",
    "long": "i64",
    "unsigned long": "i64",
    "int64_t": "i64",
    "uint64_t": "i64",
    "size_t": "i64",
    "ptrdiff_t": "i64",
    "i64": "i64",
    "u64": "i64",
    # narrower integers travel in a 32-bit slot: the driver copies only their own bytes
    "bool": "i32",
    "char": "i32",
    "unsigned char": "i32",
    "int8_t": "i32",
    "uint8_t": "i32",
    "short": "i32",
    "short int": "i32",
    "unsigned short": "i32",
    "int16_t": "i32",
    "uint16_t": "i32",
    "u16": "i32",
    # 16-bit floats: CUDA's (cuda_fp16.h, cuda_bf16.h) and common.cuh's raw-bits structs alike
    "__half": "f16",
    "half": "f16",
    "f16": "f16",
    "__nv_bfloat16": "bf16",
    "nv_bfloat16": "bf16",
    "bf16": "bf16",
    "TmaMap": "tmap",  # gemm_wgmma.cuh's 128-byte TMA tensor map, passed by value (built-in kernels)
    "EpiArgs": "epi",  # gemm_epilogue.cuh's epilogue arguments, passed by value (built-in kernels)
}
# Each scalar C type's size in bytes and, for integers, the values it holds.
SIZES = {
    "float": 4,
    "double": 8,
    "TmaMap": 128,
    "EpiArgs": EPI_ARGS_BYTES,
    **dict.fromkeys(("__half", "half", "f16", "__nv_bfloat16", "nv_bfloat16", "bf16"), 2),
}
RANGES: dict[str, tuple[int, int, bool]] = {}
for _names, _size, _lo, _hi in [
    (("int", "int32_t", "i32"), 4, -(2**31), 2**31 - 1),
    (("unsigned", "unsigned int", "uint32_t", "u32"), 4, 0, 2**32 - 1),
    (("long long", "long long int", "long", "int64_t", "ptrdiff_t", "i64"), 8, -(2**63), 2**63 - 1),
    (("unsigned long long", "unsigned long", "uint64_t", "size_t", "u64"), 8, 0, 2**64 - 1),
    (("char", "int8_t"), 1, -128, 127),
    (("unsigned char", "uint8_t"), 1, 0, 255),
    (("short", "short int", "int16_t"), 2, -(2**15), 2**15 - 1),
    (("unsigned short", "uint16_t", "u16"), 2, 0, 2**16 - 1),
    (("bool",), 1, 0, 1),
]:
    for _n in _names:
        SIZES[_n] = _size
        RANGES[_n] = (_lo, _hi, _n == "bool")
# What one argument slot of each kind holds (launch.SLOTS), in bytes.
SLOT_BYTES = {"ptr": 8, "i64": 8, "f64": 8, "i32": 4, "f32": 4, "f16": 2, "bf16": 2, "tmap": 128, "epi": EPI_ARGS_BYTES}
SIGNATURE_KINDS = ("ptr", "i32", "i64", "f32", "f64", "f16", "bf16", "acc", "tmap", "epi")
# The scalar kind of a per-dtype template's type parameter (``T a``), by the dtype picked
_T_KINDS = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16"}
# What a pointer parameter may be given: its element type -> the torch dtypes of that type. The
# unsigned raw-bits types take any dtype of their size (common.cuh moves f16/bf16 as u16);
# types not listed (structs, typedefs, void) are not checked.
POINTEES: dict[str, tuple] = {
    "float": (torch.float32,),
    "double": (torch.float64,),
    "f16": (torch.float16,),
    "__half": (torch.float16,),
    "half": (torch.float16,),
    "bf16": (torch.bfloat16,),
    "__nv_bfloat16": (torch.bfloat16,),
    "bool": (torch.bool,),
    "char": (torch.int8, torch.uint8),
    "signed char": (torch.int8,),
    "int8_t": (torch.int8,),
    "unsigned char": (torch.uint8, torch.bool),
    "uint8_t": (torch.uint8, torch.bool),
    "short": (torch.int16,),
    "int16_t": (torch.int16,),
    "int": (torch.int32,),
    "int32_t": (torch.int32,),
    "i32": (torch.int32,),
    "long long": (torch.int64,),
    "long long int": (torch.int64,),
    "int64_t": (torch.int64,),
    "i64": (torch.int64,),
    "long": (torch.int64,),
}
UNSIGNED_SIZES = {
    "unsigned short": 2,
    "uint16_t": 2,
    "u16": 2,
    "unsigned": 4,
    "unsigned int": 4,
    "uint32_t": 4,
    "u32": 4,
    "unsigned long long": 8,
    "unsigned long": 8,
    "uint64_t": 8,
    "u64": 8,
    "size_t": 8,
}
# torch dtypes as template arguments (specialize); the floating ones are common.cuh's names
C_TYPES = {
    **CUDA_NAMES,
    torch.int8: "signed char",
    torch.uint8: "unsigned char",
    torch.int16: "short",
    torch.int32: "int",
    torch.int64: "long long",
    torch.bool: "bool",
}


_INT_WORDS = frozenset(("unsigned", "long", "int", "short", "char"))
_STD = re.compile(r"^(?:::)?(?:(?:cuda::)?std::)?")


def base_type(ctype: str) -> str:
    """``const float* __restrict__`` -> ``float``; an integer type in the spelling of the
    tables above (``long unsigned int`` -> ``unsigned long``, ``std::int64_t`` -> ``int64_t``)."""
    t = " ".join(_QUALIFIERS.sub(" ", ctype.replace("*", " ").replace("[", " ").replace("]", " ")).split())
    t = _STD.sub("", t) or ("int" if re.search(r"\bsigned\b", ctype) else "")  # std::size_t, ::int64_t
    words = t.split()
    if len(words) > 1 and set(words) <= _INT_WORDS:
        size = next((w for w in ("char", "short") if w in words), None) or " ".join(["long"] * words.count("long"))
        t = " ".join(w for w in ("unsigned" if "unsigned" in words else "", size or "int") if w)
    return t


def kernel_names(code: str) -> list[str]:
    """The names of the ``__global__`` kernels defined in ``code``, in order, once each."""
    return declarations.kernel_names(code)


def kind_of(ctype: str, pointer: bool) -> str | None:
    """The argument kind of a parameter of C type ``ctype`` (None: not passable)."""
    if pointer:
        return "ptr"
    if re.search(r"\bAcc\b", ctype):
        return "acc"
    return KINDS.get(base_type(ctype))


def find_kernel(code: str, name: str):
    """``declarations.find(code, name)``, refused (``ValueError``) where the kernel is defined
    twice with parameters a launch passes differently: in two branches of an ``#ifdef`` (which
    one compiles, the text does not say: a float32 tensor read as ``double*`` were the wrong
    guess) or overloaded. Spellings of the same types (``const int n`` and ``int n``,
    ``int64_t`` and ``long``, ``T`` and ``scalar_t``) are one kernel."""
    decl = declarations.find(code, name)
    defs = declarations.definitions(code, name)
    if decl is not None and decl.template is None and len(defs) > 1:
        plain = [d for d in defs if d.template is None]  # (a template beside: named apart, "k<float>")
        if len({_launch_form(d) for d in plain}) > 1:
            lists = "; ".join(f"{d.name}({', '.join(p.ctype for p in d.params)})" for d in plain)
            raise ValueError(
                f"kernel {name} is defined {len(plain)} times with different parameters ({lists}): in branches "
                f"of a preprocessor conditional only the compile settles, pass signature= (its parameter list as "
                f"compiled); overloads, a kernel is launched by its name: give each its own"
            )
    return decl


def _launch_form(decl) -> tuple:
    """What a launch makes of each parameter of ``decl``: pointers by the dtypes they take,
    numbers by kind and size."""
    out = []
    for p in decl.params:
        b = base_type(p.ctype)
        out.append(("ptr", POINTEES.get(b, b)) if p.pointer else (KINDS.get(b, b), SIZES.get(b)))
    return tuple(out)


def parse_signature(code: str, name: str) -> tuple[str | None, list[tuple[str, str, str]]]:
    """Find kernel ``name`` in ``code``: ``(template_param, [(kind, pname, ctype)])``.

    ``kind`` is one of ``ptr``, ``i32``, ``i64``, ``f32``, ``f64``, ``f16``, ``bf16``, ``tmap``
    or ``acc`` (the compute type of the element type: f64 for double, else f32). ``template_param`` is the
    name of a single type parameter (``template <class T>``), ``""`` for a template of other
    parameters, or None. Raises ``ValueError`` when the kernel is not found or a parameter has
    a type that cannot be passed from Python.
    """
    decl = find_kernel(code, name)
    if decl is None:
        raise ValueError(f"no `__global__ void {name}(...)` found in the kernel source")
    template = template_name(decl)
    params = [(p.ctype, p.pointer, p.name or f"arg{i}") for i, p in enumerate(decl.params)]
    return template, [
        ("t" if template and not ptr and base_type(c) == template else checked_kind(name, c, ptr, n), n, c)
        for c, ptr, n in params
    ]


def template_name(decl) -> str | None:
    if decl.template is None:
        return None
    t = decl.template
    return t[0].name if len(t) == 1 and t[0].kind == "type" and not t[0].pack and t[0].name else ""


def checked_kind(kernel: str, ctype: str, pointer: bool, pname: str) -> str:
    kind = kind_of(ctype, pointer)
    if kind is None:
        raise ValueError(
            f"parameter {pname!r} of kernel {kernel} has type {ctype!r}, which cannot be passed from "
            f"Python; use pointers, float, double, bool or an integer type (or pass signature=)"
        )
    return kind


def stated_signature(kernel: str, signature, found) -> list[tuple[str, str, str]]:
    """``signature=``: a C parameter list (``"const float* x, int n"``), or a list whose
    entries are kinds (``"ptr"``, ``"i32"``, ...) or C parameter declarations. ``found``: the
    parameters read from the source (None when the kernel was not found), whose names a bare
    kind keeps."""
    if isinstance(signature, str):
        entries = declarations.parse_params(signature)
        entries = [(p.ctype, p.name, p.pointer) for p in entries]
    elif isinstance(signature, (list, tuple)):
        entries = []
        for e in signature:
            if not isinstance(e, str):
                raise TypeError(
                    f"signature entries must be str (a kind such as 'ptr' or a C parameter such as "
                    f"'const float* x'), got {e!r}"
                )
            if e in SIGNATURE_KINDS:
                entries.append((None, e, None))
                continue
            parsed = declarations.parse_params(e)
            if len(parsed) != 1:
                raise ValueError(
                    f"signature entry {e!r} is not one parameter declaration nor one of {', '.join(SIGNATURE_KINDS)}"
                )
            entries.append((parsed[0].ctype, parsed[0].name, parsed[0].pointer))
    else:
        raise TypeError(
            f"signature must be a C parameter list (str) or a list of kinds / C parameters, got "
            f"{type(signature).__name__}"
        )
    if found is not None and len(entries) != len(found):
        raise ValueError(f"signature has {len(entries)} entries but kernel {kernel} takes {len(found)} parameters")
    out = []
    for i, (ctype, pname, pointer) in enumerate(entries):
        if ctype is None:  # a bare kind: the name (and type) read from the source
            kind = pname
            pname, ctype = (found[i][1], found[i][2]) if found is not None else (f"arg{i}", kind)
            out.append((kind, pname or f"arg{i}", ctype))
        else:
            out.append((checked_kind(kernel, ctype, pointer, pname), pname or f"arg{i}", ctype))
    return out


def bind(decl, args: list[str], name: str) -> dict[str, str]:
    """Template parameter name -> argument text for the instantiation ``args`` of ``decl``
    (defaults filled in, themselves with the earlier arguments put in)."""
    params = decl.template
    pack = bool(params) and params[-1].pack
    fixed = params[:-1] if pack else params
    required = sum(1 for p in fixed if p.default is None)
    if len(args) < required or (len(args) > len(fixed) and not pack):
        counts = (
            f"{required}"
            if required == len(fixed) and not pack
            else (f"{required} to {len(fixed)}" if not pack else f"at least {required}")
        )
        raise ValueError(
            f"kernel {decl.qualified} is {decl.head}: it takes {counts} template arguments, got {len(args)} in {name!r}"
        )
    mapping: dict[str, str] = {}
    for i, p in enumerate(fixed):
        text = args[i] if i < len(args) else declarations.substitute(declarations.tokenize(p.default), mapping)
        if p.name:
            mapping[p.name] = text
    return mapping


def template_arg(a) -> str:
    """A template argument for ``specialize``: a torch dtype, a bool, an int or C text."""
    if isinstance(a, torch.dtype):
        c = C_TYPES.get(a)
        if c is None:
            raise TypeError(f"no C type for template argument {a}")
        return c
    if isinstance(a, bool):
        return "true" if a else "false"
    if isinstance(a, int):
        return str(a)
    if isinstance(a, str) and a.strip():
        return a.strip()
    raise TypeError(f"a template argument must be a torch dtype, a bool, an int or C text (str), got {a!r}")


def instantiate(decl, name: str, base: str, targs, strict: bool = True):
    """``(template parameter picked by dtype or None, {key: name expression}, params)``
    of kernel ``name`` (``base`` and its template arguments ``targs``) declared by
    ``decl`` (None: not found, a ``signature=`` follows). ``strict``: a parameter type
    that cannot be passed is an error (else its kind is None: a signature states it)."""
    if decl is None:
        return None, {None: name}, None
    qualified = decl.qualified
    mapping: dict[str, str] = {}
    template = None
    if decl.template is None:
        if targs is not None:
            raise ValueError(f"kernel {qualified} is not a template, but {name!r} gives template arguments")
        exprs = {None: qualified}
    elif targs is None:
        template = template_name(decl)
        if not template:
            raise ValueError(
                f"kernel {qualified} is {decl.head}: name one instantiation, e.g. "
                f'Kernel(source, "{qualified}<...>"), then .specialize(...) for others; '
                f"cupy_ops.Kernel instantiates a `template <class T>` kernel per dtype by itself"
            )
        exprs = {dt: f"{qualified}<{c}>" for dt, c in CUDA_NAMES.items()}
    else:
        mapping = bind(decl, targs, name)
        exprs = {None: f"{qualified}<{', '.join(targs)}>"}
    params = []
    for i, p in enumerate(decl.params):
        ctype, pointer = p.ctype, p.pointer
        if mapping:
            ctype = declarations.substitute(p.tokens, mapping)
            pointer = pointer or declarations.is_pointer(ctype)
        pname = p.name or f"arg{i}"
        if template and not pointer and base_type(ctype) == template:
            kind = "t"  # the dtype picks its C type (float, double, f16, bf16) at each launch
        else:
            kind = checked_kind(name, ctype, pointer, pname) if strict else kind_of(ctype, pointer)
        params.append((kind, pname, ctype))
    return template, exprs, params


def scalar_kind(kind: str, dtype) -> str:
    """The slot kind of a parameter of ``kind`` in the instantiation for ``dtype``: ``acc``
    (the compute type) is f64 for float64 and f32 otherwise, ``t`` (the type parameter itself)
    the dtype's own; other kinds are themselves."""
    if kind == "acc":
        return "f64" if dtype == torch.float64 else "f32"
    if kind == "t":
        return _T_KINDS[dtype]
    return kind


def layout(params, key):
    """``[(name, C type, exact bytes or None, at most bytes)]`` of the variant of ``key`` (a dtype
    or None) of a kernel of ``params`` (``[(kind, name, C type)]``): what its compiled code must agree with."""
    for kind, pname, ctype in params:
        kind = scalar_kind(kind, key)
        base = base_type(ctype)
        exact = 8 if kind == "ptr" else SIZES.get(base)
        if exact is None and kind != "i32":
            exact = SLOT_BYTES[kind]  # a stated kind of another type: the slot's size
        yield pname, ctype, exact, SLOT_BYTES[kind]
