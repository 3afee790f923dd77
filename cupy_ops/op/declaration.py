"""``Op``: one declaration's torch op (schema, fake, autograd, forward AD, vmap, autocast,
``out=`` and in place) and its eager path."""

from __future__ import annotations

import inspect
import typing

import numpy as np
import torch

from .. import checks
from .direct import entry
from .eager import (
    AUTOCAST_POLICIES,
    FLOATING,
    Parameter,
    Tensor,
    autocast_dtype,
    autocast_on,
    dispatch_modes,
    functorch_active,
    fwd_ad,
    grad_enabled,
    increment_version,
    is_compiling,
    jit_tracing,
)
from .functions import functions
from .registration import Registration
from .rules import Rules
from .schema import Param, like, schema_type

_eager_out_fn = None
# what an op's generated call (direct.entry) is written from
_CALL_FROM = frozenset({"launch", "fast", "output", "check_devices", "contiguous", "autocast", "_eager_apply"})
_declared: dict[str, Op] = {}


def _eager_out():
    """``Op.call_out`` kept out of torch.compile's graph (it runs eagerly: a graph break)."""
    global _eager_out_fn
    if _eager_out_fn is None:
        _eager_out_fn = torch.compiler.disable(lambda op, args, out: op.call_out(args, out), recursive=True)
    return _eager_out_fn


