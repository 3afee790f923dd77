"""Every registered kernel variant compiles with NVRTC for sm_80 and sm_90 with no GPU, with
the run-time options, and the source assembly the run-time path uses is what gets compiled."""
import subprocess
import sys

import pytest

import cupy_ops.ops  # noqa: F401  (importing the ops declares their kernels)
from cupy_ops import compiler

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")

SOURCES = {s.name: s for s in compiler.sources()}
EXPECTED_SOURCES = {"relu.cu", "relu_div.cu", "relu_backward.cu", "gemm.cu", "gemm_sm90a.cu", "transpose.cu"}
SM90A_SOURCES = {"gemm_sm90a.cu"}   # wgmma + TMA: Hopper only


def test_every_op_registers_its_kernels():
    assert set(SOURCES) == EXPECTED_SOURCES
    for src in SOURCES.values():
        assert len(src.variants) >= 4, src  # float, f16, bf16, double (or layout variants)
    assert {n for n, s in SOURCES.items() if s.arch} == SM90A_SOURCES


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(EXPECTED_SOURCES))
def test_offline_compile(name, arch):
    src = SOURCES[name]
    results = compiler.compile_offline(src, arch)
    assert [r.expr for r in results] == list(src.variants)
    if name in SM90A_SOURCES and arch == "sm_80":
        assert all(r.skipped == "built for sm_90a only" for r in results)
        return
    for r in results:
        assert r.ok, r.log
        assert r.arch == ("sm_90a" if name in SM90A_SOURCES else arch)
        # ptxas warns when it must serialize wgmma (accumulators not kept in registers): slow
        assert "wgmma.mma_async instructions are serialized" not in r.log, r.log
        assert r.registers is not None and 0 < r.registers <= 255
        assert r.spill_stores == 0 and r.spill_loads == 0, f"{r.expr} spills on {arch}"


def test_offline_compile_reports_errors_with_the_log():
    src = compiler.user("template <class T> __global__ void k(T* p) { p[0] = undeclared; }\n", "broken.cu")
    src.variant("k<float>")
    [r] = compiler.compile_offline(src, "sm_90")
    assert not r.ok
    assert "undeclared" in r.log


def test_a_kernel_without_its_geometry_defines_does_not_compile():
    # the geometry a kernel shares with its launcher comes only from the host: a source
    # compiled without it stops with the #error naming what is missing
    bare = compiler.Source("relu.cu", None, (), None)   # (not registered: the registry stays as the ops left it)
    [r] = compiler.compile_offline(bare, "sm_90", ["relu<float>"])
    assert not r.ok and "EW_VECS_PER_THREAD" in r.log


def test_assemble_inlines_headers_once(tmp_path):
    (tmp_path / "a.cuh").write_text('#pragma once\nint a_marker;\n')
    (tmp_path / "b.cuh").write_text('#pragma once\n#include "a.cuh"\nint b_marker;\n')
    (tmp_path / "k.cu").write_text('#include "a.cuh"\n#include "b.cuh"\nint k_marker;\n')
    src = compiler.assemble("k.cu", tmp_path)
    assert src.count("int a_marker;") == 1 and "int b_marker;" in src and "int k_marker;" in src
    assert "#include" not in src  # nothing left for NVRTC (or the cache key) to miss


def test_editing_a_header_changes_the_compiled_source(tmp_path):
    (tmp_path / "h.cuh").write_text("#define VALUE 1\n")
    (tmp_path / "k.cu").write_text('#include "h.cuh"\n')
    before = compiler.assemble("k.cu", tmp_path)
    (tmp_path / "h.cuh").write_text("#define VALUE 2\n")
    assert compiler.assemble("k.cu", tmp_path) != before


def test_missing_include_names_the_includer(tmp_path):
    (tmp_path / "k.cu").write_text('#include "nope.cuh"\n')
    with pytest.raises(FileNotFoundError, match=r"nope.cuh not found \(included from k.cu"):
        compiler.assemble("k.cu", tmp_path)


def test_cli_lists_every_variant_with_registers():
    proc = subprocess.run([sys.executable, "-m", "cupy_ops", "compile", "--arch", "sm_90"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    for src in SOURCES.values():
        for expr in src.variants:
            line = next(l for l in proc.stdout.splitlines() if f" {expr} " in l)
            assert (" sm_90a " if src.arch else " sm_90 ") in line and " ok " in line
    n = sum(len(s.variants) for s in SOURCES.values())
    assert f"{n} of {n} kernel variants compiled" in proc.stdout


def test_cli_rejects_a_bad_arch():
    proc = subprocess.run([sys.executable, "-m", "cupy_ops", "compile", "--arch", "90"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--arch must look like sm_80" in proc.stderr


def test_cubin_fallback_when_nvrtc_gives_no_ptxas_report(monkeypatch):
    # NVRTC 13.0 on the GPU machine sometimes returns an empty program log: registers and the
    # stack frame (0 bytes proves no spills) then come from the cubin, and must agree.
    from cupy_ops.compiler import offline

    src = SOURCES["relu_div.cu"]
    with_log = compiler.compile_offline(src, "sm_90")
    monkeypatch.setattr(offline, "_parse_ptxas", lambda source, arch, log, lowered: [
        compiler.OfflineResult(source, e, arch, False, log="no ptxas report") for e in lowered.values()])
    from_cubin = compiler.compile_offline(src, "sm_90")
    for a, b in zip(with_log, from_cubin):
        assert b.ok and (b.registers, b.spill_stores, b.stack_bytes) == (a.registers, 0, 0)
