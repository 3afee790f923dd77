"""Source text and what it includes.

Two readings of a kernel's source. ``scan`` finds every file it includes, as NVRTC will when
it compiles the source with the include folders (``-I``): what the cache key must cover.
``assemble_text`` pastes its includes in place: the text cupy_ops reads declarations from,
and the text compiled for the built-in kernels (whose headers are all ``#pragma once``).

Headers are found as a C compiler finds them. A quoted include (``#include "x.cuh"``) is
looked up next to the file that includes it (the user's file, or the header that includes
it), then in the include folders given, then in ``cuda_src/``; an angled one (``#include
<x.h>``) only in the include folders. What is found in none of them is left to NVRTC and the
CUDA header folders (``headers``). ``#line`` directives keep NVRTC's messages on the file and
line the user wrote.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

_INCLUDE = re.compile(
    r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)[ \t]*(?://[^\n]*|/\*[^\n]*?\*/[ \t]*)?\r?$', re.MULTILINE
)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*\r?$", re.MULTILINE)
# What may hide an include directive from the preprocessor: comments; strings are matched
# too so that a "/*" inside one opens nothing.
_HIDING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
# Any include directive (its operand: "x", <x>, or a macro), and __has_include's operand
_ANY_INCLUDE = re.compile(r"^[ \t]*#[ \t]*(?:include|include_next|import)\b[ \t]*(.*?)[ \t]*$", re.MULTILINE)
_HAS_INCLUDE = re.compile(r'__has_include(?:_next)?[ \t]*\([ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)[ \t]*\)')
_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b[ \t]*(.*)$", re.MULTILINE)


def _stripped(text: str) -> str:
    """``text`` as the preprocessor sees its directives: CRLF as LF, continued lines joined,
    comments gone (strings kept)."""
    text = text.replace("\r\n", "\n").replace("\\\n", "")
    return _HIDING.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else " ", text)


def _once(text: str) -> bool:
    """Whether a header is included at most once in effect: ``#pragma once``, or the whole file
    inside ``#ifndef X`` / ``#define X`` ... ``#endif`` (the guard C compilers recognise)."""
    text = _stripped(text)
    if _PRAGMA_ONCE.search(text):
        return True
    conds = list(_CONDITIONAL.finditer(text))
    if not conds or text[: conds[0].start()].strip():
        return False
    kind, arg = conds[0].groups()
    m = re.fullmatch(r"!\s*defined\s*\(?\s*(\w+)\s*\)?\s*", arg) if kind == "if" else None
    macro = arg.strip() if kind == "ifndef" else (m.group(1) if m else None)
    after = text[conds[0].end() :].lstrip()
    if not macro or not re.match(rf"#[ \t]*define[ \t]+{macro}\b", after):
        return False
    depth = 0
    for c in conds:
        depth += {"if": 1, "ifdef": 1, "ifndef": 1, "endif": -1}.get(c.group(1), 0)
        if depth == 0:  # the guard's #endif: nothing may follow it
            return c is conds[-1] and not text[c.end() :].strip()
        if depth == 1 and c.group(1) in ("elif", "else"):
            return False
    return False


@dataclass(frozen=True)
class Includes:
    """What a source includes, found by ``scan``: ``files``, each ``(path, sha256)`` of a
    header found in the user's folders (or ``cuda_src/``); ``system``, the names found in none
    of them (for the CUDA header folders); ``computed``, include operands that are macros."""

    files: tuple[tuple[str, str], ...] = ()
    system: tuple[str, ...] = ()
    computed: tuple[str, ...] = ()


def scan(text: str, main_dir: Path | None, search) -> Includes:
    """Every header ``text`` includes, directly or through another, as NVRTC finds them: a
    quoted name next to its includer (``main_dir`` for ``text``: the folder of its file, or
    the working directory for a string, as NVRTC looks), then in ``search``; an angled one in
    ``search``. Includes and ``__has_include`` operands in any branch count (a branch not taken
    costs a recompile at most); each header is read once."""
    search = [Path(f) for f in search]
    files: dict[Path, str] = {}
    system: set[str] = set()
    computed: set[str] = set()
    todo = [(text, main_dir)]
    while todo:
        body, here = todo.pop()
        body = _stripped(body)
        ops = [m.group(1) for m in _ANY_INCLUDE.finditer(body)]
        ops += [f'"{q}"' if q else f"<{a}>" for q, a in _HAS_INCLUDE.findall(body)]
        for op in ops:
            if len(op) > 1 and op[0] + op[-1] in ('""', "<>"):
                name = op[1:-1]
                folders = ([here] if op[0] == '"' and here is not None else []) + search
                found = next((f / name for f in folders if (f / name).is_file()), None)
                if found is None:
                    system.add(name)
                    continue
                found = Path(os.path.abspath(found))
                if found not in files:
                    data = found.read_bytes()
                    files[found] = hashlib.sha256(data).hexdigest()
                    todo.append((data.decode("utf-8", "replace"), found.parent))
            else:
                computed.add(op)
    return Includes(
        tuple(sorted((str(p), h) for p, h in files.items())), tuple(sorted(system)), tuple(sorted(computed))
    )


