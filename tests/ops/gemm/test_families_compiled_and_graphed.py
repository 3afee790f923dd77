"""Every GEMM kernel family under torch.compile(fullgraph=True) and in CUDA graphs (a manual
torch.cuda.graph capture and mode="reduce-overhead"), at shapes that reach each branch of the
plan: full and partial tiles, split-K, the K-split warpgroups, one tile per CTA, persistent
pairs, C^T = B^T A^T (split too), tf32x3 (A split in the kernel and by a pass) and fp16x3 with their
splits; and whole ``ModelNew``s at
KernelBench's shapes.

Each compiled or replayed result must equal eager's bit for bit (same kernels, deterministic
sums). A graph must really replay the kernels: after capture the inputs are overwritten in place
and the replayed output follows them; under reduce-overhead a replay launches nothing from
Python (a spy on ``cupy_ops.launch.launch`` sees no launch) and still gives the new inputs'
product. Which kernel each case takes is asserted on the CPU with the planner
(``test_every_case_reaches_its_branch``) and again on the GPU with the device's own plan.
"""

import pytest
import torch

import cupy_ops
from cupy_ops import launch
from cupy_ops.models import linear_relu_div, matmul
from cupy_ops.ops import elementwise, gemm

from conftest import GPU_REASON, HOPPER
from gemm_plans import ALL_CASES, GROUPS, H100, Case, branch, full_tiles

gpu = pytest.mark.gpu


bf16, f16, f32, f64 = torch.bfloat16, torch.float16, torch.float32, torch.float64


def matrices(c: Case):
    """The plan's view of a case's operands: A (M, K) row-major; B (K, N) row-major (matmul) or
    weight.T of a contiguous (N, K) weight (linear)."""
    es = c.dtype.itemsize
    a = gemm.Matrix(c.M, c.K, c.K, 1, es, True)
    b = gemm.Matrix(c.K, c.N, c.N, 1, es, True) if c.op == "matmul" else gemm.Matrix(c.K, c.N, 1, c.K, es, True)
    return a, b


def cpu_plan(c: Case):
    a, b = matrices(c)
    return gemm.plan(
        c.M, c.N, c.K, c.dtype, a, b, "EpiNone" if c.op == "matmul" else "EpiBiasReluScale", H100, algo=c.algo
    )


@pytest.mark.parametrize("c", ALL_CASES, ids=lambda c: c.id)
def test_every_case_reaches_its_branch(c):
    """On an H100 / H200 (132 SMs, compute capability 9.0) each case's plan takes the branch the
    case names, with whole or partial tiles as it says."""
    p = cpu_plan(c)
    assert branch(p) == c.branch, p
    assert full_tiles(p, c.M, c.N) == c.full, p


def test_the_cases_reach_every_branch():
    """No branch of the plan is left out (one case of each, at least), and partial tiles occur
    in every family."""
    wanted = {
        "naive",
        "simt",
        "simt split-K",
        "tc",
        "wgmma one 128x64 tile per CTA",
        "wgmma K-split warpgroups 64-wide",
        "wgmma K-split warpgroups 128-wide",
        "wgmma split-K",
        "wgmma split-K swapped",
        "wgmma one CTA a tile 64-wide swapped",
        "wgmma one CTA a tile 128-wide",
        "wgmma one CTA a tile 256-wide",
        "wgmma persistent pairs 128-wide",
        "wgmma persistent pairs 256-wide",
        "wgmma persistent pairs 128-wide swapped",
        "tf32x3",
        "tf32x3 swapped",
        "tf32x3 split-K",
        "tf32x3 split-K swapped",
        "tf32x3 swapped K-major b A split by a pass",
        "tf32x3 split-K swapped K-major b A split by a pass",
        "tf32x3 swapped A split by a pass",
        "tf32x3 split-K swapped A split by a pass",
        "fp16x3",
        "fp16x3 N-major split",
        "fp16x3 split-K",
        "fp16x3 split-K N-major split",
    }
    assert wanted <= {c.branch for c in ALL_CASES}
    for name, cases in GROUPS.items():
        assert {c.full for c in cases} == {True, False}, name


# --- on the GPU ---------------------------------------------------------------------------


