"""The compile layer's disk cache and the launch layer's loading, on the CPU (NVRTC needs no
GPU): one binary per variant, entries trusted only after they are checked, written
atomically, refused in folders other users can write to (a private folder instead, removed at
exit), read but never written in a safe read-only folder; failed loads retried, never kept."""

import os
import stat
import subprocess
import sys
import uuid

import pytest

from cupy_ops import compiler, launch
from cupy_ops.compiler import build, cache

pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")
POSIX = pytest.mark.skipif(os.name == "nt", reason="file ownership and modes are POSIX")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh CUPY_CACHE_DIR; cupy_ops keeps its entries in its cupy_ops/ subfolder."""
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    return tmp_path / "cupy_ops"


def variant(value=1):
    """A variant of a source no other test has (so no process-level cache knows it)."""
    tag = uuid.uuid4().hex[:8]
    src = compiler.user(f'extern "C" __global__ void k_{tag}(float* y) {{ y[0] = {value}; }}', f"t_{tag}.cu")
    return src.variant(f"k_{tag}")


def entries(folder):
    return sorted(p for p in folder.iterdir() if p.suffix == ".bin")


def forget_in_memory(monkeypatch):
    """As a new process: nothing compiled in memory (the disk cache stays)."""
    monkeypatch.setattr(build, "_binaries", {})


@POSIX
def test_one_private_entry_per_variant_written_atomically(cache_dir):
    v = variant()
    b = compiler.binary(v, "sm_90")
    assert not b.cached and b.image[:4] == b"\x7fELF"
    [entry] = entries(cache_dir)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600 and stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    assert not [p for p in cache_dir.iterdir() if p.suffix == ".tmp"]
    v.source.variant(v.expr + "_unused")  # registering more variants changes nothing compiled
    assert compiler.binary(v, "sm_90") is b


def test_a_new_process_reads_the_entry_without_compiling(cache_dir, monkeypatch):
    v = variant()
    b = compiler.binary(v, "sm_90")
    forget_in_memory(monkeypatch)
    monkeypatch.setattr(compiler.nvrtc, "compile", lambda *a: pytest.fail("compiled although cached"))
    again = compiler.binary(v, "sm_90")
    assert again.cached and again.image == b.image and again.lowered == b.lowered


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "garbage", "empty", "other key"])
def test_a_corrupt_entry_is_rebuilt_with_a_warning(damage, cache_dir, monkeypatch):
    v = variant()
    good = compiler.binary(v, "sm_90")
    [entry] = entries(cache_dir)
    data = entry.read_bytes()
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "flipped byte":
        data = data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:]
    elif damage == "garbage":
        data = b"garbage" * 100
    elif damage == "empty":
        data = b""
    else:  # a valid entry of another variant, renamed to this one's name
        other = variant(2)
        compiler.binary(other, "sm_90")
        data = next(p for p in entries(cache_dir) if p != entry).read_bytes()
    entry.write_bytes(data)
    forget_in_memory(monkeypatch)
    with pytest.warns(RuntimeWarning, match=r"kernel cache entry .* is corrupt .*; compiling the kernel again"):
        rebuilt = compiler.binary(v, "sm_90")
    assert not rebuilt.cached and rebuilt.image == good.image
    forget_in_memory(monkeypatch)
    assert compiler.binary(v, "sm_90").cached  # the rebuilt entry replaced the corrupt one


@POSIX
def test_a_folder_other_users_can_write_is_refused_and_its_plants_never_run(tmp_path, monkeypatch):
    # A planted entry: valid header, key and checksum, but another binary, in a folder anyone
    # can write to. It must not be loaded; a private folder is used instead, with a warning.
    shared = tmp_path / "shared"
    monkeypatch.setenv("CUPY_CACHE_DIR", str(shared))
    folder = shared / "cupy_ops"
    folder.mkdir(parents=True)
    v = variant()
    honest = compiler.binary(v, "sm_90")  # (cached in memory and in the folder, still private)
    [entry] = entries(folder)
    _, _, meta_len, _, _ = cache._HEADER.unpack_from(entry.read_bytes())
    meta = entry.read_bytes()[cache._HEADER.size : cache._HEADER.size + meta_len]
    entry.unlink()
    cache.write(honest.key, meta, b"PLANTED BINARY")
    os.chmod(folder, 0o777)
    monkeypatch.setattr(cache, "_folders", {})  # as a new process
    forget_in_memory(monkeypatch)
    with pytest.warns(
        RuntimeWarning,
        match=rf"not using the kernel cache folder {folder} \(writable by other "
        r"users \(mode 777\)\).*private folder",
    ):
        b = compiler.binary(v, "sm_90")
    assert b.image == honest.image and not b.cached
    assert [p.name for p in entries(folder)] == [entry.name]  # nothing written there


@POSIX
def test_an_entry_other_users_can_write_is_ignored(cache_dir, monkeypatch):
    v = variant()
    compiler.binary(v, "sm_90")
    [entry] = entries(cache_dir)
    os.chmod(entry, 0o666)
    forget_in_memory(monkeypatch)
    with pytest.warns(RuntimeWarning, match=r"ignoring kernel cache entry .* \(writable by other users"):
        assert not compiler.binary(v, "sm_90").cached
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600  # replaced by a private one


@POSIX
@pytest.mark.skipif(os.name == "nt" or os.getuid() != 0, reason="changing a file's owner needs root")
def test_an_entry_owned_by_another_user_is_ignored(cache_dir, monkeypatch):
    v = variant()
    compiler.binary(v, "sm_90")
    [entry] = entries(cache_dir)
    os.chown(entry, 12345, 12345)
    forget_in_memory(monkeypatch)
    with pytest.warns(RuntimeWarning, match=r"ignoring kernel cache entry .* \(owned by another user \(uid 12345\)"):
        assert not compiler.binary(v, "sm_90").cached


def test_in_memory_mode_writes_nothing(cache_dir, monkeypatch):
    monkeypatch.setenv("CUPY_CACHE_IN_MEMORY", "1")
    compiler.binary(variant(), "sm_90")
    assert not cache_dir.exists()


def test_an_edited_file_compiles_its_new_contents(tmp_path, cache_dir):
    import cupy_ops

    path = tmp_path / "k.cu"
    path.write_text('extern "C" __global__ void k(float* y) { y[0] = 1.0f; }\n')
    first = cupy_ops.Kernel(path, "k").variant(None)
    path.write_text('extern "C" __global__ void k(float* y) { y[0] = 2.0f; }\n')
    second = cupy_ops.Kernel(path, "k").variant(None)
    assert first is not second
    assert compiler.binary(first, "sm_90").image != compiler.binary(second, "sm_90").image
    assert cupy_ops.Kernel(path, "k").variant(None) is second  # unchanged contents: the same variant


class FakeDriverError(Exception):
    pass


class FakeFunction:
    ptr = 1234


@pytest.fixture
def fake_device(monkeypatch):
    """The launch layer on a pretend sm_90 device, with a controllable module loader."""
    launch._bind_driver()
    monkeypatch.setattr(launch, "_DriverError", FakeDriverError)
    monkeypatch.setattr(launch, "capability", lambda device: (9, 0))
    monkeypatch.setattr(launch, "device_arch", lambda device: "sm_90")
    monkeypatch.setattr(launch, "_smem_default", lambda fn: 48 * 1024)  # (a fake function: no driver query)
    loads = []

    def loader(outcomes):
        def load(b, device):
            loads.append(b)
            if outcomes.pop(0) == "fail":
                raise FakeDriverError("CUDA_ERROR_INVALID_IMAGE")
            return FakeFunction()

        monkeypatch.setattr(launch, "_load_image", load)

    return loader, loads


def test_a_failed_load_is_never_cached(cache_dir, fake_device):
    loader, loads = fake_device
    v = variant()
    loader(["fail", "ok"])
    with pytest.raises(RuntimeError, match=rf"loading {v.expr} of {v.source.name} on cuda:0 failed"):
        launch.handle(v, 0, ("ptr",))
    assert (v, 0) not in launch.handles
    h = launch.handle(v, 0, ("ptr",))  # the next call tries again, and works
    assert launch.handles[(v, 0)] is h and len(loads) == 2


def test_a_cached_binary_that_fails_to_load_is_rebuilt_once(cache_dir, fake_device, monkeypatch):
    loader, loads = fake_device
    v = variant()
    compiler.binary(v, "sm_90")
    forget_in_memory(monkeypatch)  # a new process: the binary comes from disk
    loader(["fail", "ok"])
    with pytest.warns(RuntimeWarning, match="did not load on cuda:0 .*compiling it again"):
        h = launch.handle(v, 0, ("ptr",))
    assert [b.cached for b in loads] == [True, False] and launch.handles[(v, 0)] is h


def test_each_compile_is_one_info_record_naming_kernel_arch_and_time(cache_dir, caplog, monkeypatch):
    v = variant()
    with caplog.at_level("INFO", logger="cupy_ops"):
        compiler.binary(v, "sm_90")
        compiler.binary(v, "sm_90")  # in memory: no second record
        forget_in_memory(monkeypatch)
        compiler.binary(v, "sm_90")  # from the disk cache: none either
    records = [r for r in caplog.records if r.name == "cupy_ops"]
    assert len(records) == 1 and records[0].levelname == "INFO"
    msg = records[0].getMessage()
    assert v.expr in msg and v.source.name in msg and "sm_90" in msg and msg.rstrip().endswith(" s")


# --- a folder this process cannot write, and the private fallback ----------------------------


def as_a_new_process(monkeypatch):
    monkeypatch.setattr(cache, "_folders", {})
    monkeypatch.setattr(cache, "_read_only", set())
    forget_in_memory(monkeypatch)


@POSIX
def test_a_read_only_filled_folder_is_read_and_never_written(cache_dir, monkeypatch):
    """A cache filled once and shared read-only (a cluster's): its entries are used, what this
    process compiles is not kept, with one warning."""
    v = variant()
    b = compiler.binary(v, "sm_90")
    [entry] = entries(cache_dir)
    os.chmod(cache_dir, 0o555)  # (root writes anyway: its owner's mode says read-only)
    try:
        as_a_new_process(monkeypatch)
        with pytest.warns(
            RuntimeWarning,
            match=rf"the kernel cache folder {cache_dir} is read-only: kernels cached "
            r"there are used, the ones this process compiles are not kept",
        ):
            again = compiler.binary(v, "sm_90")
        assert again.cached and again.image == b.image and cache.read_only()
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")  # one warning, not one per kernel
            new = compiler.binary(variant(2), "sm_90")
        assert not new.cached and entries(cache_dir) == [entry]
        assert not [p for p in cache_dir.iterdir() if p.suffix == ".tmp"]
    finally:
        os.chmod(cache_dir, 0o700)


PRIVATE_FALLBACK = """
import os, sys, warnings
from cupy_ops.compiler import cache
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    where = cache.folder()
print(where)
print(os.path.isdir(where), where != cache.requested_folder())
"""


@POSIX
def test_the_private_fallback_folder_is_removed_when_the_process_exits(tmp_path):
    shared = tmp_path / "shared"
    (shared / "cupy_ops").mkdir(parents=True)
    os.chmod(shared / "cupy_ops", 0o777)  # writable by others: refused, a private folder instead
    env = dict(os.environ, CUPY_CACHE_DIR=str(shared))
    env.pop("CUPY_CACHE_IN_MEMORY", None)
    proc = subprocess.run(
        [sys.executable, "-c", PRIVATE_FALLBACK], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    where, state = proc.stdout.splitlines()
    assert state == "True True" and "cupy_ops_cache_" in where
    assert not os.path.exists(where)


CUPY_FALLBACK = """
import os, warnings
warnings.simplefilter("ignore")
from cupy_ops.compiler import nvrtc
nvrtc.import_cupy()
print(os.environ["CUPY_CACHE_DIR"])
"""


@POSIX
def test_cupys_private_cache_folder_is_removed_when_the_process_exits(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")  # CuPy cannot create its cache folder under a file
    env = dict(os.environ, CUPY_CACHE_DIR=str(blocker / "cache"))
    proc = subprocess.run([sys.executable, "-c", CUPY_FALLBACK], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    where = proc.stdout.strip().splitlines()[-1]
    if where == str(blocker / "cache"):
        pytest.skip("this CuPy does not create its cache folder when imported")
    assert "cupy_ops_cupy_cache_" in where and not os.path.exists(where)
