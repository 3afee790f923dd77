"""C++ source as the declaration reader sees it: one scan into tokens (comments, literals and
preprocessor lines skipped as the compiler skips them), function and class bodies blanked, and
tokens joined back into C text."""

from __future__ import annotations

import collections
import re

# One scan of the source. A directive runs from a `#` that starts a line to the first newline
# that no backslash continues and no block comment spans; whitespace stops at each newline, so
# that the next line's `#` is seen at its start. `>>` is two tokens, as C++11 reads it closing
# two template argument lists; a shift in an expression reads the same for what is read here.
_SCAN = re.compile(
    r"""
    (?P<directive>^[ \t]*\#(?:\\\n|/\*.*?\*/|//[^\n]*|[^\n])*)
  | (?P<space>[ \t\r\f\v]+|\n)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\(.*?\)(?P=delim)"
              |(?:u8|[uUL])?"(?:\\.|[^"\\\n])*"|(?:u8|[uUL])?'(?:\\.|[^'\\\n])*')
  | (?P<number>\.?\d(?:[eEpP][+-]|[\w.'])*)
  | (?P<ident>[A-Za-z_$][\w$]*)
  | (?P<punct>::|->|\.\.\.|<<=|<<|<=|>=|==|!=|&&|\|\||\+\+|--|[-+*/%&|^!~=<>?:;,.(){}\[\]\#@\\])
""",
    re.X | re.S | re.M,
)
_SKIPPED = frozenset(("directive", "space", "comment"))

# Words that are part of a type, never a parameter's name.


# What outlines a source: braces and `;`, and what hides them (comments, literals, directives).
# Every branch starts with a literal character, so that the regex engine skips the text between
# them without trying each position (the directive branch starts at the newline before it).
_OUTLINE = re.compile(
    r"""
    \{ | \} | ;
  | /(?:/[^\n]*|\*.*?\*/)?
  | "(?:\\.|[^"\\\n])*"
  | '(?:\\.|[^'\\\n]){1,8}'
  | R"(?P<delim>[^()\\\s"]{0,16})\(.*?\)(?P=delim)"
  | \n[ \t]*\#(?:\\\n|/\*.*?\*/|//[^\n]*|[^\n])*
""",
    re.X | re.S,
)
_SCOPE_HEAD = re.compile(r'\s*(?:(?:inline\s+)?namespace\b[\w:\s]*|extern\s*"C(?:\+\+)?"\s*)')
_UNSEEN = re.compile(r"//[^\n]*|/\*.*?\*/|^[ \t]*#(?:\\\n|[^\n])*", re.S | re.M)


def blank_bodies(code: str) -> str:
    """``code`` with the inside of every brace group that is not a namespace or ``extern "C"``
    block (function and class bodies, initializers) blanked, newlines kept: no kernel is
    declared there, and a large source then reads in a few milliseconds, not tens."""
    out, copied = [], 0
    boundary = 0  # where the current declaration at namespace scope began
    body, depth = None, 0  # the `{` of the body being skipped, and the braces open in it
    code = "\n" + code  # (a directive on the first line follows a newline too)
    for m in _OUTLINE.finditer(code):
        c = m.group()
        if c not in ("{", "}", ";"):
            continue
        if body is not None:
            depth += (c == "{") - (c == "}")
            if depth == 0:
                inside = code[body + 1 : m.start()]
                out.append(code[copied : body + 1])
                out.append(re.sub(r"[^\n]+", lambda r: " " * len(r.group()), inside))
                copied, body, boundary = m.start(), None, m.end()
            continue
        if c == "{" and not _SCOPE_HEAD.fullmatch(_UNSEEN.sub(" ", code[boundary : m.start()])):
            body, depth = m.start(), 1
            continue
        boundary = m.end()
    out.append(code[copied:])
    return "".join(out)[1:]


_CONDITION = re.compile(r"[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b(.*)", re.S)


