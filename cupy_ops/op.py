"""``cupy_ops.op``: one declaration turns a kernel launch into a torch op.

    scale_kernel = cupy_ops.Kernel(SOURCE, "scale")

    @cupy_ops.op("mylib::scale", output=cupy_ops.like("x"))
    def scale(x: torch.Tensor, s: float, *, out: torch.Tensor) -> None:
        scale_kernel(x, out, s, x.numel(), grid=cupy_ops.cdiv(x.numel(), 256), block=256)

    @scale.backward(save=("s",))
    def _(ctx, grad):
        return scale(grad, ctx.s), None            # a backward of ops: differentiable again

    y = scale(x, 2.0)                               # eager: straight to the launch
    torch.ops.mylib.scale(x, 2.0)                   # the registered torch op

From the declaration the op layer derives: the schema (from the launcher's annotations:
``Tensor``, ``Optional[Tensor]``, ``float``, ``int``, ``bool``, ``str``, with defaults), a
custom op in the chosen namespace, its fake implementation (the ``output`` rule: it allocates
the real output and the fake one alike), autograd from the declared backward (to any order
when the backward is built of differentiable ops), forward-mode AD from a declared ``jvp`` and
``torch.func.vmap`` from a declared ``vmap`` (a clear error naming the op where none is), the
autocast policy, and the ``out=`` and in-place forms as mutating ops (``name_out``), which
torch.compile functionalizes.

One eager path: a call on plain CUDA tensors with nothing to record goes straight to the
launcher; with autograd, forward AD or a torch.func transform it runs as an
``autograd.Function`` (no dispatcher, no ``torch._dynamo`` import); under torch.compile, a
dispatch mode (fake tensors) or tensor subclasses it calls the registered op, which carries the
same rules (docs/design.md#the-op-layer).
"""
from __future__ import annotations

import inspect
import threading
import typing
import warnings

import torch

from . import checks

__all__ = ["op", "like", "Op", "Context"]

_Tensor = torch.Tensor
# nn.Parameter is a plain tensor to torch's dispatch (its __torch_function__ is disabled): the
# eager path takes it as one, or every call with a module's weights would go through the
# dispatcher (2x the host time of a layer under autograd)
_Parameter = torch.nn.Parameter
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_functorch_active = torch._C._are_functorch_transforms_active
_dispatch_modes = torch._C._len_torch_dispatch_stack
_fwd_ad = torch.autograd.forward_ad
_bump_version = getattr(torch.autograd.graph, "increment_version", None) or torch._C._increment_version
_AUTOCAST_POLICIES = (None, "lower", "fp32", "promote")
_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def bump_version(t: torch.Tensor) -> None:
    """Mark ``t`` as written, as torch's in-place and ``out=`` ops do (autograd refuses a
    backward that saved its old values)."""
    _bump_version(t)


def plain_eager(tensors) -> bool:
    """Whether a call on ``tensors`` (None and non-tensors allowed) can launch directly: plain
    tensors, no dispatch mode (fake tensors, tracing), no torch.func transform, no forward-AD
    level. Autograd is the caller's question."""
    for t in tensors:
        if isinstance(t, _Tensor) and type(t) is not _Tensor and type(t) is not _Parameter:
            return False
    return not (_dispatch_modes() or _functorch_active() or _fwd_ad._current_level >= 0 or _is_compiling())


def needs_grad(values) -> bool:
    """Grad mode is on and one of ``values`` is a tensor that requires grad: autograd records."""
    return _grad_enabled() and any(isinstance(t, _Tensor) and t.requires_grad for t in values)


def _autocast_on() -> bool:
    try:
        return torch.is_autocast_enabled("cuda")
    except TypeError:   # torch < 2.4: no device argument
        return torch.is_autocast_enabled()


def _autocast_dtype() -> torch.dtype:
    get = getattr(torch, "get_autocast_dtype", None)
    return get("cuda") if get is not None else torch.get_autocast_gpu_dtype()


