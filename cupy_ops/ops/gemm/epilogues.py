"""The GEMM epilogues: the built-in tags, the epilogue's kernel argument (``EpiArgs``, packed
by ``args``) and ``Epilogue``, a user's epilogue in CUDA C, which every family takes.

An ``Epilogue`` is compiled into the GEMM sources as one more specialization of
gemm_epilogue.cuh's ``Epilogue<T, Tag>`` under a tag of its own (``EpiUser_<name>_<digest>``):
the families name kernels by tag as for the built-ins, and ``code_for`` hands the compile
layer the text to append (``runtime.handle``). Pure: no tensor is read here.
"""

from __future__ import annotations

import hashlib
import keyword
import re
import struct
from dataclasses import dataclass

from ...launch import EPI_ARGS_BYTES, EPI_PTRS, EPI_SCALARS

NONE = "EpiNone"  # matmul: the product as is
BIAS_RELU_SCALE = "EpiBiasReluScale"  # linear_relu_div's: relu(v + bias) * scale
BUILTIN = (NONE, BIAS_RELU_SCALE)
USER_PREFIX = "EpiUser_"

_ARGS = struct.Struct(f"<{EPI_PTRS}Q{EPI_PTRS}q{EPI_SCALARS}d2q")
assert _ARGS.size == EPI_ARGS_BYTES  # (import-time layout check of a constant, not user input)


def args(bias: int = 0, ptrs=(), lds=(), scalars=(), M: int = 0, N: int = 0) -> tuple:
    """An epilogue's kernel arguments: ``(bias, first scalar, packed EpiArgs)``, the last with
    ``bias`` (the Linear's bias address, 0 for none) in slot 0, then ``ptrs`` with their row
    strides ``lds``; ``scalars`` as doubles; C's ``M`` and ``N``. The bytes hold every value
    (a cache keyed by them keeps the sign of a zero scale, which -0.0 == 0.0 would lose)."""
    p = (bias, *ptrs) + (0,) * (EPI_PTRS - 1 - len(ptrs))
    ld = (0, *lds) + (0,) * (EPI_PTRS - 1 - len(lds))
    s = tuple(scalars) + (0.0,) * (EPI_SCALARS - len(scalars))
    return (bias, s[0], _ARGS.pack(*p, *ld, *s, M, N))


NO_ARGS = args(scalars=(1.0,))


def builtin_args(bias: int, scale: float) -> tuple:
    """The arguments of the built-in epilogues: the bias address and the scale."""
    return args(bias, scalars=(scale,))


# --- users' epilogues ---------------------------------------------------------------------------

KINDS = ("columns", "rows", "tensors", "scalars")
# NOTES: how many of an epilogue's columns are read with the bias ahead of the store
# (gemm_epilogue.cuh Cols); apply reads the rest. Four carried through the store spilled 52-140
# bytes in the Hopper kernels at BN = 256 (sm_90); two spilled none.
AHEAD_COLUMNS = 2
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# names an epilogue's parameters may not take: linear's own arguments, and the names of the
# generated specialization (gemm_epilogue.cuh's interface, its members and types)
RESERVED = frozenset(
    {"x", "weight", "bias", "algo", "out", "epilogue", "reduce", "v", "m", "n", "M", "N", "a", "b", "dy", "dy_ld"}
    | {"T", "Acc", "Bits", "acc_t", "i64", "round_out", "column", "apply", "grad", "Epilogue", "EpiArgs"}
    | {"Col", "Cols", "cols"}
)
_user: dict[str, Epilogue] = {}  # tag -> its declaration (the gradient's tag too)
_SIGNATURE = r"\b{name}\s*\(([^()]*)\)\s*(?:const\s*)?\{{"