def blank_inactive(code: str) -> str:
    """``code`` with what the preprocessor certainly drops blanked, newlines kept: the branches
    of ``#if 0`` (``#if 1``'s ``#else``, an ``#elif`` after a taken branch, ...). A condition
    the text alone cannot settle (``#ifdef X``, ``#if __CUDA_ARCH__ >= 900``) keeps each of its
    branches. Conditionals that do not pair up: ``code`` as it is."""
    dropped: list[tuple[int, int]] = []
    stack: list[dict] = []  # each open conditional: this branch (True / False / None: unknown), ...
    for m in _SCAN.finditer(code):
        c = _CONDITION.match(m.group()) if m.lastgroup == "directive" else None
        if c is None:
            continue
        word, rest = c.group(1), _UNSEEN.sub(" ", c.group(2).replace("\\\n", " ")).strip()
        value = {"0": False, "1": True}.get(rest) if word in ("if", "elif") else True if word == "else" else None
        if word.startswith("if"):
            stack.append({"now": value, "taken": value is True, "none": value is False, "from": m.end()})
            continue
        if not stack:
            return code
        top = stack[-1]
        if top["now"] is False:
            dropped.append((top["from"], m.start()))
        if word == "endif":
            stack.pop()
            continue
        # an #elif / #else: taken only where no branch before may have been
        now = False if top["taken"] else value if top["none"] else None if value is not False else False
        top.update(now=now, taken=top["taken"] or now is True, none=top["none"] and now is False, **{"from": m.end()})
    if stack:
        return code
    out, copied = [], 0
    for a, b in sorted(dropped):  # (a branch inside a dropped one lies within it)
        a = max(a, copied)
        if b > a:
            out += [code[copied:a], re.sub(r"[^\n]+", lambda r: " " * len(r.group()), code[a:b])]
            copied = b
    return "".join(out) + code[copied:]


# kind: "ident", "number", "string" or "punct"; pos: the offset in the source
Token = collections.namedtuple("Token", "kind text pos")


def tokenize(code: str) -> list[Token]:
    """``code``'s C++ tokens, without whitespace, comments and preprocessor directives (a
    character no token starts with, such as a backtick, is skipped)."""
    return [
        Token("string" if m.lastgroup == "delim" else m.lastgroup, m.group(), m.start())
        for m in _SCAN.finditer(code)
        if m.lastgroup not in _SKIPPED
    ]


_BEFORE_UNARY = frozenset("( [ { , < = ? : + - * / % & | ^ ! ~ == != <= >= && || return".split())


def join(tokens) -> str:
    """Tokens as C text: ``const float * x`` -> ``const float* x``, ``A < B , 2 >`` -> ``A<B, 2>``."""
    out = ""
    prev = prev2 = None
    prev_opened = False
    parens = 0
    lists = 0  # template argument lists open (a `<` right after a name)
    for t in tokens:
        s = t.text
        opens = s == "<" and prev is not None and (prev[-1:].isalnum() or prev[-1:] == "_")
        closes = s == ">" and lists > 0
        if prev is not None:
            # in parentheses (an attribute's or a default's expression) `*` and `&` are operators
            binary = parens > 0 and s in ("*", "&", "&&") and prev not in ("(", ",")
            tight = (
                (s in ("*", "&", "&&", ",", "[", "]", ")", "::", "...") and not binary)
                or closes
                or opens
                or prev in ("(", "[", "::", "~")
                or prev_opened
                or (s == "(" and (prev[-1:].isalnum() or prev[-1:] in ("_", ">")))
            )
            if prev == "," or (s == "..." and prev in ("class", "typename")):
                tight = False
            if prev in ("*", "&", "&&") and parens > 0 and prev2 not in ("(", ","):
                tight = False  # after a binary `*`: `BM * BN`
            if prev in ("-", "+", "!", "~") and (prev2 is None or prev2 in _BEFORE_UNARY):
                tight = True  # a unary sign: `-1`, not `- 1`
            if not tight:
                out += " "
        lists += opens - closes
        parens += (s == "(") - (s == ")")
        prev_opened = opens
        out += s
        prev2, prev = prev, s
    return out


TYPE_WORDS = frozenset(
    """const volatile __restrict__ __restrict restrict __grid_constant__ unsigned signed long short int char float
double bool void struct class enum typename union auto wchar_t char16_t char32_t char8_t __int128 register""".split()
)
QUALIFIERS = frozenset("const volatile __restrict__ __restrict restrict __grid_constant__ register".split())
# Attribute keywords that take a parenthesized argument and may stand anywhere in the head.
ATTRIBUTES = frozenset(
    "__launch_bounds__ __cluster_dims__ __maxnreg__ __attribute__ __declspec alignas __align__ "
    "__nv_register_params__ noexcept throw decltype".split()
)
SPECIFIERS = frozenset(
    "static inline __inline__ __forceinline__ __noinline__ extern __global__ void constexpr __host__ __device__ "
    "__no_inline__".split()
)
