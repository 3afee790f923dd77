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