def _params(code: str, fn: str, what: str) -> list[str]:
    """The parameter names of ``fn(...)``'s definition in ``code`` (``ValueError`` naming
    ``what`` where there is none)."""
    found = re.findall(_SIGNATURE.format(name=fn), re.sub(r"//[^\n]*|/\*.*?\*/", " ", code, flags=re.S))
    if not found:
        raise ValueError(f"{what} must define `__device__ acc_t {fn}(acc_t v, ...) {{ ... }}`; no {fn}(...) found")
    names = []
    for p in found[-1].split(","):
        m = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*$", p.strip())
        if not m:
            raise ValueError(f"{what}: cannot read the parameter {p.strip()!r} of {fn}(...)")
        names.append(m.group(1))
    return names


@dataclass(frozen=True, eq=False)
class Epilogue:
    """A user's GEMM epilogue (``cupy_ops.epilogue`` declares one; see its docstring)."""

    code: str
    name: str
    columns: tuple[str, ...]
    rows: tuple[str, ...]
    tensors: tuple[str, ...]
    scalars: tuple[str, ...]
    order: tuple[str, ...]  # apply's parameters after v, by name
    derivative: str | None
    tag: str

    @property
    def grad_tag(self) -> str:
        """The tag of the backward's epilogue: ``dy * grad(v, ...)``."""
        return self.tag + "_grad"

    @property
    def pointers(self) -> tuple[str, ...]:
        """The tensor parameters in their ``EpiArgs`` slots (1, 2, ...): columns, rows, tensors."""
        return self.columns + self.rows + self.tensors

    def cuda(self) -> str:
        """The CUDA C appended to the GEMM sources: the user's functions in a struct template
        over the element type, and the two ``Epilogue`` specializations (forward, gradient)."""
        fn = f"{self.tag}_fn"
        slot = {n: i + 1 for i, n in enumerate(self.pointers)}
        ahead = self.columns[:AHEAD_COLUMNS]
        scalar = {n: i for i, n in enumerate(self.scalars)}
        members, init, call = [], [], []
        for n in self.order:
            if n in scalar:  # the first from the kernel's own parameter (args: in the constant bank)
                members.append(f"Acc {n};")
                init.append(f"{n}(scale_from<Acc>({'s' if scalar[n] == 0 else f'a.scalar[{scalar[n]}]'}))")
                call.append(n)
            else:
                members.append(f"const Bits* {n};")
                init.append(f"{n}(static_cast<const Bits*>(a.ptr[{slot[n]}]))")
                if n in self.tensors:
                    members.append(f"i64 {n}_ld;")
                    init.append(f"{n}_ld(a.ld[{slot[n]}])")
                    call.append(f"to_acc<T>({n}[m * {n}_ld + n])")
                elif n in ahead:  # read by column(n) with the bias: Col's value 1, 2, ...
                    call.append(f"cols.v[{1 + ahead.index(n)}]")
                else:
                    call.append(f"to_acc<T>({n}[{'n' if n in self.columns else 'm'}])")
        dy = len(self.pointers) + 1
        label = self.name.replace("\\", "/").replace('"', "'")
        derivative = (
            f'#line 1 "<epilogue {label}: derivative>"\n{self.derivative}\n' if self.derivative is not None else ""
        )

        if ahead:  # the bias and the first columns, read together (gemm_epilogue.cuh Cols)
            col_type = f"Cols<Acc, {1 + len(ahead)}>"
            reads = "".join(f" cols.v[{1 + i}] = to_acc<T>({n}[n]);" for i, n in enumerate(ahead))
            column = f"{{ Col cols; cols.v[0] = linear_bias<T>(bias, n);{reads} return cols; }}"
            bias = "cols.v[0]"
        else:
            col_type, column, bias = "Acc", "{ return linear_bias<T>(bias, n); }", "cols"

        def specialization(tag: str, body: str, extra_members=(), extra_init=(), reads=True) -> str:
            # what apply reads itself (rows, tensors) needs bounds; columns come in by column(n),
            # for n < N only; values past C's edge are not stored
            guard = "if (m >= M || n >= N) return v;   // past C's edge, never stored: nothing to read" if reads else ""
            ms = "\n  ".join(list(members) + list(extra_members))
            ini = ", ".join(["bias(b)", *init, *extra_init, "M(a.M)", "N(a.N)"])
            return f"""
template <class T> struct Epilogue<T, {tag}> {{
  typedef typename Traits<T>::Acc Acc;
  typedef typename Traits<T>::Bits Bits;
  typedef {col_type} Col;
  static constexpr bool COLUMNS = true;
  const void* bias;
  {ms}
  i64 M, N;
  __device__ __forceinline__ Epilogue(const void* b, double s, const EpiArgs& a) : {ini} {{}}
  __device__ __forceinline__ Col column(i64 n) const {column}
  __device__ __forceinline__ Acc apply(Acc v, const Col& cols, i64 m, i64 n) const {{
    v = linear_out<T>(v, {bias});
    {guard}
    {body}
  }}
  __device__ __forceinline__ Acc operator()(Acc v, i64 m, i64 n) const {{ return apply(v, column(n), m, n); }}
}};"""

        args_ = ", ".join(["v", *call])
        grad_decl = f"struct {self.grad_tag};" if self.derivative is not None else ""
        text = f"""
// cupy_ops.epilogue {label!r}
struct {self.tag};
{grad_decl}
template <class T> struct {fn} {{
  typedef typename Traits<T>::Acc acc_t;
  // v rounded to the output's dtype as torch rounds each op's result; the exact add of -0
  // (v itself, in every dtype) keeps the compiler from fusing the ops on either side of it
  // into one FMA, which torch's separate ops do not do
  static __device__ __forceinline__ acc_t round_out(acc_t v) {{
    return to_acc<T>(from_acc<T>(add_exact(v, -acc_t(0))));
  }}
#line 1 "<epilogue {label}>"
{self.code}
{derivative}#line 1 "<epilogue {label}: generated>"
}};
{specialization(self.tag, f"return {fn}<T>().apply({args_});", reads=bool(self.pointers[len(ahead) :]))}
"""
        if self.derivative is not None:
            text += specialization(
                self.grad_tag,
                f"return to_acc<T>(dy[m * dy_ld + n]) * {fn}<T>().grad({args_});",
                ("const Bits* dy;", "i64 dy_ld;"),
                (f"dy(static_cast<const Bits*>(a.ptr[{dy}]))", f"dy_ld(a.ld[{dy}])"),
            )
        return text


