"""Differential cases: torch functions, Tensor methods, indexing (incl. assignment),
nn.functional and factory functions."""

# ruff: noqa: RET501, PLR1711  # the corpus spells these constructs on purpose: it tests them

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _differential import case, check, t

# --- torch functions -------------------------------------------------------------------------


def fn_pointwise_chain(x):
    return torch.exp(torch.sin(x)) + torch.tanh(x) * torch.sigmoid(x)


def fn_matmul_bmm_einsum(a, b):
    return torch.matmul(a, b), torch.bmm(a, b), torch.einsum("bij,bjk->bik", a, b)


def fn_cat_stack(x, y):
    return torch.cat([x, y], dim=0), torch.stack((x, y), dim=1)


def fn_where_clamp(x):
    return torch.where(x > 0, x, x * 0.1).clamp(-0.5, 0.5)


def fn_reductions(x):
    return torch.sum(x, 1), torch.mean(x), torch.amax(x, dim=0), torch.argmax(x, dim=1)


def fn_max_dim_namedtuple(x):
    res = torch.max(x, dim=1)
    return res.values * 2, res.indices


def fn_topk_sort(x):
    vals, idx = torch.topk(x, 2, dim=-1)
    sorted_vals, _ = torch.sort(x, dim=-1, descending=True)
    return vals, idx, sorted_vals


def fn_cumsum_std_var_norm(x):
    return torch.cumsum(x, 0), torch.std(x), torch.var(x, dim=1), torch.linalg.norm(x)


def fn_softmax_logsumexp(x):
    return torch.softmax(x, -1), torch.logsumexp(x, dim=-1)


def fn_tril_triu_outer(x):
    return torch.tril(x), torch.triu(x, 1), torch.outer(x[0], x[1])


def fn_gather_scatter(x, idx):
    g = torch.gather(x, 1, idx)
    s = torch.zeros_like(x).scatter_add(1, idx, g)
    return g, s


def fn_index_select_masked_fill(x, idx, mask):
    return torch.index_select(x, 0, idx), x.masked_fill(mask, -1.0)


# --- Tensor methods ---------------------------------------------------------------------------


def m_view_reshape_permute(x):
    return x.view(2, 6).reshape(3, 4).permute(1, 0).contiguous().view(-1)


def m_transpose_expand_repeat(x):
    return x.transpose(0, 1).unsqueeze(0).expand(2, -1, -1), x.repeat(2, 1)


def m_squeeze_flatten_unflatten(x):
    y = x.unsqueeze(1).squeeze(1)
    return y.flatten(), y.flatten().unflatten(0, (2, -1))


def m_chunk_split_unbind(x):
    a, b = x.chunk(2, dim=1)
    parts = x.split([1, 3], dim=1)
    rows = x.unbind(0)
    return a + b, parts[1], rows[0]


def m_dtype_conversions(x):
    return x.to(torch.float64), x.float(), x.half().float(), x.long(), x.type_as(x.double())


def m_reductions_keepdim(x):
    return x.sum(-1, keepdim=True), x.mean(dim=(0, 1)), x.std(0), x.norm(dim=-1), x.prod(1)


def m_new_tensors(x):
    return x.new_zeros(2, 3), x.new_ones((3,)), x.new_full((2,), 7.0), x.new_empty(2).fill_(1.0)


def m_clone_detach(x):
    y = x.clone()
    z = x.detach() * 2
    return y * z


def m_masked_ops(x):
    m = x > 0
    return x.masked_fill(m, 0.0), (x * m).sum(), m.any(), m.all(), m.sum()


def m_arith_methods(x, y):
    return x.add(y, alpha=2), x.sub(y), x.mul(y).div(y.abs() + 1), x.pow(2).sqrt(), x.neg().abs()


def m_inplace_on_local(x):
    y = x.clone()
    y.add_(1).mul_(2).clamp_(max=2.0)
    y.relu_()
    return y


def m_inplace_on_argument(x):
    x.mul_(2)
    x.add_(1)
    return x.sum()


def m_zero_fill_argument(x, y):
    x.zero_()
    y.fill_(3.0)
    return None


def m_size_stride_queries(x):
    return x * x.size(0) + x.stride(0) + x.dim() + x.numel() + x.element_size()


def m_type_queries(x):
    return x.is_floating_point(), x.is_contiguous(), x.is_complex(), x + 1


def m_item_free_scalar_ops(x):
    return x.sum() / x.numel(), x.max() - x.min()