# --- output rules ------------------------------------------------------------------------------

class like:
    """Output rule: a tensor like input ``name`` (``torch.empty_like``: its shape, dtype and
    device; the strides torch gives a dense input, contiguous otherwise), or of ``dtype``."""

    def __init__(self, name: str, *, dtype: torch.dtype | None = None):
        if not isinstance(name, str):
            raise TypeError(f"like() takes the name of an input, got {name!r}")
        self.name = name
        self.dtype = dtype
        self.index = None   # bound by the op

    def __call__(self, *args):
        t = args[self.index]
        return torch.empty_like(t) if self.dtype is None else torch.empty_like(t, dtype=self.dtype)

    def __repr__(self) -> str:
        return f"like({self.name!r}{'' if self.dtype is None else f', dtype={self.dtype}'})"


# --- schema ------------------------------------------------------------------------------------

_TYPES = {_Tensor: "Tensor", float: "float", int: "SymInt", bool: "bool", str: "str"}


def _schema_type(op_name: str, pname: str, ann) -> tuple[str, bool]:
    """The schema type of a launcher parameter's annotation, and whether it is a tensor."""
    if isinstance(ann, str):
        raise TypeError(f"op {op_name}: parameter {pname!r} is annotated by a string ({ann!r}); annotate with "
                        f"the type itself (no `from __future__ import annotations` in the launcher's module)")
    if ann in _TYPES:
        return _TYPES[ann], ann is _Tensor
    args = typing.get_args(ann)
    if len(args) == 2 and type(None) in args:
        inner = args[0] if args[1] is type(None) else args[1]
        if inner in _TYPES:
            return _TYPES[inner] + "?", inner is _Tensor
    raise TypeError(f"op {op_name}: parameter {pname!r} has annotation {ann!r}; an op takes torch.Tensor, "
                    f"Optional[torch.Tensor], float, int, bool or str")


def _default_text(v) -> str:
    if v is None:
        return "None"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


class _Param:
    __slots__ = ("name", "type", "tensor", "default", "index")

    def __init__(self, name, type_, tensor, default, index):
        self.name, self.type, self.tensor, self.default, self.index = name, type_, tensor, default, index

    def text(self, mutable: str | None = None) -> str:
        t = self.type if mutable is None else f"Tensor({mutable}!)"
        d = "" if self.default is inspect.Parameter.empty else "=" + _default_text(self.default)
        return f"{t} {self.name}{d}"


# --- what a rule receives -----------------------------------------------------------------------

class Context:
    """What a ``backward`` or ``jvp`` rule receives: the saved inputs (and ``out``, the output)
    as attributes by name, and ``needs_grad(name)``: whether autograd wants that input's gradient."""

    def __init__(self, values: dict, needs: dict):
        self.__dict__.update(values)
        self._needs = needs

    def needs_grad(self, name: str) -> bool:
        return self._needs.get(name, False)


_libraries: dict[str, torch.library.Library] = {}
_lib_lock = threading.Lock()


def _library(namespace: str) -> torch.library.Library:
    with _lib_lock:
        lib = _libraries.get(namespace)
        if lib is None:
            lib = _libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
        return lib


