"""Kernels run on torch's current stream of the tensor's device, with no extra sync; a memset
alike."""

import contextlib
import ctypes

import pytest
import torch

import cupy_ops
from cupy_ops import launch


def test_runs_on_the_current_stream(cuda):
    s = torch.cuda.Stream(cuda)
    x = torch.randn(1 << 22, device=cuda)
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        assert launch._raw_stream(0) == s.cuda_stream  # the handle every launch uses
        torch.cuda._sleep(20_000_000)  # keep s busy, so a launch on another stream would run first
        x.fill_(-1.0)  # queued on s behind the sleep
        y = cupy_ops.relu(x)  # must see the fill: all zeros
        z = cupy_ops.relu_div(x.neg(), 4.0)
    s.synchronize()
    assert torch.equal(y, torch.zeros_like(x))
    assert torch.equal(z, torch.full_like(x, 0.25))


def test_ops_follow_the_side_stream_in_order(cuda):
    s = torch.cuda.Stream(cuda)
    with torch.cuda.stream(s):
        a = torch.randn(300, 200, device=cuda)
        b = torch.randn(200, 100, device=cuda)
        c = cupy_ops.matmul(a, b)
        d = cupy_ops.relu(c)
        e = cupy_ops.relu_div(d, 2.0)
    s.synchronize()
    assert torch.allclose(e, torch.relu(a @ b) / 2, atol=1e-3, rtol=1e-4)


def test_second_gpu(two_gpus):
    dev = torch.device("cuda", 1)
    x = torch.randn(10000, device=dev)
    y = cupy_ops.relu(x)  # current device stays cuda:0
    assert y.device == dev and torch.equal(y, torch.relu(x))
    assert torch.cuda.current_device() == 0
    a = torch.randn(65, 33, device=dev)
    b = torch.randn(33, 17, device=dev)
    assert torch.allclose(cupy_ops.matmul(a, b), a @ b, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="b must be on the same device as a"):
        cupy_ops.matmul(a, b.to("cuda:0"))


def test_memset_zeroes_on_torchs_current_stream_of_the_device(monkeypatch):
    """``launch.memset`` is one cudaMemsetAsync of value 0 on torch's current stream of the
    device (none for no bytes), made current first where another device is. CPU: the runtime
    and the stream stubbed."""
    calls, devices = [], []
    monkeypatch.setattr(launch, "_memset_async", lambda ptr, value, n, stream: calls.append((ptr, value, n, stream)))
    monkeypatch.setattr(launch, "_raw_stream", lambda device: 1000 + device)
    monkeypatch.setattr(launch, "_several_devices", False)
    launch.memset(0, 4096, 12)
    launch.memset(0, 4096, 0)
    assert calls == [(4096, 0, 12, 1000)]
    monkeypatch.setattr(launch, "_several_devices", True)
    current = [0]

    @contextlib.contextmanager
    def device(d):
        devices.append(d)
        current[0], before = d, current[0]
        yield
        current[0] = before

    monkeypatch.setattr(launch, "_get_device", lambda: current[0])
    monkeypatch.setattr(torch.cuda, "device", device)
    launch.memset(1, 8192, 4)
    assert devices == [1] and calls[-1] == (8192, 0, 4, 1001) and current == [0]


def test_accumulators_are_one_zeroed_buffer_a_stream_made_by_another_thread(monkeypatch):
    """``launch.accumulators``: zeroed memory, one buffer a (device, stream) that every call on
    the stream shares, allocated by a thread of its own (outside any CUDA graph pool the caller
    allocates to) and zeroed on the stream before it is handed out; outgrown, a larger one (the
    old one kept: a launch may still use it); None while capturing and past the streams or bytes kept;
    an allocation's error raised in the caller. CPU: streams, memset and allocation stubbed."""
    import threading

    stream, capturing, zeroed, allocating = [7], [False], [], []
    monkeypatch.setattr(launch, "_raw_stream", lambda device: stream[0])
    monkeypatch.setattr(launch, "_several_devices", False)
    monkeypatch.setattr(launch, "_capturing", lambda: capturing[0])
    monkeypatch.setattr(launch, "_accumulators", {})
    monkeypatch.setattr(launch, "_outgrown", [])
    monkeypatch.setattr(launch, "_ACCUMULATOR_STREAMS", 2)
    monkeypatch.setattr(launch, "memset", lambda device, ptr, n: zeroed.append((stream[0], ptr, n)))
    real_empty = torch.empty

    def empty(shape, dtype, device):
        allocating.append((threading.current_thread() is threading.main_thread(), device, shape))
        if shape[0] > 1 << 20:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (stub)")
        return real_empty(shape, dtype=dtype)

    monkeypatch.setattr(torch, "empty", empty)
    a = launch.accumulators(0, 100)
    assert allocating == [(False, torch.device("cuda", 0), (4096,))] and zeroed == [(7, a, 4096)]
    assert launch.accumulators(0, 4096) == a and len(allocating) == 1  # fits: the same, nothing made
    stream[0] = 8
    b = launch.accumulators(0, 100)
    assert b != a and zeroed[-1] == (8, b, 4096)
    stream[0] = 7
    grown = launch.accumulators(0, 5000)  # outgrown: twice the old size at least, zeroed, the old kept
    assert grown not in (a, b) and zeroed[-1] == (7, grown, 8192) and [t.data_ptr() for t in launch._outgrown] == [a]
    assert launch.accumulators(0, 100) == grown
    assert launch.accumulators(0, launch._ACCUMULATOR_BYTES + 1) is None  # past the bytes kept: the caller's
    capturing[0] = True
    assert launch.accumulators(0, 100) is None
    capturing[0], stream[0] = False, 9
    assert launch.accumulators(0, 100) is None and len(launch._accumulators) == 2  # past the streams kept
    stream[0] = 8
    with pytest.raises(torch.cuda.OutOfMemoryError):
        launch.accumulators(0, 1 << 21)
    assert launch.accumulators(0, 100) == b


def test_memcpy_copies_on_torchs_current_stream_of_the_device(monkeypatch):
    """``launch.memcpy`` is one cudaMemcpyAsync (any direction) on torch's current stream of the
    device, none for no bytes; the runtime stubbed, the copy done on host memory."""
    monkeypatch.setattr(launch, "_memcpy_async", lambda dst, src, n, stream: ctypes.memmove(dst, src, n) and None)
    streams = []
    monkeypatch.setattr(launch, "_raw_stream", lambda device: streams.append(device) or 1000 + device)
    monkeypatch.setattr(launch, "_several_devices", False)
    src, dst = torch.arange(8, dtype=torch.uint8), torch.zeros(8, dtype=torch.uint8)
    launch.memcpy(0, dst.data_ptr(), src.data_ptr(), 5)
    launch.memcpy(0, dst.data_ptr(), src.data_ptr(), 0)
    assert dst.tolist() == [0, 1, 2, 3, 4, 0, 0, 0] and streams == [0]