def source_dir() -> Path:
    """The folder holding the built-in ``.cu`` sources.

    An installed wheel carries them inside the package (``cupy_ops/_cuda_src``); a source
    checkout or editable install reads the repository's ``cuda_src/`` directly.
    Raises ``FileNotFoundError`` when neither exists.
    """
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_cuda_src", package.parent / "cuda_src"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"cupy_ops kernel sources not found: looked in {package / '_cuda_src'} and "
        f"{package.parent / 'cuda_src'}; reinstall the package"
    )


def assemble(filename: str, directory: Path | None = None) -> str:
    """The text of ``filename`` (in ``directory``, default ``source_dir()``) with its quoted
    includes pasted in place. Raises ``FileNotFoundError`` when the file does not exist."""
    directory = source_dir() if directory is None else Path(directory)
    path = directory / filename
    if not path.is_file():
        raise FileNotFoundError(f"kernel source {path} not found")
    return assemble_text(path.read_text(encoding="utf-8"), filename, [directory], path=path, shown_from=directory)


def _quoted(name: str) -> str:
    return name.replace("\\", "/").replace('"', "'")


def assemble_text(
    text: str, name: str, search, *, path: Path | None = None, angled=(), prelude=(), shown_from: Path | None = None
) -> str:
    """``text`` (the source shown as ``name`` in NVRTC's messages) with its includes pasted.

    A quoted include is looked up next to its includer (for ``text`` itself: next to
    ``path``, the file it was read from; nowhere for a code string), then in the folders of
    ``search`` in order; an angled one in the folders of ``angled`` only (not found: left to
    NVRTC, whose include folders may hold it). ``prelude``: headers (found as quoted includes
    of ``text``) pasted before ``text``. A header is pasted where it is included, as often as
    it is included, except one that includes itself at most once (``#pragma once``, or an
    include guard around the whole file): pasted the first time only. A header under
    ``shown_from`` (default ``cuda_src/``) is named by its path relative to it in ``#line``
    directives, any other by its absolute path. Line endings may be LF or CRLF.

    A quoted header found nowhere becomes an ``#error`` at its line, as a C compiler fails
    only when the preprocessor reaches the include (it may sit in an ``#if`` branch not
    taken); so does a header that includes itself without a guard."""
    search = [Path(f) for f in search]
    angled = [Path(f) for f in angled]
    shown_from = (Path(shown_from) if shown_from is not None else source_dir()).resolve()
    once: set[Path] = set()  # headers pasted already that a second include leaves out
    stack: list[Path] = []  # the headers being pasted, outermost first
    here = None
    if path is not None:
        path = Path(path).resolve()
        here = path.parent
        once.add(path)

    def shown(path: Path) -> str:
        try:
            return path.relative_to(shown_from).as_posix()
        except ValueError:
            return str(path)

    def find(inc: str, folders) -> Path | None:
        for folder in folders:
            candidate = folder / inc
            if candidate.is_file():
                return candidate.resolve()
        return None

    def expand(text: str, label: str, folder: Path | None) -> str:
        text = _PRAGMA_ONCE.sub("", text.replace("\r\n", "\n"))
        hidden = [m.span() for m in _HIDING.finditer(text) if m.group(0).startswith("/*")]

        def paste(match: re.Match) -> str:
            if any(a < match.start() < b for a, b in hidden):
                return match.group(0)  # inside a block comment: not a directive
            inc, angle = match.group(1), match.group(2)
            folders = angled if angle else ([folder] if folder is not None else []) + search
            found = find(inc or angle, folders)
            if found is None:
                if angle:
                    return match.group(0)  # for NVRTC: a CUDA header, or its error
                looked = ", ".join(map(str, folders)) or "no folder"
                return _error(f"header {inc} not found (included from {label}; looked in {looked})")
            if found in once:
                return f"// {inc or angle}: already included"
            if found in stack:
                return _error(f"{shown(found)} includes itself (from {label}) with no include guard")
            body = expand_file(found)
            # #line keeps NVRTC's messages on the lines of the file the user wrote
            after = text.count("\n", 0, match.start()) + 2
            return f'#line 1 "{_quoted(shown(found))}"\n{body}\n#line {after} "{_quoted(label)}"'

        return _INCLUDE.sub(paste, text)

    def expand_file(path: Path) -> str:
        text = path.read_text(encoding="utf-8")
        if _once(text):
            once.add(path)
        stack.append(path)
        try:
            return expand(text, shown(path), path.parent)
        finally:
            stack.pop()

    head = ""
    for inc in prelude:
        header = find(inc, ([here] if here is not None else []) + search)
        if header is None:
            raise FileNotFoundError(f"header {inc} not found (looked in {', '.join(map(str, search))})")
        if header not in once:
            head += f'#line 1 "{_quoted(shown(header))}"\n{expand_file(header)}\n#line 1 "{_quoted(name)}"\n'
    return head + expand(text, name, here)


def _error(why: str) -> str:
    return '#error "cupy_ops: ' + why.replace("\\", "/").replace('"', "'") + '"'