class Op:
    """A torch op declared once (see the module's docstring and ``op``). Call it like the
    launcher without ``out``; ``out=`` (a tensor to write into) where the op has one output.

    Attributes: ``qualname`` ("ns::name"), ``schema``, ``overload`` (the registered
    ``torch.ops.ns.name.default``), ``out_overload`` (``name_out``, the mutating form) and
    ``inplace`` (the name of the input an in-place call overwrites, or None).
    """

    def __init__(self, qualname: str, launch, *, output, autocast=None, inplace: str | None = None,
                 contiguous: bool = True, any_out_layout: bool = False, elementwise: bool = False,
                 checks_devices: bool = True, doc=None):
        if not isinstance(qualname, str) or qualname.count("::") != 1:
            raise ValueError(f"an op's name is 'namespace::name', got {qualname!r}")
        ns, name = qualname.split("::")
        if not ns.isidentifier() or not name.isidentifier():
            raise ValueError(f"an op's namespace and name must be identifiers, got {qualname!r}")
        if autocast not in _AUTOCAST_POLICIES:
            raise ValueError(f"autocast must be one of {_AUTOCAST_POLICIES}, got {autocast!r}")
        self.qualname, self.name, self.namespace = qualname, name, ns
        self.launch = launch
        self.autocast = autocast
        self.contiguous = contiguous
        self.any_out_layout = any_out_layout
        self.elementwise = elementwise
        self.checks_devices = checks_devices
        self._read_signature(launch)
        self.inplace = inplace
        if inplace is not None and inplace not in self._by_name:
            raise ValueError(f"op {qualname}: inplace={inplace!r} is not one of its inputs")
        self.output = output
        if isinstance(output, like):
            if output.name not in self._by_name or not self._by_name[output.name].tensor:
                raise ValueError(f"op {qualname}: like({output.name!r}) names no tensor input")
            output.index = self._by_name[output.name].index
        elif not callable(output):
            raise TypeError(f"op {qualname}: output must be cupy_ops.like(name) or a function of the inputs that "
                            f"returns the empty output, got {output!r}")
        self._backward = self._jvp = self._vmap = None
        self._save: tuple = ()
        self._register()
        self._eager_fn, self._dispatch_fn = _functions(self)
        self._eager_apply = super(torch.autograd.Function, self._eager_fn).apply
        self.__doc__ = doc or launch.__doc__
        self.__name__ = self.__qualname__ = name
        self.__module__ = getattr(launch, "__module__", __name__)
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                               default=p.default) for p in self._params]
            + [inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)])

    # -- declaration ------------------------------------------------------------------------------

    def _read_signature(self, launch) -> None:
        sig = inspect.signature(launch)
        try:
            hints = typing.get_type_hints(launch)
        except Exception:   # noqa: BLE001  (unresolvable string annotations: reported per parameter)
            hints = {}
        params, seen_out = [], False
        for p in sig.parameters.values():
            if p.name == "out" and p.kind is inspect.Parameter.KEYWORD_ONLY:
                seen_out = True
                continue
            if p.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.POSITIONAL_ONLY):
                raise TypeError(f"op {self.qualname}: the launcher's inputs are positional parameters and its output "
                                f"the keyword-only `out`; got {p.kind.description} parameter {p.name!r}")
            ann = hints.get(p.name, p.annotation)
            if ann is inspect.Parameter.empty:
                raise TypeError(f"op {self.qualname}: parameter {p.name!r} of the launcher has no type annotation")
            type_, tensor = _schema_type(self.qualname, p.name, ann)
            params.append(_Param(p.name, type_, tensor, p.default, len(params)))
        if not seen_out:
            raise TypeError(f"op {self.qualname}: the launcher takes its output as a keyword-only parameter `out` "
                            f"(def launch(x: torch.Tensor, ..., *, out: torch.Tensor) -> None)")
        self._params = params
        self._by_name = {p.name: p for p in params}
        self._tensor_idx = tuple(p.index for p in params if p.tensor)
        self._optional = frozenset(p.index for p in params if p.tensor and p.type.endswith("?"))
        self._n = len(params)
        self._defaults = tuple(p.default for p in params)
        self.schema = f"({', '.join(p.text() for p in params)}) -> Tensor"
        self._out_schema = f"({', '.join(['Tensor(a!) out'] + [p.text() for p in params])}) -> ()"

    def backward(self, fn=None, *, save=()):
        """Declare the backward: ``fn(ctx, *grads) -> one gradient per input`` (None where there
        is none), built of ops so that it is differentiable in turn; ``save`` names the inputs
        (and ``"out"``, the output) ``ctx`` carries. Use as a decorator."""
        def register(f):
            self._backward = f
            self._add_save(save)
            return f
        return register(fn) if fn is not None else register

    def jvp(self, fn=None, *, save=()):
        """Declare forward-mode AD: ``fn(ctx, *tangents) -> the output's tangent``, one tangent
        per input (None for inputs without one); ``save`` as for ``backward``."""
        def register(f):
            self._jvp = f
            self._add_save(save)
            return f
        return register(fn) if fn is not None else register

    def vmap(self, fn):
        """Declare the ``torch.func.vmap`` rule: ``fn(info, in_dims, *args) -> (output,
        out_dim)``, as ``torch.autograd.Function.vmap`` takes it."""
        self._vmap = fn
        return fn

    def _add_save(self, names) -> None:
        names = (names,) if isinstance(names, str) else tuple(names)
        for n in names:
            if n != "out" and n not in self._by_name:
                raise ValueError(f"op {self.qualname}: save={n!r} is not an input (nor 'out')")
        self._save = tuple(dict.fromkeys(self._save + names))

    # -- the eager path ---------------------------------------------------------------------------

    def __call__(self, *args, out=None, **kwargs):
        if kwargs or len(args) != self._n:
            args = self._bind(args, kwargs)
        if _is_compiling():
            if out is not None:
                self.out_overload(out, *args)
                return out
            return self.overload(*args)
        if out is not None:
            return self.call_out(args, out)
        return self._call(args)

    def _call(self, args):
        """The functional form on bound ``args``: the eager hot path (a handful of C calls before
        the launch when nothing needs recording)."""
        if self.autocast is not None and _autocast_on():
            args = self._cast(args)
        grad = False
        for i in self._tensor_idx:
            t = args[i]
            if type(t) is not _Tensor and type(t) is not _Parameter:
                if t is None and i in self._optional:
                    continue
                return self._call_special(args, i)
            if t.requires_grad:
                grad = True
        if _dispatch_modes() or _functorch_active() or _fwd_ad._current_level >= 0:
            return self._call_special(args, None)
        if grad and _grad_enabled():
            return self._eager_apply(*args)
        return self.impl(*args)

    def _call_special(self, args, i):
        """``_call`` off the hot path: a non-tensor where a tensor goes (``TypeError``), a
        tensor subclass or a dispatch mode (the registered op), a torch.func transform or
        forward AD (the autograd.Function, whose rules they use)."""
        if i is not None and not isinstance(args[i], _Tensor):
            raise TypeError(f"{self._params[i].name} must be a torch.Tensor, got {type(args[i]).__name__}")
        if i is not None or _dispatch_modes():
            return self.overload(*args)
        if _functorch_active():
            return self._eager_fn.apply(*args)
        return self._eager_apply(*args)

    def _full(self, args, kwargs):
        return args if len(args) == self._n and not kwargs else self._bind(args, kwargs)

    def _bind(self, args, kwargs):
        if len(args) > self._n:
            raise TypeError(f"{self.name}() takes {self._n} arguments, got {len(args)}")
        full = list(args) + [inspect.Parameter.empty] * (self._n - len(args))
        for k, v in kwargs.items():
            p = self._by_name.get(k)
            if p is None:
                raise TypeError(f"{self.name}() got an unexpected keyword argument {k!r}")
            if full[p.index] is not inspect.Parameter.empty:
                raise TypeError(f"{self.name}() got multiple values for argument {k!r}")
            full[p.index] = v
        for i, v in enumerate(full):
            if v is inspect.Parameter.empty:
                if self._defaults[i] is inspect.Parameter.empty:
                    raise TypeError(f"{self.name}() missing argument {self._params[i].name!r}")
                full[i] = self._defaults[i]
        return tuple(full)

    def impl(self, *args):
        """The real implementation: check, allocate by the output rule, launch."""
        out = self.output(*args)
        if self.checks_devices:
            self._check_devices(args)
        if self.contiguous:
            args = self._contiguous(args)
        self.launch(*args, out=out)
        return out

    def _contiguous(self, args):
        # (a loop over the tensor slots, no generator: this runs on every eager call)
        for i in self._tensor_idx:
            a = args[i]
            if a is not None and not a.is_contiguous():
                args = args[:i] + (a.contiguous(),) + args[i + 1:]
        return args

    def _check_devices(self, args) -> None:
        device = first = None
        for i in self._tensor_idx:
            t = args[i]
            if t is None:
                continue
            name = self._params[i].name
            if not isinstance(t, _Tensor):
                raise TypeError(f"{self.qualname}: {name} must be a torch.Tensor, got {type(t).__name__}")
            if not t.is_cuda:
                raise ValueError(f"{self.qualname}: {name} must be a CUDA tensor, got a tensor on {t.device}; move it "
                                 f"with .cuda() first")
            if device is None:
                device, first = t.device, name
            elif t.device != device:
                raise ValueError(f"{self.qualname}: {name} must be on the same device as {first} ({device}), got "
                                 f"{t.device}")

    def _cast(self, args):
        """The autocast policy applied to ``args`` (CUDA floating tensors only, as torch's)."""
        tensors = [args[i] for i in self._tensor_idx if isinstance(args[i], _Tensor)]
        if self.autocast == "lower":
            dtype = _autocast_dtype()
        elif self.autocast == "fp32":
            dtype = torch.float32
        else:   # promote: the widest floating dtype among the inputs
            floats = [t.dtype for t in tensors if t.dtype in _FLOATING and t.is_cuda]
            if not floats:
                return args
            dtype = floats[0]
            for d in floats[1:]:
                dtype = torch.promote_types(dtype, d)
        return tuple(a.to(dtype) if i in self._tensor_idx and isinstance(a, _Tensor) and a.is_cuda
                     and a.dtype in _FLOATING and a.dtype != torch.float64 else a for i, a in enumerate(args))

    # -- out= and in place ------------------------------------------------------------------------

    def call_out(self, args, out):
        """``out=``: torch's rules (checks.out: type, dtype, shape, device, overlap, autograd;
        a wrongly shaped ``out`` is resized, with torch's warning when it had elements)."""
        if not isinstance(out, _Tensor):
            raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
        if (type(out) is not _Tensor and type(out) is not _Parameter) or _dispatch_modes() or _functorch_active():
            self.out_overload(out, *args)
            return out
        self._out_impl(out, *args)
        return out

    def call_inplace(self, args):
        """The in-place form: overwrite and return input ``self.inplace``. On a tensor autograd
        tracks it is recorded as torch records an in-place op (the functional op, then copy_);
        on a leaf that requires grad it raises torch's error."""
        if self.autocast is not None and _autocast_on():
            args = self._cast(args)
        x = args[self._by_name[self.inplace].index]
        if _is_compiling():
            self.out_overload(x, *args)
            return x
        if not isinstance(x, _Tensor):
            raise TypeError(f"{self.inplace} must be a torch.Tensor, got {type(x).__name__}")
        tracked = _grad_enabled() and any(isinstance(args[i], _Tensor) and args[i].requires_grad
                                          for i in self._tensor_idx)
        if tracked or (type(x) is not _Tensor and type(x) is not _Parameter) or _functorch_active() or _fwd_ad._current_level >= 0:
            if x.requires_grad and x.is_leaf and _grad_enabled():
                raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
            return x.copy_(self._call(args))
        ref = self._meta(args)
        if ref.shape != x.shape:
            raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast shape {list(ref.shape)}")
        inputs = tuple(args[i] for i in self._tensor_idx if isinstance(args[i], _Tensor) and args[i] is not x)
        checks.out(x, ref, self._device((x,) + inputs), self.name, inputs)
        self._launch_into(args, x, ref)
        return x

    def _meta(self, args):
        """The output the rule gives for ``args`` (its checks included): on the meta device for
        a ``like`` rule, else as the rule allocates it."""
        if isinstance(self.output, like):
            t = args[self.output.index]
            return torch.empty_like(t, device="meta", dtype=self.output.dtype or t.dtype)
        return self.output(*args)

    def _device(self, tensors) -> int | None:
        """The CUDA device index of the first CUDA tensor of ``tensors`` (None: there is none),
        where an ``out`` must be: a kernel never writes another device's memory, or the host's."""
        for t in tensors:
            if t.is_cuda:
                return t.get_device()
        return None

    def _launch_into(self, args, out, ref) -> None:
        if self.checks_devices:
            self._check_devices(args)
        if out.dtype != ref.dtype:
            raise TypeError(f"out must have dtype {ref.dtype}, got {out.dtype}")
        # computed aside, then copied, where the launcher cannot write ``out`` itself: ``out`` in a
        # layout it does not take, or over an input of a kernel that reads other elements than
        # the one it writes (a GEMM's tiles; torch's mm out= over an input gives wrong values,
        # pytorch#13892)
        aside = not (self.any_out_layout or (out.is_contiguous() and ref.is_contiguous())
                     or out.stride() == ref.stride()) or \
            (not self.elementwise and any(isinstance(args[i], _Tensor) and checks.shares_memory(out, args[i])
                                          for i in self._tensor_idx))
        if aside:
            out.copy_(self.impl(*args))
        else:
            self.launch(*(self._contiguous(args) if self.contiguous else args), out=out)
            _bump_version(out)

    # -- registration -----------------------------------------------------------------------------

    def _register(self) -> None:
        lib = _library(self.namespace)
        name, out_name = self.name, self.name + "_out"
        lib.define(name + self.schema)
        lib.define(out_name + self._out_schema)
        packet, out_packet = getattr(getattr(torch.ops, self.namespace), name), \
            getattr(getattr(torch.ops, self.namespace), out_name)
        self.overload, self.out_overload = packet.default, out_packet.default
        # (the Python dispatcher may leave out trailing arguments at their defaults: _full)
        for key in ("CUDA", "CPU"):   # CPU: our typed error names the argument on the wrong device
            lib.impl(name, lambda *a, **k: self.impl(*self._full(a, k)), key)
            lib.impl(out_name, lambda out, *a, **k: self._out_impl(out, *self._full(a, k)), key)
        torch.library.register_fake(self.qualname, lambda *a, **k: self.output(*self._full(a, k)), lib=lib)
        torch.library.register_fake(f"{self.namespace}::{out_name}",
                                    lambda out, *a, **k: self._out_fake(out, *self._full(a, k)), lib=lib)
        lib.impl(name, self._autograd_kernel, "Autograd")
        lib.impl(out_name, self._out_autograd_kernel, "Autograd")
        lib.impl(out_name, self._inplace_or_view_kernel, "ADInplaceOrView", with_keyset=True)
        if self.autocast is not None:
            lib.impl(name, self._autocast_kernel, "AutocastCUDA", with_keyset=True)
            lib.impl(out_name, self._autocast_out_kernel, "AutocastCUDA", with_keyset=True)

    def _out_impl(self, out, *args):
        """``out=``, eager or through ``torch.ops.ns.name_out``: ``out`` resized to the rule's
        shape (torch's warning where it had elements), checked (checks.out), written."""
        ref = self._meta(args)
        if out.shape != ref.shape:
            _resize_out(out, ref.shape)
        inputs = tuple(args[i] for i in self._tensor_idx if isinstance(args[i], _Tensor))
        checks.out(out, ref, self._device(inputs), self.name, inputs)
        self._launch_into(args, out, ref)

    def _out_fake(self, out, *args):
        ref = self.output(*args)
        if out.shape != ref.shape or out.dtype != ref.dtype:
            raise RuntimeError(f"{self.qualname}_out: out must have shape {tuple(ref.shape)} and dtype {ref.dtype}, "
                               f"got {tuple(out.shape)} {out.dtype}")
        return None

    def _autograd_kernel(self, *args, **kwargs):
        args = self._full(args, kwargs)
        if _grad_enabled() and any(isinstance(args[i], _Tensor) and args[i].requires_grad for i in self._tensor_idx):
            return self._dispatch_fn.apply(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return self.overload(*args)

    def _out_autograd_kernel(self, out, *args, **kwargs):
        args = (out,) + self._full(args, kwargs)
        if _grad_enabled() and any(isinstance(a, _Tensor) and a.requires_grad for a in args):
            raise RuntimeError(f"{self.name}(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad.")
        with torch._C._AutoDispatchBelowAutograd():
            return self.out_overload(*args)

    def _inplace_or_view_kernel(self, keyset, out, *args, **kwargs):
        args = (out,) + self._full(args, kwargs)
        self.out_overload.redispatch(keyset & torch._C._after_ADInplaceOrView_keyset, *args)
        _bump_version(args[0])

    def _autocast_kernel(self, keyset, *args, **kwargs):
        args = self._full(args, kwargs)
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCUDA)):
            return self.overload(*self._cast(args))

    def _autocast_out_kernel(self, keyset, out, *args, **kwargs):
        args = (out,) + self._full(args, kwargs)
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCUDA)):
            return self.out_overload(args[0], *self._cast(args[1:]))

    # -- autograd rules (through the Function classes) --------------------------------------------

    def _setup(self, ctx, inputs, output) -> None:
        values, tensors, slots = {}, [], {}
        for n in self._save:
            v = output if n == "out" else inputs[self._by_name[n].index]
            if isinstance(v, _Tensor):
                slots[n] = len(tensors)
                tensors.append(v)
            else:
                values[n] = v
        ctx.cupy_ops_values, ctx.cupy_ops_slots = values, slots
        if tensors:
            ctx.save_for_backward(*tensors)
            if self._jvp is not None and (_fwd_ad._current_level >= 0 or _functorch_active()):
                ctx.save_for_forward(*tensors)   # only forward AD reads them (and it costs a call)

    def _context(self, ctx, needs) -> Context:
        values = dict(ctx.cupy_ops_values)
        if ctx.cupy_ops_slots:
            saved = ctx.saved_tensors
            for n, i in ctx.cupy_ops_slots.items():
                values[n] = saved[i]
        return Context(values, needs)

    def _run_backward(self, ctx, grads):
        if self._backward is None:
            raise RuntimeError(f"op {self.qualname} has no backward rule: declare one with @{self.name}.backward, or "
                               f"call it on tensors that do not require grad (torch.no_grad(), .detach())")
        needs = {p.name: ctx.needs_input_grad[p.index] for p in self._params}
        got = self._backward(self._context(ctx, needs), *grads)
        got = got if isinstance(got, tuple) else (got,)
        if len(got) != self._n:
            raise RuntimeError(f"the backward of op {self.qualname} returned {len(got)} gradients; it must return one "
                               f"per input ({self._n}: {', '.join(p.name for p in self._params)}), None where there "
                               f"is none")
        return got

    def _run_jvp(self, ctx, tangents):
        if self._jvp is None:
            raise RuntimeError(f"op {self.qualname} has no forward-mode AD rule: declare one with @{self.name}.jvp "
                               f"(torch.autograd.forward_ad and torch.func.jvp need it)")
        needs = {p.name: tangents[p.index] is not None for p in self._params}
        return self._jvp(self._context(ctx, needs), *tangents)

    def _run_vmap(self, info, in_dims, args):
        if self._vmap is None:
            raise RuntimeError(f"op {self.qualname} has no vmap rule: declare one with @{self.name}.vmap "
                               f"(torch.func.vmap needs it)")
        return self._vmap(info, in_dims, *args)

    def __repr__(self) -> str:
        return f"<cupy_ops op {self.qualname}{self.schema}>"


