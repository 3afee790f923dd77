"""KernelBench models: same weights under the same seed, interchangeable state_dicts, and
ModelNew's forward equal to Model's."""

import pytest
import torch

import cupy_ops
from cupy_ops.models import linear_relu_div, matmul, relu

from conftest import require_algo

PAIRS = [(linear_relu_div, cls) for cls in (linear_relu_div.ModelNew, linear_relu_div.ModelNewNaive)]


def test_kernelbench_shapes():
    assert (relu.batch_size, relu.dim) == (4096, 393216) and relu.get_init_inputs() == []
    assert linear_relu_div.get_init_inputs() == [8192, 8192, 2.0]
    [x] = linear_relu_div.get_inputs()
    assert x.shape == (1024, 8192) and x.min() >= 0  # torch.rand, as KernelBench
    a, b = matmul.get_inputs()
    assert a.shape == b.shape == (4096, 4096) and matmul.get_init_inputs() == []


@pytest.mark.parametrize("module, cls", PAIRS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_same_seed_same_weights(module, cls):
    init = [64, 32, 2.0]
    torch.manual_seed(42)
    ref = module.Model(*init)
    torch.manual_seed(42)
    new = cls(*init)
    ref_state, new_state = ref.state_dict(), new.state_dict()
    assert ref_state.keys() == new_state.keys()
    for k in ref_state:
        assert torch.equal(ref_state[k], new_state[k]), k


@pytest.mark.parametrize("module, cls", PAIRS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_state_dict_round_trip(module, cls):
    ref = module.Model(64, 32, 2.0)
    new = cls(64, 32, 2.0)
    new.load_state_dict(ref.state_dict())
    assert all(torch.equal(p, q) for p, q in zip(ref.parameters(), new.parameters()))
    ref2 = module.Model(64, 32, 2.0)
    ref2.load_state_dict(new.state_dict())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.float16, 1e-2), (torch.bfloat16, 1e-2)], ids=str)
@pytest.mark.parametrize("cls", [linear_relu_div.ModelNew, linear_relu_div.ModelNewNaive], ids=lambda c: c.__name__)
def test_linear_relu_div_forward(cls, dtype, tol, cuda):
    torch.manual_seed(42)
    ref = linear_relu_div.Model(512, 256, 2.0).to(cuda, dtype)
    torch.manual_seed(42)
    new = cls(512, 256, 2.0).to(cuda, dtype)
    with torch.no_grad():
        for fill in (torch.rand, torch.randn):
            x = fill(64, 512, device=cuda).to(dtype)
            assert torch.allclose(new(x), ref(x), atol=tol, rtol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_relu_and_matmul_forward(dtype, cuda):
    x = torch.randn(64, 1000, device=cuda).to(dtype)
    assert torch.equal(relu.ModelNew()(x), relu.Model()(x))
    a = torch.rand(96, 80, device=cuda).to(dtype)
    b = torch.rand(80, 72, device=cuda).to(dtype)
    tol = 1e-4 if dtype == torch.float32 else 1e-2
    assert torch.allclose(matmul.ModelNew()(a, b), matmul.Model()(a, b), atol=tol, rtol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "dtype, family", [(torch.float32, "tf32x3"), (torch.float16, "wgmma"), (torch.bfloat16, "wgmma")], ids=str
)
def test_linear_relu_div_model_new_is_one_fused_kernel_on_hopper(dtype, family, cuda, monkeypatch):
    """On Hopper ModelNew runs the layer as one fused kernel (not cuBLAS + relu_div) for each
    dtype: the variant that measured fastest at KernelBench's shape (README)."""
    require_algo("wgmma")
    calls = []
    fused = cupy_ops.linear_relu_div

    def spy(x, w, b, d, algo="auto"):
        calls.append(cupy_ops.gemm_plan(x, w.T, algo=algo, bias_relu_scale=True).family)
        return fused(x, w, b, d, algo=algo)

    monkeypatch.setattr(cupy_ops, "linear_relu_div", spy)
    monkeypatch.setattr(cupy_ops, "relu_div", lambda *a, **k: pytest.fail("ModelNew took cuBLAS + relu_div"))
    torch.manual_seed(0)
    new = linear_relu_div.ModelNew(256, 128, 2.0).to(cuda, dtype)
    with torch.no_grad():
        new(torch.randn(32, 256, device=cuda).to(dtype))
    assert calls == [family]


@pytest.mark.gpu
def test_models_on_kernelbench_rand_inputs(cuda):
    # KernelBench's own check, on its own input generator (CPU torch.rand, moved to the GPU)
    torch.manual_seed(42)
    ref = linear_relu_div.Model(*linear_relu_div.get_init_inputs()).to(cuda)
    torch.manual_seed(42)
    new = linear_relu_div.ModelNew(*linear_relu_div.get_init_inputs()).to(cuda)
    with torch.no_grad():
        for _ in range(2):
            [x] = [t.to(cuda) for t in linear_relu_div.get_inputs()]
            assert torch.allclose(new(x), ref(x), atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.slow
def test_relu_model_at_full_kernelbench_size(cuda):
    numel = relu.batch_size * relu.dim
    if torch.cuda.mem_get_info()[0] < 3 * 4 * numel + 2**30:
        pytest.skip(f"needs {3 * 4 * numel / 1e9:.0f} GB of free GPU memory")
    x = torch.rand(relu.batch_size, relu.dim, device=cuda) - 0.5  # negatives too, unlike torch.rand
    got = relu.ModelNew()(x)
    assert torch.equal(got, relu.Model()(x))


class _Exact(matmul.Model):
    """matmul rounded once from float64: more accurate than torch fp32, another summation."""

    def forward(self, A, B):
        return torch.matmul(A.double(), B.double()).float()


class _Off(matmul.Model):
    """torch's product plus an error larger than torch's own."""

    def forward(self, A, B):
        return torch.matmul(A, B) + 1e-3


def test_kernelbench_check_takes_a_more_accurate_gemm_and_refuses_a_worse_one(cuda):
    """kernelbench.run: rand trials are KernelBench's allclose; the randn trial also passes a
    result no farther from float64 than torch's (a GEMM summed in another order), not one
    that is farther."""
    from cupy_ops.bench import kernelbench

    def make_inputs(fill, seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        return [fill(256, 2048, device="cuda", generator=g), fill(2048, 256, device="cuda", generator=g)]

    results = {
        r.variant: r
        for r in kernelbench.run(
            matmul,
            {"exact": _Exact, "off": _Off},
            make_inputs=make_inputs,
            init_inputs=[],
            dtype=torch.float32,
            trials=1,
            runs=3,
            log=lambda *a, **k: None,
        )
    }
    assert results["exact"].passed, results["exact"].failures
    assert not results["off"].passed and any("float64" in f for f in results["off"].failures)