def declare(
    code: str,
    *,
    columns=(),
    rows=(),
    tensors=(),
    scalars=(),
    derivative: str | None = None,
    name: str | None = None,
    tag: str | None = None,
) -> Epilogue:
    """An ``Epilogue`` from its CUDA C (``cupy_ops.epilogue`` checks the arguments' types and
    documents them); ``tag``: a built-in epilogue's own tag (see ``BUILTIN_CODE``). Raises
    ``ValueError`` for a parameter of ``apply`` (or ``grad``) that is
    not declared, one declared twice or not taken, or too many of a kind."""
    if not isinstance(code, str):
        raise TypeError(f"code must be CUDA C defining apply(...) (a str), got {type(code).__name__}")
    if not code.strip():
        raise ValueError("code is empty: it must define `__device__ acc_t apply(acc_t v, ...) { ... }`")
    groups = {}
    for kind, names in zip(KINDS, (columns, rows, tensors, scalars)):
        names = (names,) if isinstance(names, str) else tuple(names)
        for n in names:
            if not isinstance(n, str) or not _IDENTIFIER.fullmatch(n) or keyword.iskeyword(n):
                raise ValueError(f"{kind} must name C identifiers (ASCII, not a Python keyword), got {n!r}")
        groups[kind] = names
    every = [n for names in groups.values() for n in names]
    dup = sorted({n for n in every if every.count(n) > 1})
    if dup:
        raise ValueError(f"epilogue parameters declared twice: {', '.join(dup)}")
    clash = sorted(set(every) & RESERVED | {n for n in every if n.endswith("_ld") and n[:-3] in every})
    if clash:
        raise ValueError(
            f"epilogue parameter names {', '.join(clash)} are taken (by linear's own arguments, or by names the "
            f"generated code uses: {', '.join(sorted(RESERVED))}, and <tensor>_ld)"
        )
    if len(every) - len(groups["scalars"]) > EPI_PTRS - 2:
        raise ValueError(f"an epilogue takes at most {EPI_PTRS - 2} tensors (columns, rows, tensors), got {every}")
    if len(groups["scalars"]) > EPI_SCALARS:
        raise ValueError(f"an epilogue takes at most {EPI_SCALARS} scalars, got {groups['scalars']}")
    if name is None:
        name = "epilogue"
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"name must be an identifier (it names the torch op), got {name!r}")
    order = _params(code, "apply", "an epilogue's code")[1:]
    _match(order, every, "apply")
    if derivative is not None:
        if not isinstance(derivative, str):
            raise TypeError(f"derivative must be CUDA C defining grad(...) (a str), got {type(derivative).__name__}")
        g = _params(derivative, "grad", "derivative")[1:]
        if g != order:
            raise ValueError(f"grad(v, ...) must take apply's parameters in apply's order ({order}), got {g}")
    digest = hashlib.sha256(
        "\0".join([code, derivative or "", name, *(",".join(v) for v in groups.values())]).encode()
    ).hexdigest()[:12]
    e = Epilogue(code, name, *groups.values(), tuple(order), derivative, tag or f"{USER_PREFIX}{name}_{digest}")
    if tag is not None:
        return e
    known = _user.get(e.tag)
    if known is not None:
        return known
    _user[e.tag] = _user[e.grad_tag] = e
    return e


