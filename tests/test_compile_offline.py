"""Every kernel variant compiles with NVRTC for sm_80 and sm_90 with no GPU, and the
source assembly the run-time path uses is what gets compiled."""
import subprocess
import sys

import pytest

from cupy_ops import compiler

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")

SPECS = compiler.registered()
EXPECTED_SOURCES = {"relu.cu", "relu_div.cu", "matmul.cu", "linear_relu_div.cu", "relu_backward.cu",
                    "matmul_sm90a.cu", "linear_relu_div_sm90a.cu", "transpose.cu"}
SM90A_SOURCES = {"matmul_sm90a.cu", "linear_relu_div_sm90a.cu"}   # wgmma + TMA: Hopper only


def test_every_op_registers_its_kernels():
    assert EXPECTED_SOURCES <= set(SPECS)
    for spec in SPECS.values():
        assert len(spec.name_expressions) >= 3, spec  # float, f16, bf16 (+ double, or layout variants)
    assert {f for f, s in SPECS.items() if s.arch} == SM90A_SOURCES


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("filename", sorted(EXPECTED_SOURCES))
def test_offline_compile(filename, arch):
    spec = SPECS[filename]
    results = compiler.compile_offline(filename, spec.name_expressions, arch)
    assert [r.expr for r in results] == list(spec.name_expressions)
    if filename in SM90A_SOURCES and arch == "sm_80":
        assert all(r.skipped == "built for sm_90a only" for r in results)
        return
    for r in results:
        assert r.ok, r.log
        assert r.arch == ("sm_90a" if filename in SM90A_SOURCES else arch)
        # ptxas warns when it must serialize wgmma (accumulators not kept in registers): slow
        assert "wgmma.mma_async instructions are serialized" not in r.log, r.log
        assert r.registers is not None and 0 < r.registers <= 255
        assert r.spill_stores == 0 and r.spill_loads == 0, f"{r.expr} spills on {arch}"


def test_offline_compile_reports_errors_with_the_log(tmp_path, monkeypatch):
    (tmp_path / "broken.cu").write_text("template <class T> __global__ void k(T* p) { p[0] = undeclared; }\n")
    monkeypatch.setattr(compiler, "source_dir", lambda: tmp_path)
    [r] = compiler.compile_offline("broken.cu", ["k<float>"], "sm_90")
    assert not r.ok
    assert "undeclared" in r.log


def test_assemble_inlines_headers_once(tmp_path):
    (tmp_path / "a.cuh").write_text('#pragma once\nint a_marker;\n')
    (tmp_path / "b.cuh").write_text('#pragma once\n#include "a.cuh"\nint b_marker;\n')
    (tmp_path / "k.cu").write_text('#include "a.cuh"\n#include "b.cuh"\nint k_marker;\n')
    src = compiler.assemble("k.cu", tmp_path)
    assert src.count("int a_marker;") == 1 and "int b_marker;" in src and "int k_marker;" in src
    assert "#include" not in src  # nothing left for NVRTC (or CuPy's cache key) to miss


def test_editing_a_header_changes_the_compiled_source(tmp_path):
    # CuPy's disk-cache key hashes the source string only: header edits must show up in it.
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
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    for spec in SPECS.values():
        for expr in spec.name_expressions:
            line = next(l for l in proc.stdout.splitlines() if f" {expr} " in l)
            assert (" sm_90a " if spec.arch else " sm_90 ") in line and " ok " in line
    n = sum(len(s.name_expressions) for s in SPECS.values())
    assert f"{n} of {n} kernel variants compiled" in proc.stdout


def test_cli_rejects_a_bad_arch():
    proc = subprocess.run([sys.executable, "-m", "cupy_ops", "compile", "--arch", "90"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--arch must look like sm_80" in proc.stderr


def test_cubin_fallback_when_nvrtc_gives_no_ptxas_report(monkeypatch):
    # NVRTC 13.0 on the GPU machine sometimes returns an empty program log: registers and the
    # stack frame (0 bytes proves no spills) then come from the cubin, and must agree.
    spec = SPECS["relu_div.cu"]
    with_log = compiler.compile_offline("relu_div.cu", spec.name_expressions, "sm_90")
    monkeypatch.setattr(compiler, "_parse_ptxas", lambda filename, arch, log, lowered: [
        compiler.OfflineResult(filename, e, arch, False, log="no ptxas report") for e in lowered.values()])
    from_cubin = compiler.compile_offline("relu_div.cu", spec.name_expressions, "sm_90")
    for a, b in zip(with_log, from_cubin):
        assert b.ok and (b.registers, b.spill_stores, b.stack_bytes) == (a.registers, 0, 0)
