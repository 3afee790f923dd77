"""Source assembly: a ``.cu`` file (or a user's code string) with its ``#include``s pasted in
place, so the text that is compiled, and hashed into the cache key, is complete.

Headers are found as a C compiler finds them. A quoted include (``#include "x.cuh"``) is
looked up next to the file that includes it (the user's file, or the header that includes
it), then in the include folders given (``include_dirs``), then in ``cuda_src/``; an angled
one (``#include <x.h>``) only in the include folders, else it is left to NVRTC (its own
headers). ``#line`` directives keep NVRTC's messages on the file and line the user wrote.
"""
from __future__ import annotations

import re
from pathlib import Path

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)[ \t]*(?://[^\n]*|/\*[^\n]*?\*/[ \t]*)?$',
                      re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*$", re.MULTILINE)
# What may hide an include directive from the preprocessor: comments; strings are matched
# too so that a "/*" inside one opens nothing.
_HIDING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


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
    return assemble_text(path.read_text(), filename, [directory], path=path, shown_from=directory)


def _quoted(name: str) -> str:
    return name.replace("\\", "/").replace('"', "'")


def assemble_text(text: str, name: str, search, *, path: Path | None = None, angled=(), prelude=(),
                  shown_from: Path | None = None) -> str:
    """``text`` (the source shown as ``name`` in NVRTC's messages) with its includes pasted.

    A quoted include is looked up next to its includer (for ``text`` itself: next to
    ``path``, the file it was read from; nowhere for a code string), then in the folders of
    ``search`` in order; an angled one in the folders of ``angled`` only (not found: left to
    NVRTC, whose own headers it may name). ``prelude``:
    headers (found as quoted includes of ``text``) pasted before ``text``. Each header is
    pasted once (``#pragma once`` semantics, by its resolved path): inlining, rather than
    ``-I``, puts every header's text into the compiled string, so an edited header always
    changes the cache key. A header under ``shown_from`` (default ``cuda_src/``) is named by
    its path relative to it in ``#line`` directives, any other by its absolute path.

    A quoted header found nowhere becomes an ``#error`` at its line, as a C compiler fails
    only when the preprocessor reaches the include (it may sit in an ``#if`` branch not
    taken)."""
    search = [Path(f) for f in search]
    angled = [Path(f) for f in angled]
    shown_from = (Path(shown_from) if shown_from is not None else source_dir()).resolve()
    seen: set[Path] = set()
    here = None
    if path is not None:
        path = Path(path).resolve()
        here = path.parent
        seen.add(path)

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
        text = _PRAGMA_ONCE.sub("", text)
        hidden = [m.span() for m in _HIDING.finditer(text) if m.group(0).startswith("/*")]

        def paste(match: re.Match) -> str:
            if any(a < match.start() < b for a, b in hidden):
                return match.group(0)   # inside a block comment: not a directive
            inc, angle = match.group(1), match.group(2)
            folders = angled if angle else ([folder] if folder is not None else []) + search
            found = find(inc or angle, folders)
            if found is None:
                if angle:
                    return match.group(0)   # for NVRTC: one of its own headers, or its error
                looked = ", ".join(map(str, folders)) or "no folder"
                why = f"cupy_ops: header {inc} not found (included from {label}; looked in {looked})"
                return '#error "' + why.replace("\\", "/").replace('"', "'") + '"'
            if found in seen:
                return f"// {inc or angle}: already included"
            body = expand_file(found)
            # #line keeps NVRTC's messages on the lines of the file the user wrote
            after = text.count("\n", 0, match.start()) + 2
            return f'#line 1 "{_quoted(shown(found))}"\n{body}\n#line {after} "{_quoted(label)}"'

        return _INCLUDE.sub(paste, text)

    def expand_file(path: Path) -> str:
        seen.add(path)
        return expand(path.read_text(), shown(path), path.parent)

    head = ""
    for inc in prelude:
        header = find(inc, ([here] if here is not None else []) + search)
        if header is None:
            raise FileNotFoundError(f"header {inc} not found (looked in {', '.join(map(str, search))})")
        if header not in seen:
            head += f'#line 1 "{_quoted(shown(header))}"\n{expand_file(header)}\n#line 1 "{_quoted(name)}"\n'
    return head + expand(text, name, here)