def m_matmul_methods(a, b):
    return a.mm(b), a.matmul(b).t(), a.T.mv(a[:, 0])


def m_softmax_methods(x):
    return x.softmax(-1), x.log_softmax(dim=0)


def m_tensor_attribute_grad_free(x):
    return x.T.contiguous(), x.mT, x.real


# --- indexing ------------------------------------------------------------------------------


def idx_advanced_tensor(x, idx):
    return x[idx], x[:, idx[:2]]


def idx_boolean_mask_where_free(x):
    return torch.where(x > 0, x, torch.zeros_like(x)).sum(0)


def idx_setitem_scalar(x):
    y = x.clone()
    y[0] = 5.0
    y[:, 1] = -1.0
    return y


def idx_setitem_tensor(x, v):
    y = x.clone()
    y[1:3] = v
    return y


def idx_setitem_on_argument(x):
    x[0, 0] = 100.0
    x[-1] *= 2
    return x.sum()


def idx_setitem_mask(x):
    y = x.clone()
    y[y < 0] = 0.0
    return y


def idx_setitem_index_tensor(x, idx):
    y = x.clone()
    y[idx] += 1.0
    return y


def idx_none_ellipsis_mix(x):
    return x[None, ..., 1:2, None]


def idx_step_and_negative(x):
    return x[::2], x[-3:-1], x[..., :1], x.flip(0)


def idx_tensor_scalar_index(x):
    return x[torch.tensor(1)]


# --- nn.functional ----------------------------------------------------------------------------


def nnf_activations(x):
    return F.relu(x), F.gelu(x), F.silu(x), F.leaky_relu(x, 0.2), F.elu(x), F.softplus(x)


def nnf_gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def nnf_linear(x, w, b):
    return F.linear(x, w, b)


def nnf_layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def nnf_conv2d_pool(x, w):
    y = F.conv2d(x, w, padding=1)
    return F.max_pool2d(y, 2), F.avg_pool2d(y, 2), F.adaptive_avg_pool2d(y, 1)


def nnf_dropout_eval(x):
    return F.dropout(x, p=0.5, training=False)


def nnf_dropout_train_seeded(x):
    return F.dropout(x, p=0.5, training=True)


def nnf_cross_entropy(logits, target):
    return F.cross_entropy(logits, target), F.nll_loss(F.log_softmax(logits, -1), target)


def nnf_mse_l1(x, y):
    return F.mse_loss(x, y), F.l1_loss(x, y, reduction="sum")


def nnf_embedding(idx, table):
    return F.embedding(idx, table)


def nnf_pad_interpolate(x):
    return F.pad(x, (1, 1, 2, 0)), F.interpolate(x, scale_factor=2, mode="nearest")


def nnf_sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def nnf_normalize_cosine(x, y):
    return F.normalize(x, dim=-1), F.cosine_similarity(x, y, dim=-1)


def nnf_batch_norm_eval(x, mean, var):
    return F.batch_norm(x, mean, var, training=False)


# --- factories --------------------------------------------------------------------------------


def fac_basic(x):
    return x + torch.zeros(4), torch.ones(2, 2), torch.full((3,), 2.5), torch.eye(3)


def fac_arange_linspace(x):
    return torch.arange(5) * 2, torch.arange(0, 1, 0.25), torch.linspace(0, 1, 5) + x.sum()


def fac_like(x):
    return torch.zeros_like(x), torch.ones_like(x, dtype=torch.int64), torch.full_like(x, 3.0)


def fac_tensor_constant(x):
    return x * torch.tensor([1.0, 2.0, 3.0, 4.0]) + torch.tensor(0.5)


def fac_randn_seeded(x):
    return x + torch.randn(4), torch.rand_like(x)


def fac_dtype_device_kwargs(x):
    return x.to(torch.float64) + torch.ones(4, dtype=torch.float64, device=x.device)


def fac_from_shape(x):
    mask = torch.ones(x.shape[0], x.shape[0], dtype=torch.bool).tril()
    return x.masked_fill(~mask, float("-inf")).softmax(-1)


def fac_causal_mask_from_arange(x):
    n = x.shape[-1]
    pos = torch.arange(n)
    return torch.where(pos[None, :] <= pos[:, None], x, torch.zeros_like(x))