def inputs(cases, seed, device):
    """The flat list of each case's tensors (matmul: a, b; linear: x, weight, bias), seeded."""
    g = torch.Generator(device=device).manual_seed(seed)
    out = []
    for c in cases:
        shapes = [(c.M, c.K), (c.K, c.N)] if c.op == "matmul" else [(c.M, c.K), (c.N, c.K), (c.N,)]
        out += [torch.randn(s, device=device, generator=g).to(c.dtype) for s in shapes]
    return out


def program(cases):
    """The function that runs every case on the flat list of tensors: one output per case."""

    def run(*ts):
        outs, i = [], 0
        for c in cases:
            if c.op == "matmul":
                outs.append(cupy_ops.matmul(ts[i], ts[i + 1], algo=c.algo))
                i += 2
            else:
                outs.append(cupy_ops.linear_relu_div(ts[i], ts[i + 1], ts[i + 2], 2.0, algo=c.algo))
                i += 3
        return outs

    return run


def runnable(group):
    if GPU_REASON is not None:
        pytest.skip(GPU_REASON)
    if group != "cuda-core" and not HOPPER:
        pytest.skip("the Hopper families need compute capability 9.0")
    return GROUPS[group]  # naive, simt and tc run on every GPU


def device_plan(c, ts):
    a, b = ts[0], ts[1] if c.op == "matmul" else ts[1].t()
    return gemm.plan_for(a, b, "EpiNone" if c.op == "matmul" else "EpiBiasReluScale", c.algo)


def split_inputs(cases, ts):
    out, i = [], 0
    for c in cases:
        n = 2 if c.op == "matmul" else 3
        out.append(ts[i : i + n])
        i += n
    return out


class LaunchSpy:
    """Records (kernel name, grid, cluster) of every ``cupy_ops.launch.launch`` and
    ``launch_packed`` while on (and of the elementwise ops' launches, which bind it at import:
    ``elementwise._launch``)."""

    def __init__(self, monkeypatch):
        self.calls, self.on = [], False
        real, real_packed = launch.launch, launch.launch_packed

        def spy(h, grid, block, args, shared_mem=0, cluster=1):
            if self.on:
                self.calls.append((h.name, tuple(grid), cluster))
            return real(h, grid, block, args, shared_mem, cluster)

        def spy_packed(h, grid, block, packed, shared_mem=0, cluster=1):
            if self.on:
                self.calls.append((h.name, tuple(grid), cluster))
            return real_packed(h, grid, block, packed, shared_mem, cluster)

        monkeypatch.setattr(launch, "launch", spy)
        monkeypatch.setattr(launch, "launch_packed", spy_packed)
        monkeypatch.setattr(elementwise, "_launch", spy)

    def names(self):
        return {name for name, _, _ in self.calls}


def assert_equal_outputs(got, want, cases, what):
    for c, g, w in zip(cases, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (c.id, what)
        assert torch.equal(g, w), f"{c.id}: {what} differs from eager ({(g != w).sum().item()} elements)"


def check_planned(cases, ts, spy):
    """Each case's device plan takes the case's branch (on a GPU of 132 SMs and compute
    capability 9.0, which the shapes were chosen for: H100 SXM, H200), and its kernel was
    launched (persistent pairs as clusters of 2)."""
    dev = gemm.device_info(0)
    for c, t in zip(cases, split_inputs(cases, ts)):
        p = device_plan(c, t)
        if (dev.sm_count, dev.capability) == (H100.sm_count, H100.capability):  # the shapes were chosen for it
            assert branch(p) == c.branch, (c.id, str(p))
        assert p.kernel in spy.names(), f"{c.id}: {p.kernel} was not launched ({sorted(spy.names())})"
        if p.cluster == 2:
            assert any(n == p.kernel and cl == 2 for n, _, cl in spy.calls), c.id


@gpu
@pytest.mark.parametrize("group", list(GROUPS))
def test_compiled_fullgraph_equals_eager_and_reduce_overhead_replays(group, monkeypatch):
    """torch.compile(fullgraph=True, mode="reduce-overhead") of every case of a family group.
    The first call runs the compiled graph as it is (cudagraph trees' warm-up: the plain
    fullgraph path): it launches each planned kernel and its outputs equal eager's bit for bit;
    the second records the CUDA graph; the later ones replay it (the fourth launches nothing
    from Python), the outputs equal to eager's on each call's fresh inputs."""
    cases = runnable(group)
    dev = torch.device("cuda", 0)
    f = program(cases)
    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True, mode="reduce-overhead")
    spy = LaunchSpy(monkeypatch)
    with torch.no_grad():
        for step in range(4):
            ts = inputs(cases, step, dev)
            want = f(*ts)
            torch.compiler.cudagraph_mark_step_begin()
            spy.calls, spy.on = [], True
            got = [o.clone() for o in cf(*ts)]
            spy.on = False
            torch.cuda.synchronize()
            assert_equal_outputs(got, want, cases, f"compiled call {step}")
            if step == 0:
                check_planned(cases, ts, spy)
            if step == 3:
                assert spy.calls == [], f"a replay launched kernels from Python: {spy.calls[:5]}"


