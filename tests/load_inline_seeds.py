"""The five load_inline seeds (KernelBench answers built with
torch.utils.cpp_extension.load_inline): where they are, the problem each solves and the kernels of
each cuda_sources string, read back from the answers' Python blocks."""

import ast
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


# Each seed by the stem of its file: the KernelBench problem its Model solves, and the kernels of
# each load_inline string it holds, in order.
SEEDS = {
    "000_f0d3d03df6cd223f": ("linear_relu_div", [["matmul_kernel"], ["relu_kernel"]]),
    "001_e8fa08c1b05a22b2": ("linear_relu_div", [["fused_relu_divide_kernel"]]),
    "002_33881b1cd539c7b6": ("relu", [["vectorized_relu"]]),
    "003_1315c655e34380e2": ("relu", [["relu_kernel"]]),
    "004_ec1d1e94c2ab0a0c": ("relu", [["vectorized_relu_kernel"], ["vectorized_relu_kernel"]]),
}


def seeds_dir() -> Path:
    """The folder of seed files, or a skip naming where the tests looked."""
    env = os.environ.get("CUPY_OPS_SEEDS")
    looked = [Path(env)] if env else [REPO.parent / "shared" / "seeds", REPO / ".seeds"]
    for folder in looked:
        if folder.is_dir():
            return folder
    where = "$CUPY_OPS_SEEDS" if env else "neither"
    pytest.skip(f"no seed folder: {where} {' nor '.join(str(f) for f in looked)} exists")


def seed_sources(stem: str) -> list[str]:
    """The ``cuda_sources`` strings a seed passes to ``load_inline``, each once, in order: read
    from the Python blocks of the answer (a name is looked up in the block's assignments)."""
    path = seeds_dir() / f"{stem}.txt"
    if not path.is_file():
        pytest.skip(f"seed {path} not found")
    found = []
    for block in re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
        try:
            tree = ast.parse(block)
        except SyntaxError:
            continue
        strings = {
            t.id: node.value.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(tree):
            func = getattr(node, "func", None)
            if not isinstance(node, ast.Call) or getattr(func, "id", getattr(func, "attr", None)) != "load_inline":
                continue
            for kw in node.keywords:
                if kw.arg == "cuda_sources":
                    v = kw.value
                    text = v.value if isinstance(v, ast.Constant) else strings.get(getattr(v, "id", None))
                    if isinstance(text, str) and text not in found:
                        found.append(text)
    assert found, f"{path}: no load_inline(cuda_sources=...) found"
    return found
