"""An op's registration with torch's dispatcher: its schema and mutating ``_out`` form defined
in the namespace's library, the fake (the output rule), and the kernels of the dispatch keys
(CUDA / CPU, Autograd, ADInplaceOrView, AutocastCUDA). A mixin of ``Op``."""

from __future__ import annotations

import threading

import torch

from .. import checks
from .eager import Tensor, grad_enabled, increment_version

_libraries: dict[str, torch.library.Library] = {}
_lib_lock = threading.Lock()


def _library(namespace: str) -> torch.library.Library:
    with _lib_lock:
        lib = _libraries.get(namespace)
        if lib is None:
            lib = _libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
        return lib


class Registration:
    """``Op``'s registered forms (``self`` is the ``Op``)."""

    def _register(self) -> None:
        lib = _library(self.namespace)
        name, out_name = self.name, self.name + "_out"
        lib.define(name + self.schema)
        lib.define(out_name + self._out_schema)
        packet, out_packet = (
            getattr(getattr(torch.ops, self.namespace), name),
            getattr(getattr(torch.ops, self.namespace), out_name),
        )
        self.overload, self.out_overload = packet.default, out_packet.default
        # (the Python dispatcher may leave out trailing arguments at their defaults: _full)
        for key in ("CUDA", "CPU"):  # CPU: our typed error names the argument on the wrong device
            lib.impl(name, lambda *a, **k: self.impl(*self._full(a, k)), key)
            lib.impl(out_name, lambda out, *a, **k: self._out_impl(out, *self._full(a, k)), key)
        torch.library.register_fake(self.qualname, lambda *a, **k: self.output(*self._full(a, k)), lib=lib)
        torch.library.register_fake(
            f"{self.namespace}::{out_name}", lambda out, *a, **k: self._out_fake(out, *self._full(a, k)), lib=lib
        )
        lib.impl(name, self._autograd_kernel, "Autograd")
        lib.impl(out_name, self._out_autograd_kernel, "Autograd")
        lib.impl(out_name, self._inplace_or_view_kernel, "ADInplaceOrView", with_keyset=True)
        if self.autocast is not None:
            # the functional op only: torch autocasts no out= or in-place call (its Autocast
            # keys fall through for them), so ``name_out`` computes in the dtypes it is given
            lib.impl(name, self._autocast_kernel, "AutocastCUDA", with_keyset=True)

    def _out_impl(self, out, *args):
        """``out=``, eager or through ``torch.ops.ns.name_out``: ``out`` resized to the rule's
        shape (torch's warning where it had elements), checked (checks.out), written."""
        ref = self._meta(args)
        if out.shape != ref.shape:
            checks.resize_out(out, ref.shape)
        inputs = tuple(args[i] for i in self._tensor_idx if isinstance(args[i], Tensor))
        checks.out(out, ref, self._device(inputs), self.name, inputs, cast=self.cast_out)
        self._launch_into(args, out, ref)

    def _out_fake(self, out, *args):
        ref = self.output(*args)
        if self.cast_out and out.shape == ref.shape:
            checks.out_dtype(out, ref.dtype)
        elif out.shape != ref.shape or out.dtype != ref.dtype:
            raise RuntimeError(
                f"{self.qualname}_out: out must have shape {tuple(ref.shape)} and dtype {ref.dtype}, "
                f"got {tuple(out.shape)} {out.dtype}"
            )
        return None

    def _autograd_kernel(self, *args, **kwargs):
        args = self._full(args, kwargs)
        if grad_enabled() and any(isinstance(args[i], Tensor) and args[i].requires_grad for i in self._tensor_idx):
            return self._dispatch_fn.apply(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return self.overload(*args)

    def _out_autograd_kernel(self, out, *args, **kwargs):
        args = (out,) + self._full(args, kwargs)
        if grad_enabled() and any(isinstance(a, Tensor) and a.requires_grad for a in args):
            raise checks.out_requires_grad(self.name)
        with torch._C._AutoDispatchBelowAutograd():
            return self.out_overload(*args)

    def _inplace_or_view_kernel(self, keyset, out, *args, **kwargs):
        args = (out,) + self._full(args, kwargs)
        self.out_overload.redispatch(keyset & torch._C._after_ADInplaceOrView_keyset, *args)
        increment_version(args[0])

    def _autocast_kernel(self, keyset, *args, **kwargs):
        args = self._full(args, kwargs)
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCUDA)):
            return self.overload(*self._cast(args))