@gpu
@pytest.mark.parametrize("group", list(GROUPS))
def test_cuda_graph_capture_replays_the_kernels(group, monkeypatch):
    """A manual torch.cuda.graph capture of every case of a group (kernels compiled and plans
    made in a warm-up first): capture launches each planned kernel; a replay equals eager on
    the captured inputs, and after the inputs are overwritten in place the next replay equals
    eager on the new values (so the graph ran the kernels again, on the same memory)."""
    cases = runnable(group)
    dev = torch.device("cuda", 0)
    f = program(cases)
    static = inputs(cases, 0, dev)
    with torch.no_grad():
        first = f(*static)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            f(*static)
        torch.cuda.current_stream().wait_stream(s)
        spy = LaunchSpy(monkeypatch)
        graph = torch.cuda.CUDAGraph()
        spy.on = True
        with torch.cuda.graph(graph):
            outs = f(*static)
        spy.on = False
        check_planned(cases, static, spy)
        graph.replay()
        torch.cuda.synchronize()
        assert_equal_outputs(outs, first, cases, "the first replay")
        fresh = inputs(cases, 1, dev)
        want = f(*fresh)
        for t, n in zip(static, fresh):
            t.copy_(n)
        spy.calls, spy.on = [], True
        graph.replay()
        spy.on = False
        torch.cuda.synchronize()
        assert spy.calls == []
        assert_equal_outputs(outs, want, cases, "the replay on new inputs")
        for c, o, w0 in zip(cases, outs, first):
            assert not torch.equal(o, w0), f"{c.id}: the output did not change with its inputs"


# --- whole models at KernelBench's shapes -----------------------------------------------------


def kernelbench_models(module):
    """``(Model, ModelNew)`` of a KernelBench problem on the GPU, each seeded with 42 as
    KernelBench builds them."""
    dev = torch.device("cuda", 0)
    init = module.get_init_inputs()
    torch.manual_seed(42)
    ref = module.Model(*init).to(dev)
    torch.manual_seed(42)
    return ref, module.ModelNew(*init).to(dev)


