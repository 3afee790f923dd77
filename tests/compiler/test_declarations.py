"""The declaration reader (cupy_ops.compiler.declarations) on a corpus of real kernel
declarations: those of KernelBench-style extension code, CUTLASS/CUB-style ones (template heads
of several parameters, __launch_bounds__(MaxThreads, MinBlocks), a `const __grid_constant__`
Params struct, attributes in every order CUDA accepts), and every kernel of cuda_src/ checked
against the parameter layout NVRTC itself compiled. CPU only (NVRTC needs no GPU)."""

import pytest

import cupy_ops
import cupy_ops.ops
from cupy_ops import compiler
from cupy_ops.compiler import cubin, declarations
from cupy_ops.kernel import kernel_names, parse_signature
from cupy_ops.kernel.types import find_kernel
from cupy_ops.launch import EPI_ARGS_BYTES


def need_nvrtc():
    return pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")


def params_of(code, name):
    d = declarations.find(code, name)
    assert d is not None, f"{name} not found"
    return [(p.ctype, p.name, p.pointer) for p in d.params]


# --- the declarations of KernelBench-style extension code (load_inline users' kernels) -----

SEED_DECLARATIONS = [
    (
        "__global__ void matmul_kernel(const float* A, const float* B, float* C, int M, int N, int K)",
        "matmul_kernel",
        ["ptr", "ptr", "ptr", "i32", "i32", "i32"],
        ["A", "B", "C", "M", "N", "K"],
    ),
    (
        "__global__ void relu_kernel(const float* input, float* output, int size)",
        "relu_kernel",
        ["ptr", "ptr", "i32"],
        ["input", "output", "size"],
    ),
    (
        "__global__ void fused_relu_divide(const float* input, float* output, float divisor, int size)",
        "fused_relu_divide",
        ["ptr", "ptr", "f32", "i32"],
        ["input", "output", "divisor", "size"],
    ),
    (
        "__global__ void fused_relu_divide_kernel(const float* input, float* output, float divisor, int size)",
        "fused_relu_divide_kernel",
        ["ptr", "ptr", "f32", "i32"],
        ["input", "output", "divisor", "size"],
    ),
    (
        "__global__ void vectorized_relu(const float* __restrict__ input, float* __restrict__ output, int size)",
        "vectorized_relu",
        ["ptr", "ptr", "i32"],
        ["input", "output", "size"],
    ),
    (
        "__global__ void relu_kernel(const float* x, float* out, int size)",
        "relu_kernel",
        ["ptr", "ptr", "i32"],
        ["x", "out", "size"],
    ),
    (
        "__global__ void relu_kernel(float* out, const float* in, int n)",
        "relu_kernel",
        ["ptr", "ptr", "i32"],
        ["out", "in", "n"],
    ),
    ("__global__ void relu_inplace_kernel(float* data, int n)", "relu_inplace_kernel", ["ptr", "i32"], ["data", "n"]),
    (
        "__global__ void vectorized_relu_kernel(float* out, const float* in, int n)",
        "vectorized_relu_kernel",
        ["ptr", "ptr", "i32"],
        ["out", "in", "n"],
    ),
]


@pytest.mark.parametrize("decl, name, kinds, names", SEED_DECLARATIONS, ids=[d[1] for d in SEED_DECLARATIONS])
def test_extension_code_declarations(decl, name, kinds, names):
    t, params = parse_signature(decl + " { }", name)
    assert t is None and [k for k, _, _ in params] == kinds and [n for _, n, _ in params] == names


def test_a_whole_extension_file_with_host_code_finds_only_its_kernels():
    # host functions (a `<<<...>>>` launch, lambdas, templates of the host library) are bodies
    # or declarations that are not kernels: only the __global__ ones count, and comments,
    # strings and #define lines that mention __global__ are not code
    code = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#define KERNEL_DOC "__global__ void not_a_kernel(int)"