CASES = [
    case(fn_pointwise_chain, t(4, requires_grad=True), grad=True),
    case(fn_matmul_bmm_einsum, t(2, 3, 4), t(2, 4, 5, seed=1)),
    case(fn_cat_stack, t(2, 3), t(2, 3, seed=1)),
    case(fn_where_clamp, t(5)),
    case(fn_reductions, t(3, 4)),
    case(fn_max_dim_namedtuple, t(3, 4)),
    case(fn_topk_sort, t(3, 5)),
    case(fn_cumsum_std_var_norm, t(3, 4)),
    case(fn_softmax_logsumexp, t(2, 5, requires_grad=True), grad=True),
    case(fn_tril_triu_outer, t(3, 3)),
    case(fn_gather_scatter, t(3, 4), torch.tensor([[0, 1], [2, 3], [1, 1]])),
    case(fn_index_select_masked_fill, t(4, 3), torch.tensor([2, 0]), t(4, 3, dtype=torch.bool)),
    case(m_view_reshape_permute, t(3, 4)),
    case(m_transpose_expand_repeat, t(2, 3)),
    case(m_squeeze_flatten_unflatten, t(2, 4)),
    case(m_chunk_split_unbind, t(2, 4)),
    case(m_dtype_conversions, t(4)),
    case(m_reductions_keepdim, t(2, 3, 4)),
    case(m_new_tensors, t(4)),
    case(m_clone_detach, t(4, requires_grad=True), grad=True),
    case(m_masked_ops, t(3, 4)),
    case(m_arith_methods, t(4), t(4, seed=1)),
    case(m_inplace_on_local, t(4)),
    case(m_inplace_on_argument, t(4)),
    case(m_zero_fill_argument, t(4), t(3, seed=1)),
    case(m_size_stride_queries, t(3, 4)),
    case(m_type_queries, t(4)),
    case(m_item_free_scalar_ops, t(3, 4)),
    case(m_matmul_methods, t(3, 3), t(3, 2, seed=1)),
    case(m_softmax_methods, t(3, 4)),
    case(m_tensor_attribute_grad_free, t(3, 2)),
    case(idx_advanced_tensor, t(5, 4), torch.tensor([3, 0, 1])),
    case(idx_boolean_mask_where_free, t(3, 4)),
    case(idx_setitem_scalar, t(3, 4)),
    case(idx_setitem_tensor, t(4, 2), t(2, 2, seed=1)),
    case(idx_setitem_on_argument, t(3, 3)),
    case(idx_setitem_mask, t(3, 4)),
    case(idx_setitem_index_tensor, t(5), torch.tensor([0, 3])),
    case(idx_none_ellipsis_mix, t(2, 3, 4)),
    case(idx_step_and_negative, t(6, 2)),
    case(idx_tensor_scalar_index, t(3, 2)),
    case(nnf_activations, t(6)),
    case(nnf_gelu_tanh, t(6, requires_grad=True), grad=True),
    case(nnf_linear, t(2, 3, requires_grad=True), t(4, 3, seed=1, requires_grad=True),
         t(4, seed=2, requires_grad=True), grad=True),
    case(nnf_layer_norm, t(2, 5, requires_grad=True), t(5, seed=1), t(5, seed=2), grad=True),
    case(nnf_conv2d_pool, t(1, 2, 6, 6), t(3, 2, 3, 3, seed=1)),
    case(nnf_dropout_eval, t(8)),
    case(nnf_dropout_train_seeded, t(8)),
    case(nnf_cross_entropy, t(4, 5, requires_grad=True), torch.tensor([0, 4, 2, 1]), grad=True),
    case(nnf_mse_l1, t(4, requires_grad=True), t(4, seed=1), grad=True),
    case(nnf_embedding, torch.tensor([[0, 2], [1, 1]]), t(3, 4, requires_grad=True), grad=True),
    case(nnf_pad_interpolate, t(1, 1, 2, 3)),
    case(nnf_sdpa, t(1, 2, 4, 8), t(1, 2, 4, 8, seed=1), t(1, 2, 4, 8, seed=2)),
    case(nnf_normalize_cosine, t(3, 4), t(3, 4, seed=1)),
    case(nnf_batch_norm_eval, t(2, 3, 4), t(3, seed=1), t(3, seed=2).abs()),
    case(fac_basic, t(4)),
    case(fac_arange_linspace, t(4)),
    case(fac_like, t(2, 3)),
    case(fac_tensor_constant, t(4)),
    case(fac_randn_seeded, t(4)),
    case(fac_dtype_device_kwargs, t(4)),
    case(fac_from_shape, t(4, 4)),
    case(fac_causal_mask_from_arange, t(3, 3)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_tensors(fn, args, opts):
    check(fn, *args, **opts)