def kernelbench_inputs(module, seed):
    """The problem's inputs (``torch.rand`` at its shapes, made on the GPU) from ``seed``."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.rand(s, device="cuda", generator=g) for s in SHAPES[module]]


MODELS = {"level2-63-linear_relu_div": linear_relu_div, "level1-1-matmul": matmul}
SHAPES = {linear_relu_div: [(1024, 8192)], matmul: [(4096, 4096)] * 2}  # KernelBench's get_inputs


def test_the_model_inputs_are_kernelbenchs():
    for module, shapes in SHAPES.items():
        torch.manual_seed(0)
        assert [tuple(t.shape) for t in module.get_inputs()] == shapes


@gpu
@pytest.mark.parametrize("name", list(MODELS))
def test_model_new_at_kernelbench_shapes_compiles_and_replays(name, monkeypatch):
    """A whole ModelNew at KernelBench's shapes (float32: fp16x3 on Hopper) under
    torch.compile(fullgraph=True, mode="reduce-overhead") and a manual CUDA graph: the same bits
    as eager ModelNew, allclose (1e-4) to Model; a replay follows new inputs and, under
    reduce-overhead, launches nothing from Python."""
    if GPU_REASON is not None:
        pytest.skip(GPU_REASON)
    module = MODELS[name]
    ref, new = kernelbench_models(module)
    xs = kernelbench_inputs(module, 0)
    with torch.no_grad():
        eager = new(*xs)
        assert torch.allclose(eager, ref(*xs), atol=1e-4, rtol=1e-4)
        if HOPPER:
            a, b = (xs[0], new.linear.weight.t()) if module is linear_relu_div else xs
            assert (
                gemm.plan_for(a, b, "EpiBiasReluScale" if module is linear_relu_div else "EpiNone", "accurate").family
                == "fp16x3"
            )
        torch._dynamo.reset()
        cm = torch.compile(new, fullgraph=True, mode="reduce-overhead")
        spy = LaunchSpy(monkeypatch)
        for step in range(4):
            ys = kernelbench_inputs(module, step)
            want = new(*ys)
            torch.compiler.cudagraph_mark_step_begin()
            spy.calls, spy.on = [], True
            got = cm(*ys).clone()
            spy.on = False
            assert torch.equal(got, want), f"reduce-overhead call {step}"
        assert spy.calls == [], "a replay launched kernels from Python"
        # a manual capture of the eager model
        static = [x.clone() for x in xs]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            new(*static)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = new(*static)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager)
        ys = kernelbench_inputs(module, 7)
        for t, y in zip(static, ys):
            t.copy_(y)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, new(*ys)) and not torch.equal(out, eager)


@gpu
def test_elementwise_ops_replay_in_a_cuda_graph_and_under_reduce_overhead(monkeypatch):
    """relu, relu_div by a number and by a CUDA divisor, relu_div_ in place: a manual capture
    whose replay follows new values written into x and into the divisor (read on the GPU at
    replay time), bit for bit as torch; and the same under torch.compile(fullgraph=True,
    mode="reduce-overhead"), whose replays launch nothing from Python."""
    if GPU_REASON is not None:
        pytest.skip(GPU_REASON)
    dev = torch.device("cuda", 0)

    def f(x, xb, d):
        y = x.clone()
        cupy_ops.relu_div_(y, d)
        return cupy_ops.relu(x), cupy_ops.relu_div(x, 3.0), cupy_ops.relu_div(xb, d), y

    def want(x, xb, d):
        return torch.relu(x), torch.relu(x) / 3.0, torch.relu(xb) / d, torch.relu(x) / d

    x, d = torch.randn(1000, 257, device=dev), torch.tensor(0.7, device=dev)
    xb = x.to(torch.bfloat16)
    f(x, xb, d)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        f(x, xb, d)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = f(x, xb, d)
    for step in range(3):
        x.copy_(torch.randn(1000, 257, device=dev))
        xb.copy_(x)
        d.fill_(0.25 + step)
        graph.replay()
        torch.cuda.synchronize()
        for i, (got, ref) in enumerate(zip(outs, want(x, xb, d))):
            assert torch.equal(got, ref), f"replay {step}, output {i}"
    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True, mode="reduce-overhead")
    want_compiled = torch.compile(want, fullgraph=True)
    spy = LaunchSpy(monkeypatch)
    spy.on = True
    f(x, xb, d)
    assert len(spy.calls) >= 4, spy.calls  # the spy sees the elementwise launches
    for step in range(4):
        x, d = torch.randn(1000, 257, device=dev), torch.tensor(0.3 + step, device=dev)
        xb = x.to(torch.bfloat16)
        torch.compiler.cudagraph_mark_step_begin()
        spy.calls, spy.on = [], True
        got = [o.clone() for o in cf(x, xb, d)]
        spy.on = False
        # outputs 2 and 3 divide by the CUDA divisor with torch's own division under compile,
        # which inductor computes otherwise than eager torch (for bf16 it keeps d in fp32 where
        # eager rounds it to bf16 first): their reference is torch's compiled expression; 0 and
        # 1 come from our kernels alone: eager torch's values
        refs = list(want(x, xb, d))
        compiled = want_compiled(x, xb, d)
        refs[2], refs[3] = compiled[2], compiled[3]
        for i, (g, ref) in enumerate(zip(got, refs)):
            assert torch.equal(g, ref), f"reduce-overhead call {step}, output {i}"
    assert spy.calls == [], "a replay launched kernels from Python"
