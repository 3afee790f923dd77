"""load_inline sources as written, on the GPU: each seed's kernels, built from its load_inline
string unchanged, ported to a ``ModelNew`` that matches the seed's ``Model`` side by side on
``torch.randn`` inputs at KernelBench's fp32 tolerance (allclose, atol = rtol = 1e-4), at sizes
smaller than KernelBench's. The launch each seed wrote in C++ is a few lines of Python here;
the seeds are found as tests/kernel/test_load_inline.py says."""

import pytest
import torch
import torch.nn as nn

import cupy_ops
from cupy_ops.models import linear_relu_div, relu

from load_inline_seeds import SEEDS, seed_sources

pytestmark = pytest.mark.gpu
MODELS = {"linear_relu_div": linear_relu_div.Model, "relu": relu.Model}
# Smaller than KernelBench's; odd rows and a linear layer's odd sizes leave partial blocks.
INIT = {"linear_relu_div": [520, 250, 2.0], "relu": []}
SHAPE = {"linear_relu_div": (125, 520), "relu": (61, 4100)}


def linear(in_features, out_features, divisor, forward):
    """A ``ModelNew`` of level2/63 whose ``forward(self, x)`` is ``forward``: its weights made as
    ``Model`` makes them (one ``nn.Linear``), so the same seed gives the same weights."""

    class ModelNew(nn.Module):
        def __init__(self, in_features, out_features, divisor):
            super().__init__()
            self.linear = nn.Linear(in_features, out_features)
            self.divisor = divisor

    ModelNew.forward = forward
    return ModelNew


def elementwise(launch):
    """A ``ModelNew`` of level1/19: ``out = empty_like(x)``, then ``launch(x, out, n)``."""

    class ModelNew(nn.Module):
        def forward(self, x):
            x = x.contiguous()
            out = torch.empty_like(x)
            launch(x, out, x.numel())
            return out

    return ModelNew


def port_000(sources):
    """Its matmul_kernel (C = A B, one thread per output, 16 x 16 blocks) for the layer's GEMM,
    then its relu_kernel; bias and divide in torch."""
    matmul = cupy_ops.load_inline_kernels(sources[0]).matmul_kernel
    relu_kernel = cupy_ops.load_inline_kernels(sources[1]).relu_kernel

    def forward(self, x):
        w = self.linear.weight.t().contiguous()  # B: (in, out), row-major
        (m, k), n = x.shape, w.shape[1]
        y = torch.empty(m, n, device=x.device)
        matmul(x.contiguous(), w, y, m, n, k, grid=(cupy_ops.cdiv(n, 16), cupy_ops.cdiv(m, 16)), block=(16, 16))
        y += self.linear.bias
        out = torch.empty_like(y)
        relu_kernel(y, out, y.numel(), grid=cupy_ops.cdiv(y.numel(), 256), block=256)
        return out / self.divisor

    return linear(*INIT["linear_relu_div"], forward)


def port_001(sources):
    """nn.Linear, then its fused_relu_divide_kernel."""
    kernel = cupy_ops.load_inline_kernels(sources[0]).fused_relu_divide_kernel

    def forward(self, x):
        y = self.linear(x)
        out = torch.empty_like(y)
        kernel(y, out, self.divisor, y.numel(), grid=cupy_ops.cdiv(y.numel(), 256), block=256)
        return out

    return linear(*INIT["linear_relu_div"], forward)


def port_002(sources):
    """Its vectorized_relu: a thread per element, each reading the float4 holding its element, so
    the count must be a multiple of 4 (else the last float4 reads past the end)."""
    kernel = cupy_ops.load_inline_kernels(sources[0]).vectorized_relu

    def launch(x, out, n):
        if n % 4:
            raise ValueError(f"x: vectorized_relu reads whole float4s; its size must be a multiple of 4, got {n}")
        kernel(x, out, n, grid=cupy_ops.cdiv(n, 256), block=256)

    return elementwise(launch)


def port_003(sources):
    """Its relu_kernel: a thread per element."""
    kernel = cupy_ops.load_inline_kernels(sources[0]).relu_kernel
    return elementwise(lambda x, out, n: kernel(x, out, n, grid=cupy_ops.cdiv(n, 256), block=256))


# Its vectorized_relu_kernel indexes float4s by a float offset (`((float4*)in)[offset]`, offset =
# 4 x the thread): it reads and writes past the end. The port fixes that one index.
FIX_004 = ("[offset]", "[idx]")


def port_004(sources):
    """Its vectorized_relu_kernel with the index fixed (FIX_004): a float4 per thread."""
    assert sources[0].count(FIX_004[0]) == 2, "the seed's indexing changed: FIX_004 no longer applies"
    kernel = cupy_ops.load_inline_kernels(sources[0].replace(*FIX_004)).vectorized_relu_kernel

    def launch(x, out, n):
        if n % 4:
            raise ValueError(f"x: the kernel moves whole float4s; its size must be a multiple of 4, got {n}")
        kernel(out, x, n, grid=cupy_ops.cdiv(n // 4, 256), block=256)

    return elementwise(launch)


PORTS = {stem: port for stem, port in zip(sorted(SEEDS), (port_000, port_001, port_002, port_003, port_004))}


@pytest.mark.parametrize("stem", sorted(SEEDS))
def test_each_seed_ported_to_a_model_new_matches_its_model(stem, cuda):
    problem = SEEDS[stem][0]
    model_new = PORTS[stem](seed_sources(stem))
    torch.manual_seed(42)
    ref = MODELS[problem](*INIT[problem]).to(cuda)
    torch.manual_seed(42)
    new = model_new(*INIT[problem]).to(cuda)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(*SHAPE[problem], device=cuda)
            got, want = new(x), ref(x)
            assert got.shape == want.shape
            assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), (got - want).abs().max().item()


def test_a_count_past_an_int_is_an_error_not_a_wrapped_launch(cuda):
    kernel = cupy_ops.load_inline_kernels(seed_sources("003_1315c655e34380e2")[0]).relu_kernel
    x = torch.randn(8, device=cuda)
    with pytest.raises(ValueError, match=r"argument 'size' of kernel relu_kernel \(int\) must be in \["):
        kernel(x, torch.empty_like(x), 2**31, grid=1, block=256)


def test_seed_004_as_written_misses_most_of_its_output(cuda):
    """Side by side with torch, the kernel as written fails: thread i moves floats 16 i to 16 i + 3.
    Its buffers are four times the count, so that what it reads and writes past the end is ours."""
    kernel = cupy_ops.load_inline_kernels(seed_sources("004_ec1d1e94c2ab0a0c")[0]).vectorized_relu_kernel
    n = 4096
    x = torch.randn(4 * n, device=cuda)
    out = torch.zeros(4 * n, device=cuda)
    kernel(out, x, n, grid=cupy_ops.cdiv(n // 4, 256), block=256)
    moved = torch.arange(4 * n, device=cuda) % 16 < 4
    assert torch.equal(out[moved], torch.relu(x[moved])) and not torch.any(out[~moved])
    assert not torch.equal(out[:n], torch.relu(x[:n]))
