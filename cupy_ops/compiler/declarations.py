"""Reading the ``__global__`` functions of CUDA C source: their names, template heads and
parameter lists, as the C++ grammar has them rather than by pattern.

The source is split into C++ tokens (comments, string and character literals, preprocessor
lines skipped as the compiler skips them); braces are tracked so that only kernels at
namespace scope count (``namespace`` and ``extern "C" { }`` blocks included, function and
class bodies not). A kernel's declaration runs from the end of the one before it (``;``,
``}`` or ``{``) to its body or ``;``: everything CUDA accepts there, in any order, is
read: ``template <...>`` heads of any parameters, ``extern "C"``, ``static``, ``inline``,
``__launch_bounds__(...)``, ``__cluster_dims__(...)``, ``__maxnreg__(...)``,
``__attribute__((...))``, ``[[...]]``, ``__noinline__``, a macro standing for such an
attribute; parameters with any qualifiers (``const __grid_constant__``, ``__restrict__``),
unnamed ones, arrays and default arguments. What the preprocessor alone knows (a kernel
whose declaration a macro writes) is not seen: ``cupy_ops.Kernel`` then takes
``signature=``. The parameter sizes a declaration implies are checked against the compiled
kernel's own (``cubin.check_layout``), so a misread is an error, never a wrong launch.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field

from .cxx import ATTRIBUTES, QUALIFIERS, SPECIFIERS, TYPE_WORDS, Token, blank_bodies, blank_inactive, join, tokenize


@dataclass(frozen=True)
class TemplateParam:
    """One parameter of a template head: ``kind`` "type" (``class T``), "value" (``int N``)
    or "template" (``template <class> class TT``); ``pack`` for ``...``."""

    kind: str
    name: str
    default: str | None = None
    pack: bool = False
    ctype: str = ""  # a value parameter's type


@dataclass(frozen=True)
class Param:
    """One parameter of a kernel: its C type as written (``const float* __restrict__``), its
    name (``""`` when unnamed), whether it is a pointer (``*`` or ``[]`` outside any template
    argument list) and its default argument as written, if any."""

    ctype: str
    name: str
    pointer: bool
    default: str | None = None
    tokens: tuple = field(default=(), repr=False, compare=False)  # the type's tokens


@dataclass(frozen=True)
class Declaration:
    """A ``__global__`` function as declared: ``name`` (unqualified), ``qualified``
    (``ns::name``), ``template`` (the head's parameters, or None), ``params``, ``extern_c``,
    ``attributes`` (``__launch_bounds__(256)``, ...), whether this one is the ``definition``
    and whether it is an explicit specialization or instantiation (``specialization``)."""

    name: str
    qualified: str
    template: tuple[TemplateParam, ...] | None
    params: tuple[Param, ...]
    extern_c: bool
    attributes: tuple[str, ...]
    definition: bool
    specialization: bool
    line: int

    @property
    def head(self) -> str:
        """The template head as C (``template <class T, int N>``), or ``""``."""
        if self.template is None:
            return ""
        parts = []
        for p in self.template:
            dots = "..." if p.pack else ""
            kind = {"type": "class", "template": "template <...> class"}.get(p.kind, p.ctype)
            parts.append(f"{kind}{dots} {p.name}".strip() + (f" = {p.default}" if p.default else ""))
        return f"template <{', '.join(parts)}>"


class _Reader:
    def __init__(self, code: str, bodies: bool = True):
        self.code = code
        self.toks = tokenize(code if bodies else blank_bodies(code))

    def line(self, pos: int) -> int:
        return self.code.count("\n", 0, pos) + 1

    def close(self, i: int) -> int:
        """The index just past the bracket group opening at ``i`` (``(``, ``[``, ``{``)."""
        pairs = {"(": ")", "[": "]", "{": "}"}
        stack = []
        toks = self.toks
        while i < len(toks):
            s = toks[i].text
            if s in pairs:
                stack.append(pairs[s])
            elif s in (")", "]", "}"):
                while stack and stack[-1] != s:  # an unbalanced bracket of another kind
                    stack.pop()
                if stack:
                    stack.pop()
                if not stack:
                    return i + 1
            i += 1
        return i

    def close_angle(self, i: int, end: int) -> int:
        """Just past the ``>`` matching the ``<`` at ``i`` (a template argument or parameter
        list; ``<`` and ``>`` inside parentheses or brackets are operators), or -1."""
        depth = 0
        toks = self.toks
        while i < end:
            s = toks[i].text
            if s in ("(", "[", "{"):
                i = self.close(i)
                continue
            if s in (")", "]", "}", ";"):
                return -1
            if s == "<":
                depth += 1
            elif s == ">":
                depth -= 1
            if depth == 0:
                return i + 1
            i += 1
        return -1

    # --- the whole file ---------------------------------------------------------------------

    def declarations(self) -> list[Declaration]:
        out = []
        toks = self.toks
        scopes: list[tuple[str, str, bool]] = []  # (kind, namespace name, extern "C")
        start = 0  # first token of the current declaration
        i = 0
        while i < len(toks):
            s = toks[i].text
            if s == "__global__":
                decl, i = self.kernel(start, i, scopes)
                if decl is not None:
                    out.append(decl)
                start = i
                continue
            if s == "{":
                kind, name = self.scope_kind(start, i)
                if kind == "other":
                    i = self.close(i)  # a body: nothing inside is at namespace scope
                    start = i
                    if i < len(toks) and toks[i].text == ";":
                        i += 1
                        start = i
                    continue
                extern_c = kind == "extern C" or any(c for _, _, c in scopes)
                scopes.append((kind, name, extern_c))
                i += 1
                start = i
                continue
            if s == "}":
                if scopes:
                    scopes.pop()
                i += 1
                start = i
                continue
            if s == ";":
                start = i + 1
            i += 1
        return out

    def scope_kind(self, start: int, brace: int) -> tuple[str, str]:
        """What the ``{`` at ``brace`` opens: ``("namespace", name)``, ``("extern C", "")`` or
        ``("other", "")`` (a function or class body, an initializer)."""
        words = [t.text for t in self.toks[start:brace]]
        if words[:1] == ["inline"]:
            words = words[1:]
        if words[:1] == ["namespace"] and all(re.fullmatch(r"\w+|::", w) for w in words[1:]):
            return "namespace", "".join(words[1:])
        if len(words) == 2 and words[0] == "extern" and words[1] in ('"C"', '"C++"'):
            return "extern C" if words[1] == '"C"' else "namespace", ""
        return "other", ""

    # --- one kernel ------------------------------------------------------------------------

    def kernel(self, start: int, at: int, scopes) -> tuple[Declaration | None, int]:
        """The declaration holding the ``__global__`` at ``at``: ``(Declaration or None, the
        index after it)``."""
        toks = self.toks
        # the end: the body's `{` or the `;` at depth 0
        i = at
        while i < len(toks) and toks[i].text not in ("{", ";"):
            i = self.close(i) if toks[i].text in ("(", "[") else i + 1
        end = i
        definition = end < len(toks) and toks[end].text == "{"
        after = self.close(end) if definition else end + 1
        # the name: the last identifier (not an attribute) followed by `(`, or by `<...>(`
        # (an explicit specialization), at depth 0 between `__global__`'s head and the end
        name_at = params_at = None
        specialization = False
        template_head = None
        j = start
        while j < end:
            s = toks[j].text
            if s == "template" and j + 1 < end and toks[j + 1].text == "<":
                close = self.close_angle(j + 1, end)
                if close < 0:
                    return None, after
                template_head = (j + 2, close - 1)
                j = close
                continue
            if s == "template":  # `template __global__ void k<float>(float*);`
                specialization = True
                j += 1
                continue
            if s in ("(", "[", "{"):
                j = self.close(j)
                continue
            if toks[j].kind == "ident" and s not in ATTRIBUTES and s not in SPECIFIERS and j + 1 < end:
                nxt = toks[j + 1].text
                if nxt == "(":
                    name_at, params_at = j, j + 1
                elif nxt == "<":
                    close = self.close_angle(j + 1, end)
                    if close > 0 and close < end and toks[close].text == "(":
                        name_at, params_at = j, close
                        j = close
                        continue
            j += 1
        if name_at is None or name_at < at:  # the declarator follows `__global__`
            return None, after
        name = toks[name_at].text
        quals = []
        k = name_at
        while k >= 2 and toks[k - 1].text == "::" and toks[k - 2].kind == "ident":
            quals.insert(0, toks[k - 2].text)
            k -= 2
        namespaces = [n for kind, n, _ in scopes if kind == "namespace" and n]
        qualified = "::".join(namespaces + quals + [name])
        if params_at != name_at + 1:
            specialization = True
        if template_head is not None and template_head[0] > template_head[1]:
            specialization = True  # `template <>`
        params_end = self.close(params_at)
        params = tuple(self.params(params_at + 1, params_end - 1))
        extern_c = any(c for _, _, c in scopes) or any(
            toks[m].text == "extern" and m + 1 < end and toks[m + 1].text == '"C"' for m in range(start, name_at)
        )
        attributes = []
        m = template_head[1] + 1 if template_head is not None else start
        while m < end:
            if m == params_at:
                m = params_end
                continue
            s = toks[m].text
            if s in ATTRIBUTES or (
                toks[m].kind == "ident"
                and s.startswith("__")
                and s.endswith("__")
                and s not in SPECIFIERS
                and s not in TYPE_WORDS
            ):
                if m + 1 < end and toks[m + 1].text == "(":
                    close = self.close(m + 1)
                    attributes.append(join(toks[m:close]))
                    m = close
                    continue
                attributes.append(s)
            elif s == "[" and m + 1 < end and toks[m + 1].text == "[":
                close = self.close(m)
                attributes.append(join(toks[m:close]))
                m = close
                continue
            m += 1
        template = None
        if template_head is not None and not specialization:
            template = tuple(self.template_params(*template_head))
        return Declaration(
            name,
            qualified,
            template,
            params,
            extern_c,
            tuple(attributes),
            definition,
            specialization,
            self.line(toks[name_at].pos),
        ), after

    def split(self, start: int, end: int) -> list[tuple[int, int]]:
        """``[start, end)`` split at the commas of depth 0 (brackets and template argument
        lists nest)."""
        toks = self.toks
        parts, i, first = [], start, start
        while i < end:
            s = toks[i].text
            if s in ("(", "[", "{"):
                i = self.close(i)
                continue
            if s == "<" and i > start and toks[i - 1].kind == "ident":
                # in a type, a template argument list; in a default argument, one only if its
                # `>` comes before the list ends (else `a < b` is a comparison)
                close = self.close_angle(i, end)
                if close > 0:
                    i = close
                    continue
            elif s == ",":
                parts.append((first, i))
                first = i + 1
            i += 1
        if first < end or parts:
            parts.append((first, end))
        return parts

    def params(self, start: int, end: int) -> list[Param]:
        toks = self.toks
        out = []
        if end - start == 1 and toks[start].text == "void":  # `k(void)`
            return out
        for decl, default in self.entries(start, end):
            out.append(self.param(decl, default))
        return out

    def entries(self, start: int, end: int):
        """The comma-separated entries of a parameter list, each as ``(tokens, default text or
        None)``: the part after a top-level ``=`` is the default."""
        toks = self.toks
        for a, b in self.split(start, end):
            part = toks[a:b]
            if not part:
                continue
            eq = next((k for k, t in enumerate(part) if t.text == "=" and self._depth0(part, k)), None)
            yield (part[:eq], join(part[eq + 1 :])) if eq is not None else (part, None)

    @staticmethod
    def _depth0(part, k: int) -> bool:
        depth = 0
        for t in part[:k]:
            if t.text in ("(", "[", "{", "<"):
                depth += 1
            elif t.text in (")", "]", "}", ">"):
                depth -= 1
        return depth == 0

    def param(self, decl: list[Token], default: str | None) -> Param:
        """One parameter: the declarator's name, the rest its type."""
        angle = 0
        pointer = False
        name_idx = None
        for k, t in enumerate(decl):
            s = t.text
            if s == "<":
                angle += 1
            elif s == ">":
                angle -= 1
            elif angle == 0 and s in ("*", "["):
                pointer = True
            elif angle == 0 and s == "(" and k + 2 < len(decl) and decl[k + 1].text == "*":
                # a pointer to a function or an array: `void (*f)(int)`, `float (*rows)[4]`
                pointer = True
                if decl[k + 2].kind == "ident":
                    name_idx = k + 2
        if name_idx is None:
            # the name is the last identifier before any array brackets, if a type precedes it
            last = len(decl)
            while last > 0 and decl[last - 1].text == "]":
                depth = 0
                for k in range(last - 1, -1, -1):
                    depth += {"]": 1, "[": -1}.get(decl[k].text, 0)
                    if depth == 0:
                        last = k
                        break
            if last > 0 and decl[last - 1].kind == "ident" and decl[last - 1].text not in TYPE_WORDS:
                before = [t for t in decl[: last - 1] if t.text not in QUALIFIERS]
                if before and before[-1].text != "::":
                    name_idx = last - 1
        name = decl[name_idx].text if name_idx is not None else ""
        type_toks = tuple(t for k, t in enumerate(decl) if k != name_idx)
        return Param(join(type_toks), name, pointer, default, type_toks)

    def template_params(self, start: int, end: int) -> list[TemplateParam]:
        out = []
        for decl, default in self.entries(start, end):
            words = [t.text for t in decl]
            pack = "..." in words
            names = [t.text for t in decl if t.kind == "ident"]
            if words[0] == "template":
                out.append(
                    TemplateParam(
                        "template", names[-1] if names[-1] not in ("class", "typename") else "", default, pack
                    )
                )
            elif words[0] in ("class", "typename") and len([w for w in words[1:] if w != "..."]) <= 1:
                name = next((w for w in words[1:] if w != "..."), "")
                out.append(TemplateParam("type", name, default, pack))
            else:
                named = decl[-1].kind == "ident" and len(decl) > 1 and decl[-1].text not in TYPE_WORDS
                ident = decl[-1].text if named else ""
                ctype = join([t for t in decl if t.text != "..."][:-1] if ident else decl)
                out.append(TemplateParam("value", ident, default, pack, ctype))
        return out


def declarations(code: str) -> list[Declaration]:
    """Every ``__global__`` function declared in ``code`` at namespace scope, in order
    (a kernel declared and then defined appears twice)."""
    return list(_declarations(code))


@functools.lru_cache(maxsize=16)
def _declarations(code: str) -> tuple[Declaration, ...]:
    # one read per source text: each kernel of a file looks itself up in the same text
    # (what the preprocessor certainly drops, an `#if 0` block, declares nothing)
    return tuple(_Reader(blank_inactive(code), bodies=False).declarations())


def kernel_names(code: str) -> list[str]:
    """The names of the kernels of ``code``, in order, once each (the qualified name for one
    inside a namespace)."""
    return list(dict.fromkeys(d.qualified for d in declarations(code) if not d.specialization))


def find(code: str, name: str) -> Declaration | None:
    """The declaration of kernel ``name`` (unqualified, or qualified with its namespaces) in
    ``code``: its (first) definition when there is one, with the default arguments a
    declaration before it gives, else its declaration; None when there is none. Raises
    ``ValueError`` when ``name`` is two different kernels (of two namespaces)."""
    found = [d for d in declarations(code) if not d.specialization and name in (d.name, d.qualified)]
    if not found:
        return None
    kernels = list(dict.fromkeys(d.qualified for d in found))
    if len(kernels) > 1:
        raise ValueError(f"{name} names {len(kernels)} kernels ({', '.join(kernels)}): give the qualified name")
    definitions = [d for d in found if d.definition]
    decl = (definitions or found)[0]
    before = [d for d in found if not d.definition and d.line < decl.line and len(d.params) == len(decl.params)]
    if before and decl.definition:
        # C++: a default argument given once, on a declaration, holds for the definition after it
        params = tuple(
            dataclasses.replace(p, default=next((b.params[i].default for b in before if b.params[i].default), None))
            if p.default is None
            else p
            for i, p in enumerate(decl.params)
        )
        decl = dataclasses.replace(decl, params=params)
    return decl


def definitions(code: str, name: str) -> list[Declaration]:
    """Every definition of kernel ``name`` in ``code`` (two where branches of an ``#ifdef``
    define it twice, or it is overloaded)."""
    return [d for d in declarations(code) if d.definition and not d.specialization and name in (d.name, d.qualified)]


def parse_params(text: str) -> list[Param]:
    """A C parameter list (``"const float* x, int n"``) read as a kernel's would be."""
    r = _Reader(text)
    return r.params(0, len(r.toks))


def is_pointer(ctype: str) -> bool:
    """Whether C type ``ctype`` is a pointer or an array (a ``*`` or ``[`` outside any
    template argument list)."""
    r = _Reader(ctype)
    return r.param(list(r.toks), None).pointer


# --- name expressions ---------------------------------------------------------------------


def split_name(expr: str) -> tuple[str, list[str] | None]:
    """A name expression ``"ns::tp<float, 4>"`` -> ``("ns::tp", ["float", "4"])``; ``"k"`` ->
    ``("k", None)``. Raises ``ValueError`` when ``expr`` is not a (qualified) name with an
    optional template argument list."""
    r = _Reader(expr)
    toks = r.toks
    i = 0
    if toks and toks[0].text == "::":
        i = 1
    parts = []
    while i < len(toks) and toks[i].kind == "ident":
        parts.append(toks[i].text)
        if i + 1 < len(toks) and toks[i + 1].text == "::":
            i += 2
            continue
        i += 1
        break
    if not parts or (i < len(toks) and toks[i].text != "<") or expr.strip().endswith("::"):
        raise ValueError(f"{expr!r} is not a kernel name or a name expression such as 'scale' or 'tp<float, 4>'")
    base = "::".join(parts)
    if i == len(toks):
        return base, None
    close = r.close_angle(i, len(toks))
    if close != len(toks):
        raise ValueError(
            f"{expr!r} is not a kernel name or a name expression such as 'scale' or 'tp<float, 4>': "
            f"its template argument list does not close at its end"
        )
    args = [join(toks[a:b]) for a, b in r.split(i + 1, close - 1)]
    if any(not a for a in args):
        raise ValueError(f"{expr!r}: an empty template argument")
    return base, args


def substitute(tokens, mapping: dict[str, str]) -> str:
    """Type tokens with each identifier of ``mapping`` replaced by its text (a template
    parameter by its argument), as C text."""
    out = []
    for t in tokens:
        if t.kind == "ident" and t.text in mapping:
            out.extend(_Reader(mapping[t.text]).toks)
        else:
            out.append(t)
    return join(out)
