"""cupy_ops.Kernel's compile options, defines, template instantiations and export, on the CPU:
NVRTC options are checked when the kernel is declared, reach every compile (run-time and
offline alike) and key the compile cache; `name` may be a name expression of any template,
`specialize` gives others; `ptx` / `cubin` compile without a GPU."""

import re
import struct

import pytest
import torch

import cupy_ops
from cupy_ops import compiler
from cupy_ops.compiler import build
from cupy_ops.compiler import options as nvrtc_options


def need_nvrtc():
    return pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    return tmp_path / "cupy_ops"


AXPY = r"""
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""
VALUE = r"""
__global__ void fill(float* y) { y[threadIdx.x] = VALUE; }
"""


# --- options: checked up front ------------------------------------------------------------


@pytest.mark.parametrize(
    "option, message",
    [
        (
            "-arch=sm_90",
            r"option '-arch=sm_90' cannot be used with cupy_ops.Kernel: the target is the device's own, or "
            r"the one the kernel fixes with arch=",
        ),
        ("--gpu-architecture=compute_90", r"Kernel\(\.\.\., arch=\"sm_90a\"\)"),
        ("-rdc=true", "relocatable code that needs one"),
        ("--device-c", "relocatable code"),
        ("-dlto", "LTO IR, which does not load"),
        ("--optix-ir", "OptiX IR"),
        ("-fdevice-syntax-only", "no code at all"),
        ("-include=cuda_fp16.h", "#include the header at the top of the source instead"),
        ("--use-pch=x.pch", "NVRTC goes on using a precompiled header after a header in it is edited"),
        ("--use-fast-math", r"option '--use-fast-math' is not an NVRTC option \(did you mean --use_fast_math\?\)"),
        ("-gencode", r"option '-gencode' is nvcc's, not NVRTC's: the target is the device's own"),
        ("--expt-relaxed-constexpr", r"nvcc's, not NVRTC's: NVRTC has no such option; -default-device"),
        ("--extended-lambda", r"nvcc's, not NVRTC's: NVRTC has no such option"),
        ("-maxrregcount", r"option '-maxrregcount' needs its value \(e.g. -maxrregcount=64\)"),
        ("-D", r"option '-D' needs its value \(e.g. -DNAME=1\)"),
        ("-maxrregcount=lots", "-maxrregcount takes a non-negative integer, got 'lots'"),
        ("-ftz=1", "-ftz takes true or false, got '1'"),
        ("-lineinfo=true", "-lineinfo takes no value"),
        ("-D3X=1", "'3X' is not a macro name"),
    ],
)
def test_options_that_cannot_work_are_refused_naming_them(option, message):
    with pytest.raises(ValueError, match=message):
        cupy_ops.Kernel(AXPY, "axpy", options=[option])


@pytest.mark.parametrize(
    "given, checked",
    [
        (["-D", "BLOCK=256"], ("-DBLOCK=256",)),
        (["-U", "X", "-I", "/tmp"], ("-UX", "-I/tmp")),
        (["-Xptxas", "-v", "-maxrregcount", "32"], ("-Xptxas=-v", "-maxrregcount=32")),
        ("-O3 --use_fast_math -D X=1", ("--use_fast_math", "-DX=1")),
        (["-O0", "-O", "-Os", "-lineinfo", "-Xcompiler", "-fopenmp", "-Xcompiler=-Wall"], ("-lineinfo",)),
        (["-ftz", "false"], ("-ftz=false",)),
        (["-O", "3", "-Xptxas", "-O3"], ("-Xptxas=-O3",)),  # ptxas's -O3 is no host option
        (["-O3 --use_fast_math", "-DX=1"], ("--use_fast_math", "-DX=1")),  # as torch joins extra_cuda_cflags
    ],
)
def test_options_as_nvcc_and_nvrtc_take_them(given, checked):
    # a value as the next entry (NVRTC takes that form); nvcc's host-compiler options dropped:
    # -O sets the host compiler's level (nvcc optimizes device code at -O3 whatever it says)
    assert nvrtc_options.check(given) == checked


def test_options_are_a_list_or_one_string():
    k = cupy_ops.Kernel(AXPY, "axpy", options="-lineinfo --use_fast_math")
    assert k.variant(None).source.flags == ("-lineinfo", "--use_fast_math")
    with pytest.raises(TypeError, match="options must be a list of NVRTC option strings"):
        cupy_ops.Kernel(AXPY, "axpy", options=3)
    with pytest.raises(TypeError, match="each NVRTC option must be a str"):
        cupy_ops.Kernel(AXPY, "axpy", options=["-G", None])


def _accepted():
    """One spelling with a valid value of every option the table lets through."""
    values = {
        "--dopt": "on",
        "--ptxas-options": "-v",
        "--maxrregcount": "64",
        "--jump-table-density": "50",
        "--split-compile": "1",
        "--Ofast-compile": "min",
        "--frandom-seed": "7",
        "--define-macro": "X=1",
        "--undefine-macro": "X",
        "--include-path": "/tmp",
        "--std": "c++17",
        "--optimization-info": "inline",
        "--diag-error": "20",
        "--diag-suppress": "20",
        "--diag-warn": "20",
        "--warning-as-error": "all-warnings",
        "--fmax-errors": "20",
    }
    out = []
    for spelling, (long, kind) in sorted(nvrtc_options._OPTIONS.items()):
        if long in nvrtc_options._REFUSED or long in ("--time", "--fdevice-time-trace") or spelling != long:
            continue
        value = values.get(long, kind[0] if isinstance(kind, tuple) else None)
        out.append(f"{spelling}={value}" if kind is not None else spelling)
    return out


@pytest.mark.parametrize("option", _accepted())
def test_every_option_let_through_is_one_nvrtc_has(option):
    need_nvrtc()
    checked = compiler.check_options([option])
    # NVRTC takes --device-float128 for sm_100 on only
    arch = "sm_100" if "float128" in option and 100 in compiler.nvrtc.binding().getSupportedArchs() else "sm_80"
    r = compiler.nvrtc.compile(AXPY, "axpy.cu", ["axpy"], [f"-arch={arch}", *checked])
    if "unrecognized option" in r.log:
        # only an NVRTC known to predate the option may lack it
        assert not nvrtc_options.available(nvrtc_options.canonical(option), compiler.nvrtc.version()), r.log
        return
    assert r.ok and "unrecognized option" not in r.log and "expects" not in r.log, r.log


def test_an_option_is_available_after_the_last_nvrtc_known_to_lack_it():
    assert not nvrtc_options.available("--no-cache", (12, 1))
    assert nvrtc_options.available("--no-cache", (12, 2)) and nvrtc_options.available("--no-cache", (13, 0))
    assert not nvrtc_options.available("--fmax-errors", (13, 0)) and nvrtc_options.available("--fmax-errors", (13, 5))
    assert nvrtc_options.available("--ftz", (11, 0))  # no NVRTC lacks it


def test_a_users_std_or_ftz_replaces_the_default_one():
    need_nvrtc()
    k = cupy_ops.Kernel(AXPY, "axpy", options=["-std=c++20", "--ftz=false"])
    opts = k.variant(None).source.options("sm_90")
    assert "-std=c++17" not in opts and "-ftz=true" not in opts and opts[1:3] == ("-std=c++20", "--ftz=false")
    opts = cupy_ops.Kernel(AXPY, "axpy").variant(None).source.options("sm_90")
    assert opts[:2] == ("-std=c++17", "-arch=sm_90")  # nvcc's -ftz=false, NVRTC's default
    assert all(o.startswith("-I") for o in opts[2:])  # the include folders, CUDA's headers last


def test_an_include_path_option_is_an_include_folder(tmp_path):
    need_nvrtc()
    (tmp_path / "value.cuh").write_text("#define VALUE 7.f\n")
    k = cupy_ops.Kernel("#include <value.cuh>\n" + VALUE, "fill", options=[f"-I{tmp_path}", "-lineinfo"])
    src = k.variant(None).source
    assert src.flags == ("-lineinfo",) and src.search[0] == tmp_path
    assert [r.ok for r in k.compile_offline("sm_90")] == [True]


# --- options and defines reach every compile and key the cache -----------------------------


def test_defines_become_d_options_checked():
    k = cupy_ops.Kernel(VALUE, "fill", defines={"VALUE": 2.5, "FLAG": None, "N": 4, "NAME": "x"})
    assert k.variant(None).source.options("sm_90")[2:6] == ("-DFLAG", "-DN=4", "-DNAME=x", "-DVALUE=2.5")
    with pytest.raises(TypeError, match=r"defines\['B'\] must be an int, a float, a str or None, got bool"):
        cupy_ops.Kernel(VALUE, "fill", defines={"B": True})
    with pytest.raises(ValueError, match=r"defines: '2x' is not a macro name"):
        cupy_ops.Kernel(VALUE, "fill", defines={"2x": 1})
    with pytest.raises(ValueError, match=r"defines\['V'\] must be finite"):
        cupy_ops.Kernel(VALUE, "fill", defines={"V": float("nan")})
    with pytest.raises(TypeError, match="defines must be a dict"):
        cupy_ops.Kernel(VALUE, "fill", defines=["VALUE=1"])


def test_options_reach_the_offline_and_the_run_time_compile(cache_dir):
    need_nvrtc()
    plain = cupy_ops.Kernel(AXPY, "axpy")
    capped = cupy_ops.Kernel(AXPY, "axpy", options=["-maxrregcount=16", "-lineinfo"])
    [r] = capped.compile_offline("sm_90")
    assert r.ok and r.registers <= 16
    # the run-time path: compiler.binary, which a launch calls, compiles with the same options
    ptx = compiler.binary(capped.variant(None), "compute_90").image.decode()
    assert ".loc" in ptx and ".loc" not in compiler.binary(plain.variant(None), "compute_90").image.decode()
    # so does export
    assert ".loc" in capped.ptx("sm_90") and ".loc" not in plain.ptx("sm_90")


def test_an_edited_option_or_define_compiles_anew_and_an_unchanged_one_does_not(cache_dir, monkeypatch):
    need_nvrtc()
    a = cupy_ops.Kernel(VALUE, "fill", defines={"VALUE": 1})
    b = cupy_ops.Kernel(VALUE, "fill", defines={"VALUE": 2})
    c = cupy_ops.Kernel(VALUE, "fill", defines={"VALUE": 1}, options=["--use_fast_math"])
    assert len({a.variant(None), b.variant(None), c.variant(None)}) == 3
    keys = {compiler.binary(k.variant(None), "sm_90").key for k in (a, b, c)}
    assert len(keys) == 3 and len(list(cache_dir.glob("*.bin"))) == 3
    assert "1.0f" not in compiler.binary(b.variant(None), "compute_90").image.decode()
    monkeypatch.setattr(build, "_binaries", {})  # as a new process: only the disk cache
    monkeypatch.setattr(compiler.nvrtc, "compile", lambda *args: pytest.fail("compiled although cached"))
    again = cupy_ops.Kernel(VALUE, "fill", defines={"VALUE": 1}, options=["--use_fast_math"])
    assert compiler.binary(again.variant(None), "sm_90").cached


def test_a_define_changes_the_code():
    need_nvrtc()
    ptx = cupy_ops.Kernel(VALUE, "fill", defines={"VALUE": "7.0f"}).ptx("sm_80")
    assert f"mov.u32 \t%r2, {struct.unpack('<I', struct.pack('<f', 7.0))[0]};" in ptx  # 7.0f's bits, stored


# --- name expressions and specialize ------------------------------------------------------

TILED = r"""
template <class T, int N, bool SQUARE = false>
__global__ void __launch_bounds__(N * 32) tiled(const T* __restrict__ x, T* y, T alpha, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = (SQUARE ? x[i] * x[i] : x[i]) * alpha * T(N);
}
"""


def test_a_name_expression_names_one_instantiation():
    k = cupy_ops.Kernel(TILED, "tiled<float, 4>")
    assert k.expressions == ["tiled<float, 4>"]
    assert k.params == [
        ("ptr", "x", "const float* __restrict__"),
        ("ptr", "y", "float*"),
        ("f32", "alpha", "float"),
        ("i32", "n", "int"),
    ]
    d = k.specialize(torch.float64, 8, True)
    assert d.expressions == ["tiled<double, 8, true>"] and d.params[2] == ("f64", "alpha", "double")
    h = k.specialize(torch.int32, 2)
    assert h.expressions == ["tiled<int, 2>"] and h.variant(None).source is k.variant(None).source
    assert h.params[2] == ("i32", "alpha", "int")
    # a 16-bit float scalar takes a Python number, converted as torch converts it
    assert k.specialize(torch.float16, 2).params[2] == ("f16", "alpha", "f16")
    with pytest.raises(
        ValueError,
        match=r"parameter 'alpha' of kernel tiled<float2, 2> has type 'float2', which "
        r"cannot be passed from Python",
    ):
        k.specialize("float2", 2)  # a struct has no Python value to pass
    need_nvrtc()
    for kern in (k, d):
        [r] = kern.compile_offline("sm_90")
        assert r.ok, r.log


def test_a_template_of_other_parameters_needs_an_instantiation():
    with pytest.raises(
        ValueError,
        match=r"kernel tiled is template <class T, int N, bool SQUARE = false>: name one "
        r"instantiation, e\.g\. Kernel\(source, \"tiled<\.\.\.>\"\)",
    ):
        cupy_ops.Kernel(TILED, "tiled")
    with pytest.raises(ValueError, match=r"it takes 2 to 3 template arguments, got 1 in 'tiled<float>'"):
        cupy_ops.Kernel(TILED, "tiled<float>")
    with pytest.raises(ValueError, match="kernel axpy is not a template, but 'axpy<float>' gives template arguments"):
        cupy_ops.Kernel(AXPY, "axpy<float>")
    with pytest.raises(TypeError, match="kernel axpy is not a template"):
        cupy_ops.Kernel(AXPY, "axpy").specialize(torch.float32)
    with pytest.raises(TypeError, match="a template argument must be a torch dtype, a bool, an int or C text"):
        cupy_ops.Kernel(TILED, "tiled<float, 4>").specialize(torch.float32, 4.0)
    with pytest.raises(ValueError, match="it takes 2 to 3 template arguments, got 4"):
        cupy_ops.Kernel(TILED, "tiled<float, 4>").specialize("float", 4, True, 1)


def test_a_per_dtype_template_keeps_its_behaviour_and_can_be_fixed_to_one():
    scale = cupy_ops.Kernel(
        "template <class T> __global__ void scale(const T* x, T* y, float s, long long n) "
        "{ if (threadIdx.x < n) y[0] = x[0]; }",
        "scale",
    )
    assert scale.expressions == ["scale<float>", "scale<f16>", "scale<bf16>", "scale<double>"]
    assert scale.variant(torch.float16).expr == "scale<f16>"
    half = scale.specialize(torch.float16)
    assert half.expressions == ["scale<f16>"] and half.params[0] == ("ptr", "x", "const f16*")
    assert half.variant(None) is scale.variant(torch.float16)  # the same variant: compiled once


# --- export -------------------------------------------------------------------------------


def test_ptx_and_cubin_export_without_a_gpu():
    need_nvrtc()
    k = cupy_ops.Kernel(TILED, "tiled<float, 4>", options=["-lineinfo"])
    ptx = k.ptx("sm_90")
    e = k.export("sm_90", "cubin")
    [symbol] = e.lowered.values()
    assert isinstance(ptx, str) and re.search(rf"\.entry {re.escape(symbol)}\(", ptx) and ".target sm_90" in ptx
    assert isinstance(e.image, bytes) and e.image[:4] == b"\x7fELF" and symbol.encode() in e.image
    assert k.cubin("sm_80")[:4] == b"\x7fELF" and e.arch == "sm_90"
    assert ".target sm_80" in k.ptx("compute_80")
    scale = cupy_ops.Kernel("template <class T> __global__ void scale(T* y) { y[0] = T(); }", "scale")
    assert scale.ptx("sm_90").count(".entry ") == 4 and scale.ptx("sm_90", torch.float64).count(".entry ") == 1
    with pytest.raises(ValueError, match="a cubin is built for a GPU: arch must be sm_90"):
        k.cubin("compute_90")
    with pytest.raises(ValueError, match="arch must look like sm_90"):
        k.ptx("90")
    broken = cupy_ops.Kernel("__global__ void bad(float* y) { y[0] = nope; }", "bad")
    with pytest.raises(cupy_ops.KernelCompileError, match="nope"):
        broken.ptx("sm_90")
