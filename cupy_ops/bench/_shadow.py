"""The entry points' guard against a folder named ``cupy_ops`` in the current directory.

Run from the folder that holds a clone of this repository named ``cupy_ops``, Python imports
that folder (it has no ``__init__.py``) as an empty namespace package in place of an editable
install, whose finder comes after the current directory: ``python -m cupy_ops`` then finds its
``__main__`` through the install but ``from . import __version__`` fails. ``restore`` puts the
package this file belongs to in the stand-in's place.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def restore() -> None:
    """Replace a namespace package standing in for ``cupy_ops`` by the real one (and say once
    on stderr what happened); nothing when ``cupy_ops`` is the package."""
    stand_in = sys.modules.get("cupy_ops")
    if stand_in is None or getattr(stand_in, "__file__", None) is not None:
        return
    spec = importlib.util.spec_from_file_location(
        "cupy_ops", PACKAGE_DIR / "__init__.py", submodule_search_locations=[str(PACKAGE_DIR)]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules["cupy_ops"] = package
    try:
        spec.loader.exec_module(package)
    except BaseException:
        sys.modules["cupy_ops"] = stand_in
        raise
    # the submodules imported before this (cupy_ops.bench) hang off the stand-in
    for name, module in list(sys.modules.items()):
        head, _, tail = name.partition(".")
        if head == "cupy_ops" and tail and "." not in tail and not hasattr(package, tail):
            setattr(package, tail, module)
    folders = ", ".join(str(Path(p).resolve()) for p in stand_in.__path__)
    print(
        f"note: the folder {folders} (no __init__.py) hides the installed cupy_ops here; this command uses "
        f"{PACKAGE_DIR}, but `import cupy_ops` in a script run from this folder gets the empty folder: "
        "run scripts from another folder",
        file=sys.stderr,
    )
