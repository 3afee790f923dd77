"""The two ``autograd.Function`` classes of an op: one for the eager path, one for the
registered Autograd kernel; both hand backward, jvp and vmap to the op's declared rules."""

from __future__ import annotations

import torch


def functions(op):
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
