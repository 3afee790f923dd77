"""GEMM epilogues on the CPU: a user's declaration and its errors, the packed kernel argument,
every GEMM kernel template compiled with a user epilogue (and its gradient) by NVRTC, and
``python -m cupy_ops compile FILE.py``."""

import re
import struct

import pytest

import cupy_ops
from cupy_ops.__main__ import main
from cupy_ops.launch import EPI_ARGS_BYTES, EPI_PTRS, EPI_SCALARS
from cupy_ops.ops import gemm
from cupy_ops.ops.gemm import epilogues


def need_nvrtc():
    return pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")


MIXED = dict(
    code="""__device__ acc_t twice(acc_t x) { return x + x; }
            __device__ acc_t apply(acc_t v, const acc_t s, acc_t res, acc_t col, acc_t row) {
              return round_out(twice(v) * s) + col + row * res; }""",
    columns=("col",),
    rows=("row",),
    tensors=("res",),
    scalars=("s",),
    derivative="__device__ acc_t grad(acc_t v, acc_t s, acc_t res, acc_t col, acc_t row) { return 2 * s; }",
    name="mixed",
)


def test_a_declaration_reads_apply_by_name_and_is_interned():
    e = cupy_ops.epilogue(**MIXED)
    assert e.order == ("s", "res", "col", "row")  # apply's order; the slots: columns, rows, tensors
    assert e.pointers == ("col", "row", "res") and e.scalars == ("s",)
    assert cupy_ops.epilogue(**MIXED) is e
    other = cupy_ops.epilogue(**{**MIXED, "code": MIXED["code"].replace("x + x", "2 * x")})
    assert other.tag != e.tag and other.tag.startswith("EpiUser_mixed_")
    assert epilogues.known(e.tag) and epilogues.known(e.grad_tag) and epilogues.known("EpiNone")
    assert not epilogues.known("EpiUser_nothing_0")


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"code": "__device__ acc_t apply(acc_t v, acc_t k) { return v * k; }"}, ValueError, "k not declared"),
        ({"code": "__device__ acc_t apply(acc_t v) { return v; }", "scalars": ("k",)}, ValueError, "declared"),
        ({"code": "__device__ acc_t f(acc_t v) { return v; }"}, ValueError, "no apply"),
        (
            {"code": "__device__ acc_t apply(acc_t v, acc_t k, acc_t k) { return v; }", "scalars": "k"},
            ValueError,
            "by name",
        ),
        ({"code": "__device__ acc_t apply(acc_t v, acc_t bias) { return v; }", "columns": "bias"}, ValueError, "taken"),
        ({"code": "x", "columns": ("a b",)}, ValueError, "identifiers"),
        (
            {"code": "__device__ acc_t apply(acc_t v, acc_t k) { return v; }", "scalars": "k", "rows": "k"},
            ValueError,
            "twice",
        ),
        ({"code": 3}, TypeError, "code must be CUDA C"),
        ({"code": "  "}, ValueError, "code is empty"),
        ({"code": "__device__ acc_t apply(acc_t v, acc_t b) { return v; }", "columns": "b"}, ValueError, "taken"),
        (
            {"code": "__device__ acc_t apply(acc_t v, acc_t epilogue) { return v; }", "scalars": "epilogue"},
            ValueError,
            "taken",
        ),
        (
            {
                "code": "__device__ acc_t apply(acc_t v, acc_t r, acc_t r_ld) { return v; }",
                "tensors": "r",
                "scalars": "r_ld",
            },
            ValueError,
            "r_ld are taken",
        ),
        (
            {"code": "__device__ acc_t apply(acc_t v, acc_t lambda) { return v; }", "scalars": "lambda"},
            ValueError,
            "keyword",
        ),
        ({"code": "__device__ acc_t apply(acc_t v) { return v; }", "name": "caf\u00e9"}, ValueError, "identifier"),
        ({"code": "__device__ acc_t apply(acc_t v) { return v; }", "name": "a-b"}, ValueError, "identifier"),
        (
            {
                "code": "__device__ acc_t apply(acc_t v, acc_t k) { return v; }",
                "scalars": "k",
                "derivative": "__device__ acc_t grad(acc_t v) { return 1; }",
            },
            ValueError,
            "apply's parameters",
        ),
    ],
)
def test_declaration_errors_say_what_is_wrong(kwargs, error, match):
    with pytest.raises(error, match=match):
        cupy_ops.epilogue(**kwargs)


def test_too_many_tensors_or_scalars():
    names = [f"t{i}" for i in range(EPI_PTRS - 1)]
    code = f"__device__ acc_t apply(acc_t v, {', '.join('acc_t ' + n for n in names)}) {{ return v; }}"
    with pytest.raises(ValueError, match="at most 6 tensors"):
        cupy_ops.epilogue(code, columns=names)
    names = [f"s{i}" for i in range(EPI_SCALARS + 1)]
    code = f"__device__ acc_t apply(acc_t v, {', '.join('acc_t ' + n for n in names)}) {{ return v; }}"
    with pytest.raises(ValueError, match="at most 8 scalars"):
        cupy_ops.epilogue(code, scalars=names)


