"""A user kernel's source for as long as a ``Kernel`` uses it: counted per source, released
(registry entry, binaries, loaded modules) once the last ``Kernel`` of it is gone; and the
include folders a ``Kernel`` is given."""

from __future__ import annotations

import collections
import os
import threading
import weakref
from pathlib import Path

from .. import compiler, launch

# User sources and how many live Kernel objects use each. A Kernel's finalizer only queues its
# source in _dead (a finalizer may run inside the garbage collector, on any thread, while this
# thread holds a lock); release_dead settles the queue when the next Kernel is made: a source
# no Kernel uses any more is dropped from the registry, its binaries from memory, and its
# loaded modules retired (launch.retire: unloaded once no launch of theirs can be in flight).
_users: dict = {}
_dead: collections.deque = collections.deque()
_users_lock = threading.Lock()


def release_dead() -> None:
    """Release the sources whose last ``Kernel`` is gone."""
    released = []
    with _users_lock:
        while _dead:
            src = _dead.popleft()
            _users[src] -= 1
            if _users[src] == 0:
                del _users[src]
                released.append(src)
    for src in released:
        compiler.release(src)
        variants = list(src.variants.values())
        for v in variants:
            compiler.drop(v)
        launch.retire(variants)


def track(kernel, src) -> None:
    """Count ``kernel`` (a ``Kernel``) as a user of ``src`` until it is garbage collected."""
    release_dead()
    with _users_lock:
        _users[src] = _users.get(src, 0) + 1
    weakref.finalize(kernel, _dead.append, src)


def checked_include_dirs(dirs) -> list[Path]:
    """``include_dirs=`` of a ``Kernel``: existing folders, resolved. ``TypeError`` / ``FileNotFoundError``."""
    if isinstance(dirs, (str, os.PathLike)):
        dirs = [dirs]
    out = []
    for d in dirs:
        if not isinstance(d, (str, os.PathLike)):
            raise TypeError(f"include_dirs must be folders (str or Path), got {d!r}")
        p = Path(d).resolve()
        if not p.is_dir():
            raise FileNotFoundError(f"include folder {p} not found")
        out.append(p)
    return out
