"""The on-disk cache of compiled kernels: one checked file per variant.

An entry is trusted only after it is checked. Its file must be a regular file of this user
(or root), writable by no one else, in a folder of this user writable by no one else; its
header must carry the expected key, and the length and SHA-256 of its payload must match.
A corrupt or truncated entry is rebuilt with a warning; entries are written atomically
(a private temporary file, then a rename). A folder other users can write to is refused
with a warning naming it, and a private folder is used for the process instead (removed when
it exits): a binary another user plants there would otherwise run in this process (the way ssh
treats its keys). A safe folder this process cannot write to (a filled cache shared read-only
on a cluster, owned by root or this user) is read from, and what the process compiles is
not kept on disk, with one warning.

The folder is ``$CUPY_CACHE_DIR/cupy_ops`` (CuPy's variable; default
``~/.cupy/kernel_cache/cupy_ops``); ``CUPY_CACHE_IN_MEMORY=1`` turns the disk cache off.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import stat
import struct
import tempfile
import threading
import warnings
from pathlib import Path

MAGIC = b"CUPYOPS\x02"  # file format; bump to orphan every older entry
_HEADER = struct.Struct("<8s32sIQ32s")  # magic, key, meta length, image length, sha256(meta + image)
_lock = threading.Lock()
_folders: dict[str, Path] = {}  # requested folder -> folder in use (itself, or a private fallback)
_read_only: set[Path] = set()  # folders in use that are read, never written
_warned: set[str] = set()


def key(*parts) -> bytes:
    """The 32-byte cache key of everything that decides a binary (``parts``: str or bytes)."""
    h = hashlib.sha256(MAGIC)
    for p in parts:
        b = p.encode() if isinstance(p, str) else bytes(p)
        h.update(struct.pack("<Q", len(b)))
        h.update(b)
    return h.digest()


def requested_folder() -> Path:
    base = os.environ.get("CUPY_CACHE_DIR") or os.path.join("~", ".cupy", "kernel_cache")
    return Path(base).expanduser() / "cupy_ops"


def _warn(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=4)


def _unsafe(st: os.stat_result) -> str | None:
    """Why a file or folder with status ``st`` cannot be trusted, or None."""
    if os.name == "nt":
        return None
    if st.st_uid not in (os.getuid(), 0):
        return f"owned by another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def folder() -> Path | None:
    """The checked folder entries live in, created private (0700) if missing; None when the
    disk cache is off. A read-only one is in ``read_only()``."""
    if os.environ.get("CUPY_CACHE_IN_MEMORY", "0") not in ("", "0"):
        return None
    requested = requested_folder()
    with _lock:
        got = _folders.get(str(requested))
        if got is not None:
            return got
        reason = None
        try:
            requested.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = requested.stat()
            reason = "not a folder" if not stat.S_ISDIR(st.st_mode) else _unsafe(st)
            if reason is None and not os.access(requested, os.R_OK | os.X_OK):
                reason = "not readable"
        except OSError as exc:
            reason = f"not usable: {exc}"
        if reason is None:
            got = requested
            if not _writable(requested, st):
                _read_only.add(got)
                _warn(
                    f"cupy_ops: the kernel cache folder {requested} is read-only: kernels cached there are "
                    "used, the ones this process compiles are not kept on disk"
                )
        else:
            got = Path(tempfile.mkdtemp(prefix="cupy_ops_cache_"))
            atexit.register(shutil.rmtree, got, True)  # private to this process: nothing to keep
            _warn(
                f"cupy_ops: not using the kernel cache folder {requested} ({reason}); compiled kernels are "
                f"cached in the private folder {got} for this process instead"
                + (f" (fix: chmod go-w {requested})" if "writable by other" in reason else "")
            )
        _folders[str(requested)] = got
        return got


def _writable(path: Path, st: os.stat_result) -> bool:
    """Whether entries can be written into ``path``: the system says so (a read-only mount
    says no), and, for its owner, so does its mode (root may write anywhere, yet a 0555
    folder is one its owner made read-only)."""
    if not os.access(path, os.W_OK | os.X_OK):
        return False
    return os.name == "nt" or st.st_uid != os.getuid() or bool(st.st_mode & stat.S_IWUSR)


def read_only() -> bool:
    """Whether the folder in use is read and never written."""
    where = folder()
    return where is not None and where in _read_only


def read(k: bytes) -> tuple[bytes, bytes] | None:
    """The ``(meta, image)`` stored under key ``k``, or None when there is no trusted entry."""
    where = folder()
    if where is None:
        return None
    path = where / f"{k.hex()}.bin"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:  # a link, or unreadable
        _warn(f"cupy_ops: ignoring kernel cache entry {path} ({exc}); compiling the kernel again")
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        reason = "not a regular file" if not stat.S_ISREG(st.st_mode) else _unsafe(st)
        if reason is not None:
            _warn(f"cupy_ops: ignoring kernel cache entry {path} ({reason}); compiling the kernel again")
            return None
        data = f.read()
    reason = _check(data, k)
    if reason is not None:
        _warn(f"cupy_ops: kernel cache entry {path} is corrupt ({reason}); compiling the kernel again")
        return None
    _, _, meta_len, _, _ = _HEADER.unpack_from(data)
    body = data[_HEADER.size :]
    return body[:meta_len], body[meta_len:]


def _check(data: bytes, k: bytes) -> str | None:
    if len(data) < _HEADER.size:
        return f"{len(data)} bytes, shorter than its header"
    magic, stored, meta_len, image_len, digest = _HEADER.unpack_from(data)
    if magic != MAGIC:
        return "not a cupy_ops cache entry of this version"
    if stored != k:
        return "its key does not match its name"
    if len(data) != _HEADER.size + meta_len + image_len:
        return f"{len(data) - _HEADER.size} bytes of payload, {meta_len + image_len} expected (truncated?)"
    if hashlib.sha256(data[_HEADER.size :]).digest() != digest:
        return "checksum mismatch"
    return None


def write(k: bytes, meta: bytes, image: bytes) -> None:
    """Store ``(meta, image)`` under key ``k`` atomically; a failure only warns (the next process
    compiles again)."""
    where = folder()
    if where is None or where in _read_only:
        return
    body = meta + image
    data = _HEADER.pack(MAGIC, k, len(meta), len(image), hashlib.sha256(body).digest()) + body
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=where, prefix=f".{k.hex()[:16]}.", suffix=".tmp")  # mode 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, where / f"{k.hex()}.bin")
        tmp = None
    except OSError as exc:
        _warn(
            f"cupy_ops: could not write to the kernel cache folder {where} ({exc}); kernels will be compiled "
            "again by the next process"
        )
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def remove(k: bytes) -> None:
    """Delete the entry of key ``k`` (one that failed to load), if any."""
    where = folder()
    if where is not None and where not in _read_only:
        with contextlib.suppress(OSError):
            os.unlink(where / f"{k.hex()}.bin")
