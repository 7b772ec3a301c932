"""The decomposition table inductor asks of the tracer: torch's core ATen decompositions
plus composite ops (softmax, layer norm, gelu, ...) that lower better as reductions and
pointwise ops than as extern calls.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten

_EXTRA = [
    aten._softmax, aten._log_softmax, aten.native_layer_norm, aten.native_layer_norm_backward,
    aten._softmax_backward_data, aten._log_softmax_backward_data, aten.gelu_backward,
    aten.native_dropout, aten.native_dropout_backward,
    aten.hardtanh, aten.logsumexp, aten.rsub, aten.addcmul, aten.addcdiv,
    aten.lerp, aten.leaky_relu, aten.elu, aten.softplus, aten.sigmoid_backward,
    aten.tanh_backward, aten.threshold_backward, aten.nll_loss_backward, aten.mse_loss, aten.mse_loss_backward, aten.stack, aten.repeat,
    aten.tril, aten.triu, aten._native_batch_norm_legit_no_training,
    # NOTE: the tracer records native_batch_norm as this overload (its schema marks the
    # running-stat writes); kept whole it reached the wrapper as an extern call that
    # functionalization had made `_legit_functional`, so an eval-mode batch norm was an
    # ATen kernel plus a copy, not a pointwise expression fused into its neighbours.
    aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_functional, aten.native_batch_norm,
    aten.native_batch_norm_backward, aten.native_group_norm, aten.std,
    aten.split, aten.unbind, aten.t, aten.transpose, aten.silu, aten.silu_backward,
    aten.mish, aten.hardswish, aten.hardsigmoid, aten.clamp_min, aten.clamp_max,
]

# NOTE: kept as single ops because a lowering (or an extern call) beats their
# decomposition: gelu lowers to one fused expression; addmm runs as one BLAS call.
_KEEP = {aten.gelu.default, aten.addmm.default, aten.clamp.default,
         aten.embedding.default, aten.mean.dim, aten.var.correction,
         aten.var_mean.correction,
         # NOTE: the decomposition is zeros + an accumulating index_put, an extern call
         # either way and 2-4x slower than ATen's own embedding backward on the CPU (BERT's
         # 30522x128 table, 4096 indices: 2.95 ms against 0.88) and ~17x on an H200 (1.3-1.4
         # ms a call for BERT's and T5's tables against 80 us).
         aten.embedding_dense_backward.default,
         # NOTE: index_select's backward (zeros + index_add): the decomposition makes it an
         # accumulating index_put, 6x slower than ATen's index_add on the CPU (4096 rows of
         # 256 into 5000: 3.9 ms against 0.6).
         aten.index_add.default,
         # NOTE: its decomposition returns the attention weights where the real op returns
         # the logsumexp that the op's own backward reads: decomposing only the forward
         # of a joint graph would feed the backward the wrong tensor.
         aten._scaled_dot_product_flash_attention_for_cpu.default,
         # NOTE: ATen's kernel raises IndexError("Target 5 is out of bounds.") for a class
         # index out of range; the decomposition's gather would raise another error.
         aten.nll_loss_forward.default, aten.nll_loss2d_forward.default}


def _take(self: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    # NOTE: torch's decomposition indexes with Python `[]`, which reads a 0-dim index
    # tensor's value (a data-dependent guard while tracing); aten.index does not.
    out: torch.Tensor = aten.index.Tensor(aten.reshape.default(self, [-1]), [index])
    return out


def _softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    # NOTE: ATen's CPU softmax scales the exponentials by the reciprocal of their sum;
    # torch's decomposition divides by the sum. Multiplying is what eager rounds like (more
    # elements equal bit for bit) and spares a vector division per element (the attention
    # block's masked softmax: 280 -> 235 us on one core).
    if x.numel() == 0:
        return NotImplemented  # type: ignore[no-any-return]  # no max over an empty dim: keep the op
    low = x.dtype in (torch.float16, torch.bfloat16)
    xc = x.contiguous().to(torch.float32) if low else x.contiguous()
    unnormalized = torch.exp(xc - torch.amax(xc, dim, keepdim=True))
    out = unnormalized * torch.reciprocal(torch.sum(unnormalized, dim, keepdim=True))
    return out if (half_to_float or not low) else out.to(x.dtype)


def _nll_loss_backward(grad_output: torch.Tensor, self: torch.Tensor, target: torch.Tensor,
                       weight: torch.Tensor | None, reduction: int, ignore_index: int,
                       total_weight: torch.Tensor) -> torch.Tensor:
    # NOTE: torch's decomposition scatters the gradient into zeros: an extern call here, with
    # a fill and a copy of the whole [N, C] gradient besides (cross-entropy over 8000
    # classes: the backward 2x eager's time on the CPU). As a comparison of each class
    # index with the target it is pointwise, and fuses into the log-softmax backward.
    # ATen's arithmetic: -(grad / total_weight) for a mean, then times the class weight.
    if self.dim() not in (1, 2) or target.dim() > 1:
        return NotImplemented  # type: ignore[no-any-return]
    batched = self.dim() == 2
    t = target.unsqueeze(1) if batched else target
    valid = t != ignore_index
    safe = torch.where(valid, t, torch.zeros_like(t))
    grad = grad_output / total_weight if reduction == 1 else grad_output
    if batched and reduction == 0:
        grad = grad.unsqueeze(1)
    grad = torch.neg(grad)
    if weight is not None:
        grad = aten.index.Tensor(weight, [safe]) * grad
    classes = torch.arange(self.shape[-1], device=self.device)
    hit = torch.logical_and(classes == safe, valid)
    out = torch.where(hit, grad, torch.zeros((), dtype=grad.dtype, device=grad.device))
    return out if out.dtype == self.dtype else out.to(self.dtype)


def _flatten(x: torch.Tensor, start_dim: int = 0, end_dim: int = -1) -> torch.Tensor:
    # NOTE: flatten is CompositeImplicit, yet torch's decompositions call it below autograd
    # (batch norm's weight and bias), where it reached the wrapper as an extern call.
    if x.dim() == 0:
        return aten.view.default(x, [1])  # type: ignore[no-any-return]
    start, end = start_dim % x.dim(), end_dim % x.dim()
    if start == end:
        return aten.alias.default(x)  # type: ignore[no-any-return]
    shape = list(x.shape[:start]) + [-1] + list(x.shape[end + 1:])
    try:
        return aten.view.default(x, shape)  # type: ignore[no-any-return]
    except RuntimeError:  # the flattened dims are not one stride apart: copy, as eager does
        dense = aten.clone.default(x, memory_format=torch.contiguous_format)
        return aten.view.default(dense, shape)  # type: ignore[no-any-return]


class DecompositionTable(Mapping[Any, Callable[..., Any]]):
    """`decomposition_table()`: built on first use, so that a compile served by the
    compiled-graph cache never builds it (0.3-0.5 s); `cache_key()` names it for the key."""

    def _table(self) -> dict[Any, Callable[..., Any]]:
        return _build()

    def __getitem__(self, op: Any) -> Callable[..., Any]:
        return self._table()[op]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def cache_key(self) -> str:
        """What the table is (its contents follow from torch's and inductor's versions)."""
        return "inductor.decompositions.decomposition_table"


_TABLE = DecompositionTable()


def decomposition_table() -> DecompositionTable:
    """The decompositions inductor wants applied while tracing (op overload -> function)."""
    return _TABLE


@functools.cache
def _build() -> dict[Any, Callable[..., Any]]:
    table: dict[Any, Callable[..., Any]] = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    for op in _KEEP:
        table.pop(op, None)
    table[aten.take.default] = _take
    table[aten._softmax.default] = _softmax
    table[aten.flatten.using_ints] = _flatten
    table[aten.nll_loss_backward.default] = _nll_loss_backward
    return table
