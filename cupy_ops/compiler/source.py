"""Source assembly: a ``.cu`` file (or a user's code string) with its quoted ``#include``s
pasted in place, so the text that is compiled, and hashed into the cache key, is complete."""
from __future__ import annotations

import re
from pathlib import Path

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[ \t]*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*$", re.MULTILINE)


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
    includes pasted in place. Raises ``FileNotFoundError`` naming a missing file."""
    directory = source_dir() if directory is None else Path(directory)
    path = directory / filename
    if not path.is_file():
        raise FileNotFoundError(f"kernel source {path} not found")
    return assemble_text(path.read_text(), filename, [directory])


def _quoted(name: str) -> str:
    return name.replace("\\", "/").replace('"', "'")


def assemble_text(text: str, name: str, search: list[Path]) -> str:
    """``text`` (the source called ``name``) with quoted includes pasted from the folders of
    ``search``, first match wins. Each header is pasted once (``#pragma once`` semantics):
    inlining, rather than ``-I``, puts every header's text into the compiled string, so an
    edited header always changes the cache key."""
    seen: set[str] = set()

    def expand(text: str, name: str) -> str:
        seen.add(name)
        text = _PRAGMA_ONCE.sub("", text)

        def paste(match: re.Match) -> str:
            inc = match.group(1)
            if inc in seen:
                return f"// {inc}: already included"
            for folder in search:
                if (Path(folder) / inc).is_file():
                    body = expand((Path(folder) / inc).read_text(), inc)
                    # #line keeps NVRTC's messages on the lines of the file the user wrote
                    after = text.count("\n", 0, match.start()) + 2
                    return f'#line 1 "{_quoted(inc)}"\n{body}\n#line {after} "{_quoted(name)}"'

            raise FileNotFoundError(f"kernel source {inc} not found (included from {name}; looked in "
                                    f"{', '.join(map(str, search))})")

        return _INCLUDE.sub(paste, text)

    return expand(text, name)