def test_the_packed_argument_is_the_structs_layout():
    bias, scale, packed = epilogues.args(7, (11, 12), (0, 5), (0.5, -0.0), 3, 4)
    assert (bias, scale) == (7, 0.5)
    assert len(packed) == EPI_ARGS_BYTES
    fields = struct.unpack(f"<{EPI_PTRS}Q{EPI_PTRS}q{EPI_SCALARS}d2q", packed)
    assert fields[:3] == (7, 11, 12) and fields[EPI_PTRS : EPI_PTRS + 3] == (0, 0, 5)
    assert fields[2 * EPI_PTRS : 2 * EPI_PTRS + 2] == (0.5, -0.0) and fields[-2:] == (3, 4)
    # a zero scale's sign is in the bytes, so the launchers' caches keep +0.0 and -0.0 apart
    assert epilogues.builtin_args(0, 0.0) != epilogues.builtin_args(0, -0.0)


def test_a_user_epilogue_compiles_into_every_gemm_kernel_template():
    need_nvrtc()
    e = cupy_ops.epilogue(**MIXED)
    kernels = gemm.planner.epilogue_kernels(e)
    names = {k.name for k in kernels}
    assert {"gemm_naive", "gemm_simt", "gemm_tc", "gemm_wgmma", "gemm_wgmma_swap", "gemm_tf32x3"} <= names
    assert {"gemm_fp16x3", "gemm_splitk_reduce", "gemm_wgmma_ksplit", "gemm_wgmma_single"} <= names
    for arch in ("sm_80", "sm_90"):
        results = [r for k in kernels for r in k.compile_offline(arch)]
        assert all(r.ok for r in results), [r.log for r in results if not r.ok]
        ran = [r for r in results if not r.skipped]
        assert {e.tag in r.expr for r in ran} == {True} and any(r.expr.endswith("_grad>") for r in ran)


def test_columns_of_any_name_compile_into_the_hopper_kernels():
    """Columns are read with the bias ahead of the store (gemm_epilogue.cuh Cols) under names of
    the generated code's own: a user's column named ``c`` or ``s``, two of them with a row,
    compile into every Hopper kernel template (``c`` once clashed with a local)."""
    need_nvrtc()
    e = cupy_ops.epilogue(
        "__device__ acc_t apply(acc_t v, acc_t c, acc_t s, acc_t r) { return round_out(v + c) * s + r; }",
        columns=("c", "s"),
        rows=("r",),
        name="two_columns",
    )
    kernels = [
        k for k in gemm.planner.epilogue_kernels(e) if k.name.startswith(("gemm_wgmma", "gemm_fp16x3", "gemm_tf32x3"))
    ]
    assert kernels
    results = [r for k in kernels for r in k.compile_offline("sm_90")]
    assert all(r.ok for r in results), [r.log for r in results if not r.ok]
    assert "Cols<Acc, 3>" in e.cuda() and "(m >= M || n >= N)" in e.cuda()  # rows: apply's own bound
    alone = cupy_ops.epilogue("__device__ acc_t apply(acc_t v, acc_t c) { return v + c; }", columns=("c",), name="col")
    assert "(m >= M || n >= N)" not in alone.cuda()  # columns alone: read ahead, no bound
    many = cupy_ops.epilogue(
        "__device__ acc_t apply(acc_t v, acc_t c, acc_t d, acc_t e) { return v + c + d + e; }",
        columns=("c", "d", "e"),
        name="three_columns",
    )
    text = many.cuda()  # the first AHEAD_COLUMNS ahead; apply reads the others itself, bounded
    assert epilogues.AHEAD_COLUMNS == 2 and f"Cols<Acc, {1 + epilogues.AHEAD_COLUMNS}>" in text
    assert "(m >= M || n >= N)" in text and "to_acc<T>(e[n])" in text and "cols.v[2]" in text
    results = [
        r for k in gemm.planner.epilogue_kernels(many) if k.name == "gemm_wgmma" for r in k.compile_offline("sm_90")
    ]
    assert results and all(r.ok for r in results), [r.log for r in results if not r.ok]


def test_compile_a_file_of_epilogues(tmp_path, capsys):
    need_nvrtc()
    good = tmp_path / "good.py"
    good.write_text(
        "import cupy_ops\nE = cupy_ops.epilogue('__device__ acc_t apply(acc_t v) { return v * v; }', name='square')\n"
    )
    assert main(["compile", str(good), "--arch", "sm_80"]) == 0
    out = capsys.readouterr().out
    assert "epilogue square" in out and re.search(r"gemm_simt<.*sm_80\s+ok\s+regs\s+\d+\s+spill st/ld \d+/\d+", out)
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import cupy_ops\nE = cupy_ops.epilogue('__device__ acc_t apply(acc_t v) { return v * w; }', name='broken')\n"
    )
    assert main(["compile", str(bad), "--arch", "sm_80"]) == 1
    err = capsys.readouterr().err
    assert "<epilogue broken>" in err and '"w" is undefined' in err
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(SystemExit, match=r"declares no cupy_ops\.epilogue"):
        main(["compile", str(empty)])