// __global__ void commented_out(float* p)
/* __global__ void also_commented(float* p) */
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const int threads = 256, blocks = (x.numel() + threads - 1) / threads;
    auto noop = [](int v) { return v < 2 ? v : v >> 1; };
    std::vector<std::pair<int, int>> shapes{{1, 2}};
    relu_kernel<<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), noop(x.numel()));
    return y;
}
const char* doc = "__global__ void in_a_string(float*)";
__global__ void scale_kernel(float* y, float s, int n) { if (threadIdx.x < n) y[threadIdx.x] *= s; }
"""
    assert kernel_names(code) == ["relu_kernel", "scale_kernel"]
    assert params_of(code, "scale_kernel") == [("float*", "y", True), ("float", "s", False), ("int", "n", False)]


# --- CUTLASS / CUB style ------------------------------------------------------------------

CUTLASS_2 = """
template <typename Operator>
__global__
void Kernel(typename Operator::Params params) {
  extern __shared__ int SharedStorageBase[];
}
template <typename Operator>
__global__ __launch_bounds__(Operator::kThreadCount, Operator::kMinBlocksPerMultiprocessor)
void Kernel2(typename Operator::Params params) { }
"""
CUTLASS_3 = """
template <class Operator>
__global__
#ifdef __CUDACC__
// Launch bounds as the kernel's operator states them
__launch_bounds__(Operator::MaxThreadsPerBlock, Operator::MinBlocksPerMultiprocessor)
#endif
void device_kernel(CUTLASS_GRID_CONSTANT typename Operator::Params const params) { }
"""
CUB = """
namespace cub { namespace detail { namespace reduce {
template <typename ChainedPolicyT, typename InputIteratorT, typename OutputIteratorT, typename OffsetT,
          typename ReductionOpT, typename AccumT, typename TransformOpT>
__launch_bounds__(int(ChainedPolicyT::ActivePolicy::ReducePolicy::BLOCK_THREADS))
__global__ void DeviceReduceKernel(InputIteratorT d_in, AccumT* d_out, OffsetT num_items,
                                   GridEvenShare<OffsetT> even_share, ReductionOpT reduction_op,
                                   TransformOpT transform_op) { }
template <typename ScanTileStateT>
CUB_DETAIL_KERNEL_ATTRIBUTES void DeviceScanInitKernel(ScanTileStateT tile_state, int num_tiles) { }
}}}
"""


def test_cutlass_kernels():
    k = declarations.find(CUTLASS_2, "Kernel")
    assert k.head == "template <class Operator>" and k.attributes == ()
    assert params_of(CUTLASS_2, "Kernel") == [("typename Operator::Params", "params", False)]
    k2 = declarations.find(CUTLASS_2, "Kernel2")
    assert k2.attributes == ("__launch_bounds__(Operator::kThreadCount, Operator::kMinBlocksPerMultiprocessor)",)
    # a directive inside the declaration, a macro standing for __grid_constant__, const after the type
    k3 = declarations.find(CUTLASS_3, "device_kernel")
    assert k3.attributes[0] == "__launch_bounds__(Operator::MaxThreadsPerBlock, Operator::MinBlocksPerMultiprocessor)"
    assert params_of(CUTLASS_3, "device_kernel") == [
        ("CUTLASS_GRID_CONSTANT typename Operator::Params const", "params", False)
    ]


def test_cub_kernels_in_namespaces():
    d = declarations.find(CUB, "DeviceReduceKernel")
    assert d.qualified == "cub::detail::reduce::DeviceReduceKernel" and len(d.template) == 7
    assert [p.kind for p in d.template] == ["type"] * 7
    assert d.attributes == ("__launch_bounds__(int(ChainedPolicyT::ActivePolicy::ReducePolicy::BLOCK_THREADS))",)
    assert params_of(CUB, "cub::detail::reduce::DeviceReduceKernel") == [
        ("InputIteratorT", "d_in", False),
        ("AccumT*", "d_out", True),
        ("OffsetT", "num_items", False),
        ("GridEvenShare<OffsetT>", "even_share", False),
        ("ReductionOpT", "reduction_op", False),
        ("TransformOpT", "transform_op", False),
    ]
    # a kernel a macro declares __global__ is not seen: the preprocessor alone knows it
    assert declarations.find(CUB, "DeviceScanInitKernel") is None
    assert kernel_names(CUB) == ["cub::detail::reduce::DeviceReduceKernel"]


# Declarations CUDA accepts, each compiled by NVRTC: cupy_ops.Kernel reads them, and the
# compiled kernel's parameter sizes must be the ones read (compile_offline checks the layout).
HEADERS = """
struct Params { const float* x; float* y; int n; float scale; };
"""
ACCEPTED = [
    # (source, name, kinds, attributes)
    (
        "template <class T> __launch_bounds__(256) __global__ void k(const T* x, T* y, long long n) "
        "{ long long i = threadIdx.x; if (i < n) y[i] = x[i]; }",
        "k",
        ["ptr", "ptr", "i64"],
        ["__launch_bounds__(256)"],
    ),
    (
        'extern "C" __global__ __launch_bounds__(128) void g(float a, const float* x, float* y, int n) '
        "{ int i = threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }",
        "g",
        ["f32", "ptr", "ptr", "i32"],
        ["__launch_bounds__(128)"],
    ),
    (
        "template <int MaxThreads, int MinBlocks, typename T> __global__ void __launch_bounds__(MaxThreads, MinBlocks) "
        "bounded(const T* __restrict__ in, T* __restrict__ out, int n) { if (threadIdx.x < n) out[0] = in[0]; }",
        "bounded<256, 2, float>",
        ["ptr", "ptr", "i32"],
        ["__launch_bounds__(MaxThreads, MinBlocks)"],
    ),
    (
        "template <class T, int BM, int BN, int BK, int WM, int WN, bool SPLIT_K = false>\n"
        "__global__ void __launch_bounds__(BM * BN / (WM * WN) * 32)\n"
        "gemm_tile(const T* A, const T* B, T* C, int M, int N, int K, T alpha = T(1)) { if (SPLIT_K) C[0] = alpha; }",
        "gemm_tile<double, 128, 128, 32, 64, 64>",
        ["ptr", "ptr", "ptr", "i32", "i32", "i32", "f64"],
        ["__launch_bounds__(BM * BN / (WM * WN) * 32)"],
    ),
    (
        "__global__ void __cluster_dims__(2, 1, 1) clustered(float* out) { out[blockIdx.x] = 1.f; }",
        "clustered",
        ["ptr"],
        ["__cluster_dims__(2, 1, 1)"],
    ),
    (
        "__global__ void __launch_bounds__(128) __cluster_dims__(2, 1, 1) both(float* out, unsigned char flag, short s,"
        " bool b) { out[0] = flag + s + b; }",
        "both",
        ["ptr", "i32", "i32", "i32"],
        ["__launch_bounds__(128)", "__cluster_dims__(2, 1, 1)"],
    ),
    (
        "static __global__ void defaults(float* y, int n = 1 << 10, float a = 0.5f, int m = (3 > 2)) "
        "{ y[0] = n * a + m; }",
        "defaults",
        ["ptr", "i32", "f32", "i32"],
        [],
    ),
    (
        "namespace ops { namespace detail {\n__global__ void nested(float y[], size_t n, const size_t) "
        "{ y[0] = n; } } }",
        "nested",
        ["ptr", "i64", "i64"],
        [],
    ),
    ('extern "C" {\n__global__ void in_block(void* p) { } }', "in_block", ["ptr"], []),
    (
        "template <class T> __global__ void fwd(T* y);\ntemplate <class T> __global__ void fwd(T* y) { y[0] = T(); }",
        "fwd<float>",
        ["ptr"],
        [],
    ),
    (
        "[[maybe_unused]] __global__ void __attribute__((noinline)) attributed(int* p) { p[0] = 1; }",
        "attributed",
        ["ptr"],
        ["[[maybe_unused]]", "__attribute__((noinline))"],
    ),
    ("__global__ void __maxnreg__(32) capped(float* y) { y[0] = 1.f; }", "capped", ["ptr"], ["__maxnreg__(32)"]),
]


@pytest.mark.parametrize("code, name, kinds, attributes", ACCEPTED, ids=[a[1] for a in ACCEPTED])
def test_every_declaration_form_is_read_and_matches_what_nvrtc_compiles(code, name, kinds, attributes):
    k = cupy_ops.Kernel(HEADERS + code, name)
    assert [kind for kind, _, _ in k.params] == kinds
    assert list(k.declaration.attributes) == attributes
    nvrtc = need_nvrtc()
    if name == "capped" and tuple(nvrtc.getVersion()) < (12, 4):
        pytest.skip("__maxnreg__ needs NVRTC 12.4")
    for r in k.compile_offline("sm_90"):
        assert r.ok, r.log


def test_a_grid_constant_params_struct_is_read_and_refused_with_the_way_out():
    code = HEADERS + "__global__ void __launch_bounds__(128) with_params(const __grid_constant__ Params p) { }"
    assert params_of(code, "with_params") == [("const __grid_constant__ Params", "p", False)]
    with pytest.raises(
        ValueError,
        match=r"parameter 'p' of kernel with_params has type 'const __grid_constant__ "
        r"Params', which cannot be passed from Python.*signature=",
    ):
        cupy_ops.Kernel(code, "with_params")


def test_template_heads_of_every_kind():
    code = (
        "template <typename... Ts, template <class> class TT, typename T::value_type V, unsigned int, "
        "auto W = 3, int N = sizeof(int), class E = Pair<int, 2>> __global__ void many(int) { }"
    )
    d = declarations.find(code, "many")
    assert [(p.kind, p.name, p.pack, p.default) for p in d.template] == [
        ("type", "Ts", True, None),
        ("template", "TT", False, None),
        ("value", "V", False, None),
        ("value", "", False, None),
        ("value", "W", False, "3"),
        ("value", "N", False, "sizeof(int)"),
        ("type", "E", False, "Pair<int, 2>"),
    ]
    assert [p.ctype for p in d.template if p.kind == "value"] == [
        "typename T::value_type",
        "unsigned int",
        "auto",
        "int",
    ]


def test_explicit_specializations_and_forward_declarations():
    code = (
        "template <class T> __global__ void k(const T* x, int n);\n"
        "template <class T> __global__ void k(const T* x, int n) { }\n"
        "template <> __global__ void k<float>(const float* x, int n) { }\n"
        "template __global__ void k<double>(const double*, int);\n"
    )
    found = declarations.declarations(code)
    assert [(d.definition, d.specialization) for d in found] == [
        (False, False),
        (True, False),
        (True, True),
        (False, True),
    ]
    assert kernel_names(code) == ["k"] and declarations.find(code, "k").definition


def test_a_name_of_two_namespaces_must_be_qualified():
    code = "namespace a { __global__ void k(int* p) {} }\nnamespace b { __global__ void k(float* p) {} }"
    with pytest.raises(ValueError, match=r"k names 2 kernels \(a::k, b::k\): give the qualified name"):
        declarations.find(code, "k")
    assert params_of(code, "b::k") == [("float*", "p", True)]


@pytest.mark.parametrize(
    "expr, base, args",
    [
        ("scale", "scale", None),
        ("tp<float, 4>", "tp", ["float", "4"]),
        ("ns::tp<float,4>", "ns::tp", ["float", "4"]),
        ("tp<Pair<int, 2>, (3 > 2), true>", "tp", ["Pair<int, 2>", "(3 > 2)", "true"]),
        ("tp<Outer<Inner<int>>>", "tp", ["Outer<Inner<int>>"]),
        ("tp<unsigned long long, -1>", "tp", ["unsigned long long", "-1"]),
    ],
)
def test_name_expressions(expr, base, args):
    assert declarations.split_name(expr) == (base, args)


@pytest.mark.parametrize("bad", ["not a name", "tp<float", "tp<float>>", "3k", "tp<float, >", "k()", "ns::"])
def test_malformed_name_expressions(bad):
    with pytest.raises(ValueError):
        declarations.split_name(bad)


# --- every kernel of cuda_src/, against the layout NVRTC compiled -------------------------


def _builtin_kernels():
    out = []
    for src in compiler.sources():
        first = {}
        for expr in src.variants:
            first.setdefault(expr.split("<")[0], expr)
        out += [(src.name, name, expr) for name, expr in first.items()]
    return out


BUILTIN = _builtin_kernels()
SIZES = {"ptr": 8, "i64": 8, "f64": 8, "i32": 4, "f32": 4, "tmap": 128, "epi": EPI_ARGS_BYTES}


def test_every_builtin_kernel_is_read_as_nvrtc_compiles_it():
    """Per kernel of cuda_src/ (one instantiation each): the parameter sizes implied by what the
    reader read equal those of the compiled cubin (its EIATTR_KPARAM_INFO records)."""
    need_nvrtc()
    assert len(BUILTIN) >= 20
    by_source: dict = {}
    for source, name, expr in BUILTIN:
        by_source.setdefault(source, []).append((name, expr))
    for src in compiler.sources():
        kernels = by_source[src.name]
        target = src.target("sm_90")
        r = compiler.nvrtc.compile(src.text(), src.name, [e for _, e in kernels], src.options(target))
        assert r.ok, r.log
        for name, expr in kernels:
            _template, params = parse_signature(src.text(), name)
            acc = 8 if "<double" in expr else 4
            want = [acc if k == "acc" else SIZES[k] for k, _, _ in params]
            assert cubin.param_sizes(r.image, r.lowered[expr]) == want, (src.name, expr, params)


def test_the_ptx_layout_reader_agrees_with_the_cubin_one():
    need_nvrtc()
    code = (
        HEADERS + "template <class T, int N> __global__ void mixed(const T* x, T a, char c, short s, double d, "
        "Params p, long long n) { }"
    )
    r_cubin = compiler.nvrtc.compile(code, "m.cu", ["mixed<float, 3>"], ["-arch=sm_90"])
    r_ptx = compiler.nvrtc.compile(code, "m.cu", ["mixed<float, 3>"], ["-arch=compute_90"])
    lowered = r_cubin.lowered["mixed<float, 3>"]
    assert cubin.param_sizes(r_cubin.image, lowered) == [8, 4, 1, 2, 8, 24, 8]
    assert cubin.param_sizes(r_ptx.image, lowered) == [8, 4, 1, 2, 8, 24, 8]
    assert cubin.param_sizes(r_cubin.image, "_Z7missingv") is None


# --- a stated signature, checked against the compiled kernel -------------------------------

MACRO_KERNEL = """
#define DEFINE_SCALE(NAME, T) __global__ void NAME(const T* x, T* y, T s, int n) { \\
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] * s; }
DEFINE_SCALE(scale_f32, float)
"""


def test_a_kernel_a_macro_writes_takes_a_signature():
    with pytest.raises(ValueError, match=r"no `__global__ void scale_f32\(...\)` found .*pass signature="):
        cupy_ops.Kernel(MACRO_KERNEL, "scale_f32")
    k = cupy_ops.Kernel(MACRO_KERNEL, "scale_f32", signature="const float* x, float* y, float s, int n")
    assert k.params == [
        ("ptr", "x", "const float*"),
        ("ptr", "y", "float*"),
        ("f32", "s", "float"),
        ("i32", "n", "int"),
    ]
    assert k.declaration is None
    need_nvrtc()
    assert all(r.ok for r in k.compile_offline("sm_90"))


def test_a_wrong_signature_is_caught_against_the_compiled_kernel(monkeypatch, tmp_path):
    need_nvrtc()
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    bad = cupy_ops.Kernel(MACRO_KERNEL, "scale_f32", signature=["ptr", "ptr", "f64", "i32"])
    [r] = bad.compile_offline("sm_90")
    assert (
        not r.ok
        and "parameter 2 (arg2: f64) of kernel scale_f32 was read as 8 bytes but NVRTC compiled it as 4" in r.log
    )
    with pytest.raises(
        ValueError,
        match=r"kernel scale_f32 was read as taking 3 parameters \(arg0: ptr, arg1: ptr, "
        r"arg2: f32\) but NVRTC compiled it with 4 \(of 8, 8, 4, 4 bytes\)",
    ):
        v = cupy_ops.Kernel(MACRO_KERNEL, "scale_f32", signature=["ptr", "ptr", "f32"]).variant(None)
        compiler.binary(v, "sm_90")  # the run-time path refuses it before any launch
    good = cupy_ops.Kernel(MACRO_KERNEL, "scale_f32", signature=["ptr", "ptr", "f32", "i32"])
    assert good.variant(None) is not bad.variant(None)  # one source per stated list
    compiler.binary(good.variant(None), "sm_90")


def test_a_signature_keeps_the_names_read_and_counts_must_agree():
    k = cupy_ops.Kernel("__global__ void k(float* y, int n) { }", "k", signature=["ptr", "i64"])
    assert k.params == [("ptr", "y", "float*"), ("i64", "n", "int")]
    with pytest.raises(ValueError, match="signature has 1 entries but kernel k takes 2 parameters"):
        cupy_ops.Kernel("__global__ void k(float* y, int n) { }", "k", signature=["ptr"])
    with pytest.raises(TypeError, match="signature entries must be str"):
        cupy_ops.Kernel("__global__ void k(float* y) { }", "k", signature=[1])


IFDEF_KERNELS = r"""
#ifdef USE_DOUBLE
__global__ void scale(double* y, int n) { y[0] *= 2; }
#else
__global__ void scale(float* y, int n) { y[0] *= 2; }
#endif
#if 0
__global__ void retired(float* y) {}
#elif 1
__global__ void current(float* y) {}
#else
__global__ void fallback(float* y) {}
#endif
#if __CUDA_ARCH__ >= 900
__global__ void same(float* y) { y[0] = 1.f; }
#else
__global__ void same(float* y) { y[0] = 2.f; }
#endif
"""


def test_what_the_preprocessor_certainly_drops_declares_no_kernel():
    assert kernel_names(IFDEF_KERNELS) == ["scale", "current", "same"]
    assert declarations.find(IFDEF_KERNELS, "same").params[0].ctype == "float*"  # one parameter list


def test_a_kernel_defined_twice_with_different_parameters_is_refused_not_guessed():
    # which branch of #ifdef USE_DOUBLE the compile keeps, the text does not say: a float32
    # tensor read as double* (or refused for float*) were the wrong guess
    with pytest.raises(ValueError, match=r"kernel scale is defined 2 times with different parameters "
                       r"\(scale\(double\*, int\); scale\(float\*, int\)\).*pass signature="):  # fmt: skip
        find_kernel(IFDEF_KERNELS, "scale")
    with pytest.raises(ValueError, match="kernel scale is defined 2 times"):
        cupy_ops.Kernel(IFDEF_KERNELS, "scale")
    k = cupy_ops.Kernel(IFDEF_KERNELS, "scale", signature=["float* y", "int n"])  # the list stated
    assert k.params == [("ptr", "y", "float*"), ("i32", "n", "int")]


def test_two_spellings_of_one_parameter_list_are_one_kernel():
    # what a launch passes is the same: the first definition is read, as before
    src = (
        "#ifdef FAST\n__global__ void k(float* __restrict__ x, const long n, signed s) {}\n"
        "#else\n__global__ void k(float* x, int64_t n, int s) {}\n#endif\n"
    )
    assert [p.ctype for p in find_kernel(src, "k").params] == ["float* __restrict__", "const long", "signed"]
    plain_and_template = "template <class T> __global__ void f(T* y) {}\n__global__ void f(float* y, int n) {}\n"
    assert find_kernel(plain_and_template, "f").template is not None  # "f<float>" names the template


def test_a_default_argument_on_the_declaration_before_the_definition_counts():
    src = "__global__ void k3(float* x, int n = 4);\n__global__ void k3(float* x, int n) { x[0] = n; }\n"
    assert [p.default for p in declarations.find(src, "k3").params] == [None, "4"]


@pytest.mark.parametrize(
    "ctype, kind",
    [
        ("long int", "i64"),
        ("unsigned long int", "i64"),
        ("long unsigned int", "i64"),
        ("unsigned long long int", "i64"),
        ("short unsigned", "i32"),
        ("unsigned short int", "i32"),
        ("std::int64_t", "i64"),
        ("std::size_t", "i64"),
        ("cuda::std::uint32_t", "i32"),
        ("::int64_t", "i64"),
        ("signed", "i32"),
    ],
)
def test_every_spelling_of_an_integer_type_is_that_type(ctype, kind):
    _, params = parse_signature(f"__global__ void k(float* y, {ctype} n) {{}}", "k")
    assert params[1][0] == kind
