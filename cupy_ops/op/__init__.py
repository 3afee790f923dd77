"""``cupy_ops.op``: one declaration turns a kernel launch into a torch op.

- ``eager``: when a call launches straight away; the autograd and autocast state read per call;
- ``schema``: the output rule (``like``), parameters' schema text, the rules' ``Context``;
- ``declaration``: ``Op``, the op built from one declaration: its calls, its registration with
  torch's dispatcher (``registration``) and its autograd rules (``rules``).
- ``direct``: an op's eager call generated for its parameters (the common case written out).
"""

from __future__ import annotations

from .declaration import Op
from .eager import bump_version, needs_grad, plain_eager
from .schema import Context, like

__all__ = ["Context", "Op", "bump_version", "like", "needs_grad", "op", "plain_eager"]


def op(
    qualname: str,
    *,
    output,
    autocast: str | None = None,
    inplace: str | None = None,
    contiguous: bool = True,
    any_out_layout: bool = False,
    elementwise: bool = False,
    cast_out: bool = False,
    check_devices: bool = True,
    fast=None,
):
    """Declare a torch op from its launcher: a decorator that turns a kernel launch into a torch op.

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
    ``Tensor``, ``Optional[Tensor]``, ``float`` (a ``Scalar``: torch.compile traces fresh values
    symbolically), ``int``, ``bool``, ``str``, with defaults), a
    custom op in the chosen namespace, its fake implementation (the ``output`` rule: it allocates
    the real output and the fake one alike), autograd from the declared backward (to any order
    when the backward is built of differentiable ops), forward-mode AD from a declared ``jvp`` and
    ``torch.func.vmap`` from a declared ``vmap`` (a clear error naming the op where none is), the
    autocast policy (of the functional form: as in torch, no ``out=`` or in-place call is
    autocast), and the ``out=`` and in-place forms as mutating ops (``name_out``), which
    torch.compile functionalizes.

    One eager path: a call on plain CUDA tensors with nothing to record goes straight to the
    launcher; with autograd, forward AD or a torch.func transform it runs as an
    ``autograd.Function`` (no dispatcher, no ``torch._dynamo`` import); under torch.compile, a
    dispatch mode (fake tensors) or tensor subclasses it calls the registered op, which carries the
    same rules (docs/design.md#the-op-layer).

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
        cast_out: ``out=`` may be of any dtype the result casts to (a float16 result into a float32
            ``out``), written through a temporary, as torch's ``div`` takes it; otherwise its dtype
            must be the result's, as torch's ``clamp_min`` and ``mm`` require.
        check_devices: tensor inputs must be CUDA tensors on one device (``ValueError`` naming
            the argument); False where the output rule checks them itself.
        fast: ``fn(*inputs) -> output or None``, tried first by every call that launches
            (functional, no ``out``): a per-signature cache that allocates and launches a call
            it has seen checked before, or checks it and fills itself; None leaves the call to
            the output rule and the launcher.
    The launcher: ``def launch(inputs..., *, out) -> None``, inputs annotated ``torch.Tensor``,
    ``Optional[torch.Tensor]``, ``float``, ``int``, ``bool`` or ``str``.
    Returns:
        An ``Op``: call it as the launcher without ``out`` (``out=`` optional); declare its
        ``backward``, ``jvp`` and ``vmap`` with its decorators.
    Raises:
        ValueError / TypeError: a malformed name, annotation or rule.
    """

    def declare(launch) -> Op:
        return Op(
            qualname,
            launch,
            output=output,
            autocast=autocast,
            inplace=inplace,
            contiguous=contiguous,
            any_out_layout=any_out_layout,
            elementwise=elementwise,
            cast_out=cast_out,
            check_devices=check_devices,
            fast=fast,
        )

    return declare