class Op(Registration, Rules):
    """A torch op declared once (see the module's docstring and ``op``). Call it like the
    launcher without ``out``; ``out=`` (a tensor to write into) where the op has one output.

    Attributes: ``qualname`` ("ns::name"), ``schema``, ``overload`` (the registered
    ``torch.ops.ns.name.default``), ``out_overload`` (``name_out``, the mutating form) and
    ``inplace`` (the name of the input an in-place call overwrites, or None).
    """

    def __init__(
        self,
        qualname: str,
        launch,
        *,
        output,
        autocast=None,
        inplace: str | None = None,
        contiguous: bool = True,
        any_out_layout: bool = False,
        elementwise: bool = False,
        cast_out: bool = False,
        check_devices: bool = True,
        fast=None,
        doc=None,
    ):
        if not isinstance(qualname, str) or qualname.count("::") != 1:
            raise ValueError(f"an op's name is 'namespace::name', got {qualname!r}")
        ns, name = qualname.split("::")
        if not ns.isidentifier() or not name.isidentifier():
            raise ValueError(f"an op's namespace and name must be identifiers, got {qualname!r}")
        if autocast not in AUTOCAST_POLICIES:
            raise ValueError(f"autocast must be one of {AUTOCAST_POLICIES}, got {autocast!r}")
        self.qualname, self.name, self.namespace = qualname, name, ns
        self.launch = launch
        self.autocast = autocast
        self.contiguous = contiguous
        self.any_out_layout = any_out_layout
        self.elementwise = elementwise
        self.cast_out = cast_out
        self.fast = fast
        self.check_devices = check_devices
        self._read_signature(launch)
        self.inplace = inplace
        if inplace is not None and inplace not in self._by_name:
            raise ValueError(f"op {qualname}: inplace={inplace!r} is not one of its inputs")
        if isinstance(output, like):
            if output.name not in self._by_name or not self._by_name[output.name].tensor:
                raise ValueError(f"op {qualname}: like({output.name!r}) names no tensor input")
            output = like(output.name, dtype=output.dtype)  # this op's own: one rule may serve several ops
            output.index = self._by_name[output.name].index
            output.memory_format = torch.contiguous_format if contiguous else torch.preserve_format
        elif not callable(output):
            raise TypeError(
                f"op {qualname}: output must be cupy_ops.like(name) or a function of the inputs that "
                f"returns the empty output, got {output!r}"
            )
        self.output = output
        self._backward = self._jvp = self._vmap = None
        self._save: tuple = ()
        self._save_at: tuple = ()
        self._register()
        _declared[qualname] = self
        self._eager_fn, self._dispatch_fn = functions(self)
        self._eager_apply = super(torch.autograd.Function, self._eager_fn).apply
        # The functional form on ``args``, a tuple of every input in order (defaults filled in,
        # no ``out``): ``op(*args)`` without binding, the eager path the built-ins' functions take
        # (under torch.compile call the op itself). Generated for this op (direct.entry): the
        # common case written out, anything else through ``_call_any``.
        self.call = entry(self, self._call_any)
        self.__doc__ = doc or launch.__doc__
        self.__name__ = self.__qualname__ = name
        self.__module__ = getattr(launch, "__module__", __name__)
        self.__signature__ = inspect.Signature(
            [
                inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=p.default)
                for p in self._params
            ]
            + [inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)]
        )

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        # the generated call is written from these: one assigned later (a launcher swapped for
        # another) writes it again, so that every path of the op reads the same
        if name in _CALL_FROM and "call" in self.__dict__:
            object.__setattr__(self, "call", entry(self, self._call_any))

    @staticmethod
    def declared(qualname: str) -> Op:
        """The ``Op`` declared as ``qualname`` (``"cupy_ops::matmul"``, ``"mylib::scale"``) in this
        process: its ``out=`` and in-place forms, rules and registered overloads. ``KeyError``
        naming the ops declared where there is none."""
        op = _declared.get(qualname)
        if op is None:
            raise KeyError(f"no op {qualname!r} is declared in this process (declared: {', '.join(sorted(_declared))})")
        return op

    # -- declaration ------------------------------------------------------------------------------

    def _read_signature(self, launch) -> None:
        sig = inspect.signature(launch)
        try:
            hints = typing.get_type_hints(launch)
        except Exception:  # noqa: BLE001  (unresolvable string annotations: reported per parameter)
            hints = {}
        params, seen_out = [], False
        for p in sig.parameters.values():
            if p.name == "out" and p.kind is inspect.Parameter.KEYWORD_ONLY:
                seen_out = True
                continue
            if p.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.POSITIONAL_ONLY):
                raise TypeError(
                    f"op {self.qualname}: the launcher's inputs are positional parameters and its output "
                    f"the keyword-only `out`; got {p.kind.description} parameter {p.name!r}"
                )
            ann = hints.get(p.name, p.annotation)
            if ann is inspect.Parameter.empty:
                raise TypeError(f"op {self.qualname}: parameter {p.name!r} of the launcher has no type annotation")
            type_, tensor = schema_type(self.qualname, p.name, ann)
            params.append(Param(p.name, type_, tensor, p.default, len(params)))
        if not seen_out:
            raise TypeError(
                f"op {self.qualname}: the launcher takes its output as a keyword-only parameter `out` "
                f"(def launch(x: torch.Tensor, ..., *, out: torch.Tensor) -> None)"
            )
        self._params = params
        self._by_name = {p.name: p for p in params}
        self._tensor_idx = tuple(p.index for p in params if p.tensor)
        self._number_idx = tuple(p.index for p in params if p.type in ("Scalar", "SymInt", "bool"))
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
        # (name, input index; -1: the output), read by every forward that autograd records
        self._save_at = tuple((n, -1 if n == "out" else self._by_name[n].index) for n in self._save)

    # -- the eager path ---------------------------------------------------------------------------

    def __call__(self, *args, out=None, **kwargs):
        if kwargs or len(args) != self._n:
            args = self._bind(args, kwargs)
        if is_compiling():
            for i in self._number_idx:
                # dynamo makes a numpy scalar a 0-dim tensor (it answers isinstance(s, np.ndarray)),
                # which a number of the schema takes not: say so, naming the op and the argument
                if isinstance(args[i], np.ndarray):
                    raise TypeError(
                        f"{self.qualname}: {self._params[i].name} is a numpy scalar, which torch.compile "
                        f"traces as a tensor and the op's number argument does not take; pass a Python "
                        f"number (float(s) outside the compiled function)"
                    )
            if out is not None:
                if out.shape != self._meta(args).shape:
                    # resized as torch resizes it, eagerly: a graph break, as torch.compile
                    # breaks for torch's own out= of another shape (an error under fullgraph=True)
                    return _eager_out()(self, args, out)
                self.out_overload(out, *args)
                return out
            return self.overload(*args)
        if out is not None:
            return self.call_out(args, out)
        return self.call(args)

    def _call_any(self, args):
        """``call`` for any arguments (``call`` itself writes out the common case): the
        autocast cast, the checks of every tensor slot, the modes, then the launch or the
        autograd.Function."""
        if self.autocast is not None and autocast_on():
            args = self._cast(args)
        grad = False
        for i in self._tensor_idx:
            t = args[i]
            if type(t) is not Tensor and type(t) is not Parameter:
                if t is None and i in self._optional:
                    continue
                return self._call_special(args, i)
            if t.requires_grad:
                grad = True
            if t.is_neg() or t.is_conj():
                return self.call(self._resolved(args))
        if dispatch_modes() or functorch_active() or fwd_ad._current_level >= 0 or jit_tracing():
            return self._call_special(args, None)
        if grad and grad_enabled():
            return self._eager_apply(*args)
        return self.impl(*args)

    def _call_special(self, args, i):
        """``call`` off the hot path: a non-tensor where a tensor goes (``TypeError``; a
        ``torch.fx`` Proxy: the registered op, which the trace records), a tensor subclass or a
        dispatch mode (the registered op), a torch.func transform or
        forward AD (the autograd.Function, whose rules they use)."""
        if i is not None and not isinstance(args[i], Tensor):
            if hasattr(type(args[i]), "__torch_function__"):  # an FX Proxy: the trace records the op
                return self.overload(*args)
            raise TypeError(f"{self._params[i].name} must be a torch.Tensor, got {type(args[i]).__name__}")
        if i is not None or dispatch_modes() or jit_tracing():  # (torch.jit.trace records the op)
            return self.overload(*args)
        if functorch_active():
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
        """The real implementation: the op's ``fast`` path where it takes the call, else check,
        allocate by the output rule, launch."""
        if self.fast is not None:
            out = self.fast(*args)
            if out is not None:
                return out
        out = self.output(*args)
        if self.check_devices:
            self._check_devices(args)
        if self.contiguous:
            args = self._contiguous(args)
        self.launch(*args, out=out)
        return out

    def _resolved(self, args):
        """``args`` with torch's lazy conjugation and negation resolved (``z.conj()``,
        ``z.conj().imag``: memory holding the values before it, which a kernel would read as
        they are), as torch's own ops resolve them (differentiable: autograd sees
        ``resolve_conj`` / ``resolve_neg``)."""
        for i in self._tensor_idx:
            a = args[i]
            # (anything else: the checks' typed errors)
            if isinstance(a, Tensor) and (a.is_neg() or a.is_conj()):
                args = args[:i] + (a.resolve_conj().resolve_neg(),) + args[i + 1 :]
        return args

    def _contiguous(self, args):
        # (a loop over the tensor slots, no generator: this runs on every eager call)
        for i in self._tensor_idx:
            a = args[i]
            if a is not None and not a.is_contiguous():
                args = args[:i] + (a.contiguous(),) + args[i + 1 :]
        return args

    def _check_devices(self, args) -> None:
        # the common case, every tensor a plain one on one CUDA device: one C call a tensor
        # (``t.device`` builds a torch.device); anything else is named by ``_device_error``
        first = -1
        for i in self._tensor_idx:
            t = args[i]
            if t is None:
                continue
            if type(t) is not Tensor and type(t) is not Parameter:
                return self._device_error(args)
            d = t.get_device()
            if d < 0 or (first >= 0 and d != first):
                return self._device_error(args)
            first = d

    def _device_error(self, args) -> None:
        device = first = None
        for i in self._tensor_idx:
            t = args[i]
            if t is None:
                continue
            name = self._params[i].name
            if not isinstance(t, Tensor):
                raise TypeError(f"{self.qualname}: {name} must be a torch.Tensor, got {type(t).__name__}")
            if not t.is_cuda:
                raise ValueError(
                    f"{self.qualname}: {name} must be a CUDA tensor, got a tensor on {t.device}; move it "
                    f"with .cuda() first"
                )
            if device is None:
                device, first = t.device, name
            elif t.device != device:
                raise ValueError(
                    f"{self.qualname}: {name} must be on the same device as {first} ({device}), got {t.device}"
                )

    def _cast(self, args):
        """The autocast policy applied to ``args`` (CUDA floating tensors only, as torch's)."""
        tensors = [args[i] for i in self._tensor_idx if isinstance(args[i], Tensor)]
        if self.autocast == "lower":
            dtype = autocast_dtype()
        elif self.autocast == "fp32":
            dtype = torch.float32
        else:  # promote: the widest floating dtype among the inputs
            floats = [t.dtype for t in tensors if t.dtype in FLOATING and t.is_cuda]
            if not floats:
                return args
            dtype = floats[0]
            for d in floats[1:]:
                dtype = torch.promote_types(dtype, d)
        return tuple(
            a.to(dtype)
            if i in self._tensor_idx
            and isinstance(a, Tensor)
            and a.is_cuda
            and a.dtype in FLOATING
            and a.dtype != torch.float64
            else a
            for i, a in enumerate(args)
        )

    # -- out= and in place ------------------------------------------------------------------------

    def call_out(self, args, out):
        """``out=``: torch's rules (checks.out: type, dtype, shape, device, overlap, autograd;
        a wrongly shaped ``out`` is resized, with torch's warning when it had elements)."""
        if not isinstance(out, Tensor):
            raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
        if (type(out) is not Tensor and type(out) is not Parameter) or dispatch_modes() or functorch_active():
            self.out_overload(out, *args)
            return out
        self._out_impl(out, *args)
        return out

    def call_inplace(self, args):
        """The in-place form: overwrite and return input ``self.inplace``. On a tensor autograd
        tracks it is recorded as torch records an in-place op (the functional op, then copy_);
        on a leaf that requires grad it raises torch's error. Not autocast: torch casts the
        inputs of out-of-place calls only (an in-place call under autocast computes in the
        dtypes it is given, as ``x.addmm_`` does)."""
        x = args[self._by_name[self.inplace].index]
        if is_compiling():
            self.out_overload(x, *args)
            return x
        if not isinstance(x, Tensor):
            raise TypeError(f"{self.inplace} must be a torch.Tensor, got {type(x).__name__}")
        tracked = grad_enabled() and any(
            isinstance(args[i], Tensor) and args[i].requires_grad for i in self._tensor_idx
        )
        if (
            tracked
            or (type(x) is not Tensor and type(x) is not Parameter)
            or functorch_active()
            or fwd_ad._current_level >= 0
        ):
            if x.requires_grad and x.is_leaf and grad_enabled():
                raise RuntimeError(checks.LEAF_IN_PLACE)
            return x.copy_(self.call(args))
        ref = self._meta(args)
        if ref.shape != x.shape:
            raise checks.broadcast_mismatch(x.shape, ref.shape)
        inputs = tuple(args[i] for i in self._tensor_idx if isinstance(args[i], Tensor) and args[i] is not x)
        checks.out(x, ref, self._device((x,) + inputs), self.name, inputs, cast=self.cast_out)
        self._launch_into(args, x, ref)
        return x

    def _meta(self, args):
        """The output the rule gives for ``args`` (its checks included): on the meta device for
        a ``like`` rule, else as the rule allocates it."""
        if isinstance(self.output, like):
            return self.output(*args, device="meta")
        return self.output(*args)

    def _device(self, tensors) -> int | None:
        """The CUDA device index of the first CUDA tensor of ``tensors`` (None: there is none),
        where an ``out`` must be: a kernel never writes another device's memory, or the host's."""
        for t in tensors:
            if t.is_cuda:
                return t.get_device()
        return None

    def _launch_into(self, args, out, ref) -> None:
        if self.check_devices:
            self._check_devices(args)
        args = self._resolved(args)
        # a ``cast_out`` op's wider out (checks.out_dtype): cast on the copy; an ``out`` with the
        # negative or conjugate bit (a lazy view): copy_ writes through it, as torch's out= does
        if out.dtype != ref.dtype or out.is_neg() or out.is_conj():
            out.copy_(self.impl(*args))
            return
        # computed aside, then copied, where the launcher cannot write ``out`` itself: ``out`` in a
        # layout it does not take; or, for a kernel that is not elementwise, ``out`` off 16 bytes
        # (a GEMM's vector and TMA stores take a fresh tensor's alignment: a misaligned store
        # faults) or over an input of a kernel that reads other elements than the one it writes
        # (a GEMM's tiles; torch's mm out= over an input gives wrong values, pytorch#13892)
        aside = not (
            self.any_out_layout or (out.is_contiguous() and ref.is_contiguous()) or out.stride() == ref.stride()
        ) or (
            not self.elementwise
            and (
                out.data_ptr() & 15
                or any(isinstance(args[i], Tensor) and checks.shares_memory(out, args[i]) for i in self._tensor_idx)
            )
        )
        if aside:
            out.copy_(self.impl(*args))
        else:
            self.launch(*(self._contiguous(args) if self.contiguous else args), out=out)
            increment_version(out)

    def __repr__(self) -> str:
        return f"<cupy_ops op {self.qualname}{self.schema}>"