def _resize_out(out: torch.Tensor, shape) -> None:
    """torch's resize of a wrongly shaped ``out``: silent when it had no elements, else warned."""
    if out.numel() != 0:
        warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, which "
                      f"does not match the required output shape {list(shape)}. This behavior is deprecated, and in a "
                      f"future PyTorch release outputs will not be resized unless they have zero elements. You can "
                      f"explicitly reuse an out tensor t by resizing it, inplace, to zero elements with t.resize_(0).",
                      UserWarning, stacklevel=5)   # the caller of Op.__call__ (__call__, call_out, _out_impl)
    out.resize_(shape)


def _functions(op: Op):
    """The op's two ``autograd.Function`` classes: ``Eager`` (forward = the launch, for the eager
    path) and ``Dispatch`` (forward = the op below autograd, for the registered Autograd kernel)."""

    class Base(torch.autograd.Function):
        @staticmethod
        def setup_context(ctx, inputs, output):
            op._setup(ctx, inputs, output)

        @staticmethod
        def backward(ctx, *grads):
            return op._run_backward(ctx, grads)

        @staticmethod
        def jvp(ctx, *tangents):
            return op._run_jvp(ctx, tangents)

        @staticmethod
        def vmap(info, in_dims, *args):
            return op._run_vmap(info, in_dims, args)

    class Eager(Base):
        @staticmethod
        def forward(*args):
            return op.impl(*args)

    class Dispatch(Base):
        @staticmethod
        def forward(*args):
            with torch._C._AutoDispatchBelowAutograd():
                return op.overload(*args)

    Eager.__name__ = Eager.__qualname__ = f"{op.name}_eager"
    Dispatch.__name__ = Dispatch.__qualname__ = f"{op.name}_dispatch"
    return Eager, Dispatch