def _match(order: list[str], declared: list[str], fn: str) -> None:
    missing = [n for n in declared if n not in order]
    unknown = [n for n in order if n not in declared]
    if unknown or missing or len(set(order)) != len(order):
        raise ValueError(
            f"{fn}(v, ...) must take each declared parameter once, by name: declared {declared}, "
            f"{fn} takes {order}" + (f" ({', '.join(unknown)} not declared)" if unknown else "")
        )


def declared() -> list[Epilogue]:
    """The epilogues declared in this process, in declaration order."""
    return list(dict.fromkeys(_user.values()))


def known(tag: str) -> bool:
    """Whether ``tag`` names an epilogue: a built-in one or a declared ``Epilogue``'s."""
    return tag in BUILTIN or tag in _user


def tag_of(expr: str) -> str | None:
    """The epilogue tag among a kernel name expression's template arguments, or None."""
    for arg in expr.partition("<")[2].rstrip(" >").split(","):
        arg = arg.strip()
        if arg in BUILTIN or arg.startswith(USER_PREFIX):
            return arg
    return None


def user(tag: str) -> Epilogue | None:
    """The declared user epilogue of ``tag`` (its gradient's tag gives it too), or None."""
    return _user.get(tag)


def code_for(expr: str) -> str | None:
    """The CUDA C a kernel expression's source needs appended: its user epilogue's, or None."""
    if USER_PREFIX not in expr:
        return None
    e = _user.get(tag_of(expr))
    if e is None:
        raise KeyError(f"kernel {expr} names an epilogue not declared in this process")
    return e.cuda()


# linear_relu_div's (and linear_relu's, with scale 1): relu of the Linear's output times the
# scale, the reciprocal of the divisor as torch computes it (ops/divisor.py), exactly (no FTZ)
RELU_SCALE = declare(
    "__device__ acc_t apply(acc_t v, acc_t scale) {\n"
    "  return mul_exact(to_acc<acc_t>(relu_bits<acc_t>(from_acc<acc_t>(v))), scale); }",
    scalars=("scale",),
    name="relu_scale",
    tag=BIAS_RELU_SCALE,
)
# the Linear's output as it is: ``cupy_ops.linear`` without an epilogue, and the GEMM under a user
# epilogue applied by a pass after it (planner.epilogue_after)
LINEAR = declare("__device__ acc_t apply(acc_t v) { return v; }", name="linear")
# compiled after every GEMM source (runtime.declare): the built-in epilogues declared here
BUILTIN_CODE = RELU_SCALE.cuda()
