"""An op's autograd rules as its ``autograd.Function`` runs them: what the forward saves for the
declared ``backward`` / ``jvp`` (``save=``), the ``Context`` a rule receives, and a clear error
naming the op where a rule is needed and not declared. A mixin of ``Op``."""

from __future__ import annotations

from .eager import Tensor, functorch_active, fwd_ad
from .schema import Context


class Rules:
    """``Op``'s autograd rules (``self`` is the ``Op``)."""

    def _setup(self, ctx, inputs, output) -> None:
        values, tensors, slots = {}, [], {}
        for n, i in self._save_at:
            v = output if i < 0 else inputs[i]
            if isinstance(v, Tensor):
                slots[n] = len(tensors)
                tensors.append(v)
            else:
                values[n] = v
        ctx.cupy_ops_values, ctx.cupy_ops_slots = values, slots
        if tensors:
            ctx.save_for_backward(*tensors)
            if self._jvp is not None and (fwd_ad._current_level >= 0 or functorch_active()):
                ctx.save_for_forward(*tensors)  # only forward AD reads them (and it costs a call)

    def _context(self, ctx, needs) -> Context:
        values = dict(ctx.cupy_ops_values)
        if ctx.cupy_ops_slots:
            saved = ctx.saved_tensors
            for n, i in ctx.cupy_ops_slots.items():
                values[n] = saved[i]
        return Context(values, needs)

    def _run_backward(self, ctx, grads):
        if self._backward is None:
            raise RuntimeError(
                f"op {self.qualname} has no backward rule: declare one with @{self.name}.backward, or "
                f"call it on tensors that do not require grad (torch.no_grad(), .detach())"
            )
        needs = {p.name: ctx.needs_input_grad[p.index] for p in self._params}
        got = self._backward(self._context(ctx, needs), *grads)
        got = got if isinstance(got, tuple) else (got,)
        if len(got) != self._n:
            raise RuntimeError(
                f"the backward of op {self.qualname} returned {len(got)} gradients; it must return one "
                f"per input ({self._n}: {', '.join(p.name for p in self._params)}), None where there "
                f"is none"
            )
        return got

    def _run_jvp(self, ctx, tangents):
        if self._jvp is None:
            raise RuntimeError(
                f"op {self.qualname} has no forward-mode AD rule: declare one with @{self.name}.jvp "
                f"(torch.autograd.forward_ad and torch.func.jvp need it)"
            )
        needs = {p.name: tangents[p.index] is not None for p in self._params}
        return self._jvp(self._context(ctx, needs), *tangents)

    def _run_vmap(self, info, in_dims, args):
        if self._vmap is None:
            raise RuntimeError(
                f"op {self.qualname} has no vmap rule: declare one with @{self.name}.vmap (torch.func.vmap needs it)"
            )
        return self._vmap(info, in_dims, *args)