def op(qualname: str, *, output, autocast: str | None = None, inplace: str | None = None, contiguous: bool = True,
       any_out_layout: bool = False, elementwise: bool = False, check_devices: bool = True):
    """Declare a torch op from its launcher (a decorator; see the module's docstring).

    Args:
        qualname: ``"namespace::name"``; the op is ``torch.ops.namespace.name``, its mutating
            form (``out=``, in place) ``torch.ops.namespace.name_out``.
        output: ``cupy_ops.like("x")`` or a function of the inputs returning the empty output
            (``lambda a, b: a.new_empty(a.shape[0], b.shape[1])``): it allocates the real
            output and, on fake tensors, is the fake implementation; it may raise for bad
            arguments (it sees every call, eager and traced).
        autocast: under ``torch.autocast("cuda")``: None (the op runs in its inputs' dtypes, as
            torch's elementwise ops), ``"lower"`` (floating inputs cast to the autocast dtype, as
            matmul), ``"fp32"`` or ``"promote"`` (to the widest floating input dtype).
        inplace: the input that the in-place form (``Op.call_inplace``) overwrites, or None.
        contiguous: tensor inputs reach the launcher contiguous (kernels see raw memory).
        any_out_layout: the launcher writes an ``out`` of any strides (else ``out=`` with other
            strides than the rule's is written through a temporary).
        elementwise: each output element is computed from the inputs' elements at its own
            index only, so ``out=`` (or in place) over an input launches directly; otherwise an
            ``out`` sharing memory with an input is written through a temporary.
        check_devices: tensor inputs must be CUDA tensors on one device (``ValueError`` naming
            the argument); False where the output rule checks them itself.
    The launcher: ``def launch(inputs..., *, out) -> None``, inputs annotated ``torch.Tensor``,
    ``Optional[torch.Tensor]``, ``float``, ``int``, ``bool`` or ``str``.
    Returns:
        An ``Op``: call it as the launcher without ``out`` (``out=`` optional); declare its
        ``backward``, ``jvp`` and ``vmap`` with its decorators.
    Raises:
        ValueError / TypeError: a malformed name, annotation or rule.
    """
    def declare(launch) -> Op:
        return Op(qualname, launch, output=output, autocast=autocast, inplace=inplace, contiguous=contiguous,
                  any_out_layout=any_out_layout, elementwise=elementwise, checks_devices=check_devices)
    return declare
