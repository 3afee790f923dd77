"""The package's structure: no import runs back up a layer, the two GEMM ops share the one
plan, and generated CUDA matches its generator (CPU)."""

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cupy_ops"


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports, at top level or inside functions."""
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path

    def resolve(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {m: set() for m in mods}
    for m, path in mods.items():
        here = m if path.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "cupy_ops"]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here
                    for _ in range(node.level - 1):
                        base = base.rpartition(".")[0]
                    base = ".".join(x for x in (base, node.module or "") if x)
                elif (node.module or "").split(".")[0] == "cupy_ops":
                    base = node.module
                else:
                    continue
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                r = resolve(t)
                if r and r != m:
                    graph[m].add(r)
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_a_module_that_imports_it_back():
    graph = import_graph()
    assert len(graph) > 20 and "cupy_ops.compiler.build" in graph
    assert cycles(graph) == []


def test_the_walker_sees_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_compile_layer_imports_nothing_above_it():
    graph = import_graph()
    for m, deps in graph.items():
        if m.startswith("cupy_ops.compiler"):
            assert all(d.startswith("cupy_ops.compiler") for d in deps), (m, deps)
    assert graph["cupy_ops.device"] <= {"cupy_ops.compiler"}
    assert graph["cupy_ops.launch"] <= {"cupy_ops.compiler", "cupy_ops.device"}
    assert graph["cupy_ops.checks"] <= {"cupy_ops.dtypes"}


def test_kernel_layer_imports_nothing_of_the_op_layer_or_the_ops():
    graph = import_graph()
    for m, deps in graph.items():
        if m.startswith("cupy_ops.kernel"):
            assert not {d for d in deps if d.startswith(("cupy_ops.op", "cupy_ops.models"))}, (m, deps)


def test_no_module_imports_another_modules_private_names():
    """A name with a leading underscore stays in its module: what another module needs is public."""
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                assert not private, (path, node.module, private)


def test_matmul_and_linear_relu_div_share_the_one_plan():
    """Both run through the GEMM families' one registry (linear_relu_div's backward is built of
    matmul, the only reason it imports it)."""
    graph = import_graph()
    mm, lin = graph["cupy_ops.ops.matmul"], graph["cupy_ops.ops.linear_relu_div"]
    assert "cupy_ops.ops.linear_relu_div" not in mm
    assert "cupy_ops.ops.gemm" in mm and "cupy_ops.ops.gemm" in lin


def test_every_builtin_op_is_declared_on_the_op_layer_and_nothing_else_registers_ops():
    """One declaration per op: the ops modules import the op layer, and no module outside it
    calls torch.library itself."""
    graph = import_graph()
    for name in ("relu", "relu_div", "relu_backward", "matmul", "linear_relu_div"):
        assert "cupy_ops.op" in graph[f"cupy_ops.ops.{name}"], name
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name != "op":
            assert "torch.library" not in path.read_text(), path


def test_generated_wgmma_header_is_what_its_generator_writes():
    spec = importlib.util.spec_from_file_location("gen_wgmma", ROOT / "tools" / "gen_wgmma.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (ROOT / "cuda_src" / "wgmma_ops.cuh").read_text() == gen.render(), (
        "cuda_src/wgmma_ops.cuh is stale: run python tools/gen_wgmma.py"
    )
