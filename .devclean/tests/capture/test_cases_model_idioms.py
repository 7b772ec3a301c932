"""Differential cases: idioms seen in real model code (transformers, timm): dtype lookups via
parameters, finfo masks, ModuleList slicing, ParameterList/Dict, activation tables, kwargs
plumbing, properties on modules, nullcontext, walrus, enums."""

from __future__ import annotations

import contextlib
import enum
import math
from collections.abc import MutableMapping

import pytest
import torch
import torch.nn.functional as F
from _differential import check, check_module, t
from torch import nn


class Act(enum.Enum):
    RELU = "relu"
    GELU = "gelu"


ACT2FN = {"relu": nn.ReLU(), "gelu": nn.GELU(), "silu": nn.SiLU()}


def finfo_mask(x, mask):
    return x.masked_fill(~mask, torch.finfo(x.dtype).min).softmax(-1)


def softmax_with_dtype(x):
    return F.softmax(x.half(), dim=-1, dtype=torch.float32)


def shape_slicing_view(x):
    new_shape = x.size()[:-1] + (2, x.size(-1) // 2)
    return x.view(new_shape).transpose(-1, -2).reshape(*x.shape[:-1], -1)


def view_star_shape(x):
    *lead, d = x.shape
    return x.view(*lead, 2, d // 2).sum(-1)


def zip_star(x, pairs):
    scales, shifts = zip(*pairs)
    return x * sum(scales) + max(shifts)


def walrus(x):
    if (n := x.shape[0]) > 1:
        return x * n
    return x + n


def enum_compare(x, act):
    if act == Act.GELU:
        return F.gelu(x)
    return F.relu(x)


def enum_value_lookup(x, act):
    return ACT2FN[act.value](x)


def nullcontext_or_no_grad(x, flag):
    ctx = torch.no_grad() if flag else contextlib.nullcontext()
    with ctx:
        y = x * 2
    return y + 1


def math_inf_and_isfinite(x):
    lim = math.inf if x.shape[0] > 2 else 1.0
    return x.clamp(max=lim) + math.isfinite(lim)


def tensor_on_input_device(x):
    return x + torch.tensor([1.0, 2.0, 3.0, 4.0], device=x.device, dtype=x.dtype)


def is_grad_enabled_branch(x):
    if torch.is_grad_enabled():
        return x * 2
    return x * 3


def jit_is_scripting_branch(x):
    if torch.jit.is_scripting():
        return x
    return x + 1


def isinstance_list_or_tuple(x, shape):
    if isinstance(shape, (list, tuple)):
        return x.reshape(*shape)
    return x.reshape(shape)


def sorted_dict_items(x, d):
    for _, v in sorted(d.items()):
        x = x * v
    return x


def getattr_on_functional(x, name):
    return getattr(F, name)(x)


def new_tensor_and_scalar_tensor(x):
    return x + x.new_tensor([0.5]) + torch.scalar_tensor(2.0)


class DTypeFromParams(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    def forward(self, x):
        return self.fc(x.to(self.dtype)) * (self.fc.weight.dtype == torch.float32)


class SliceModuleList(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(4))

    def forward(self, x):
        for layer in self.layers[:2]:
            x = layer(x).relu()
        for layer in reversed(self.layers[2:]):
            x = layer(x)
        return x * len(self.layers) + self.layers[-1].bias


class ParamContainers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scales = nn.ParameterList([nn.Parameter(torch.full((4,), float(i))) for i in range(3)])
        self.biases = nn.ParameterDict({"a": nn.Parameter(torch.ones(4)),
                                        "b": nn.Parameter(torch.zeros(4))})

    def forward(self, x):
        for s in self.scales:
            x = x * s
        return x + self.biases["a"] - self.biases["b"]


class ActTable(nn.Module):
    def __init__(self, act: str) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act_fn = ACT2FN[act]

    def forward(self, x):
        return self.act_fn(self.fc(x))


class KwargsPlumbing(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def _inner(self, x, scale=1.0, **kwargs):
        return self.inner(x) * scale + kwargs.get("shift", 0.0)

    def forward(self, x, **kwargs):
        return self._inner(x, **kwargs)


class DropPathLike(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if not self.training or self.p == 0.0:
            return x + y
        keep = torch.rand(x.shape[0], 1) >= self.p
        return x + y * keep / (1 - self.p)


class SeqIndexing(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4))
        self.heads = nn.ModuleDict({"x": nn.Linear(4, 2)})

    def forward(self, x):
        h = self.seq[0](x)
        h = self.seq[1:](h)
        out = h
        if "x" in self.heads:
            out = self.heads["x"](h)
        return out, list(self.heads.keys())


class NonPersistentBuffer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("pos", torch.arange(8).float(), persistent=False)
        self.emb = nn.Embedding(8, 4)

    def forward(self, idx):
        return self.emb(idx) + self.pos[: idx.shape[-1], None]


class HasAttrDispatch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.ReLU()

    def forward(self, x):
        for m in (self.a, self.b):
            if hasattr(m, "weight"):
                x = x @ m.weight.T
            else:
                x = m(x)
        return x


FUNCTION_CASES = [
    pytest.param(finfo_mask, (t(2, 4), t(2, 4, dtype=torch.bool)), {}, id="finfo_mask"),
    pytest.param(softmax_with_dtype, (t(2, 4),), {}, id="softmax_with_dtype"),
    pytest.param(shape_slicing_view, (t(2, 3, 4),), {}, id="shape_slicing_view"),
    pytest.param(view_star_shape, (t(2, 3, 4),), {}, id="view_star_shape"),
    pytest.param(zip_star, (t(4), [(1.0, 2.0), (3.0, 4.0)]), {}, id="zip_star"),
    pytest.param(walrus, (t(3),), {}, id="walrus"),
    pytest.param(enum_compare, (t(4), Act.GELU), {}, id="enum_compare"),
    pytest.param(enum_value_lookup, (t(4), Act.RELU), {}, id="enum_value_lookup"),
    pytest.param(nullcontext_or_no_grad, (t(4, requires_grad=True), False), {"grad": True},
                 id="nullcontext"),
    pytest.param(nullcontext_or_no_grad, (t(4, requires_grad=True), True), {},
                 id="nullcontext_no_grad"),
    pytest.param(math_inf_and_isfinite, (t(4),), {}, id="math_inf_and_isfinite"),
    pytest.param(tensor_on_input_device, (t(4),), {}, id="tensor_on_input_device"),
    pytest.param(is_grad_enabled_branch, (t(4),), {}, id="is_grad_enabled_branch"),
    pytest.param(jit_is_scripting_branch, (t(4),), {}, id="jit_is_scripting_branch"),
    pytest.param(isinstance_list_or_tuple, (t(6), (2, 3)), {}, id="isinstance_list_or_tuple"),
    pytest.param(sorted_dict_items, (t(4), {"b": 2.0, "a": 3.0}), {}, id="sorted_dict_items"),
    pytest.param(getattr_on_functional, (t(4), "silu"), {}, id="getattr_on_functional"),
    pytest.param(new_tensor_and_scalar_tensor, (t(4),), {}, id="new_tensor_and_scalar_tensor"),
]


@pytest.mark.parametrize(("fn", "args", "opts"), FUNCTION_CASES)
def test_function_idioms(fn, args, opts):
    check(fn, *args, **opts)


MODULE_CASES = [
    pytest.param(DTypeFromParams, (t(2, 4),), id="dtype_from_parameters"),
    pytest.param(SliceModuleList, (t(2, 4),), id="module_list_slicing"),
    pytest.param(ParamContainers, (t(4),), id="parameter_list_and_dict"),
    pytest.param(lambda: ActTable("gelu"), (t(2, 4),), id="activation_table"),
    pytest.param(lambda: DropPathLike(0.0), (t(2, 4),), id="drop_path_p0"),
    pytest.param(lambda: DropPathLike(0.5), (t(8, 4),), id="drop_path_random_seeded"),
    pytest.param(SeqIndexing, (t(2, 4),), id="sequential_indexing_and_slicing"),
    pytest.param(NonPersistentBuffer, (torch.tensor([[1, 2, 3]]),), id="non_persistent_buffer"),
    pytest.param(HasAttrDispatch, (t(2, 4),), id="hasattr_dispatch"),
]


@pytest.mark.parametrize(("make", "args"), MODULE_CASES)
def test_module_idioms(make, args):
    torch.manual_seed(0)
    check_module(make(), *args, grad=True)


def test_kwargs_plumbing_through_module():
    import copy

    import capture
    from _differential import CountingBackend, assert_same

    torch.manual_seed(0)
    m = KwargsPlumbing()
    backend = CountingBackend()
    capture.reset()
    compiled = capture.optimize(copy.deepcopy(m), backend=backend, fullgraph=True)
    x = t(2, 4)
    assert_same(compiled(x, scale=2.0, shift=1.0), m(x, scale=2.0, shift=1.0))
    assert backend.frame_count == 1


# A registry like transformers' AttentionInterface (a MutableMapping over a class-wide and a
# local dict): `get_interface` calls `super().get(name, default)`, whose KeyError is caught.
class _Registry(MutableMapping):
    _global_mapping = {"double": lambda x: x * 2}  # noqa: RUF012  # as in transformers

    def __init__(self):
        self._local_mapping = {}

    def __getitem__(self, key):
        if key in self._local_mapping:
            return self._local_mapping[key]
        return self._global_mapping[key]

    def __setitem__(self, key, value):
        self._local_mapping.update({key: value})

    def __delitem__(self, key):
        del self._local_mapping[key]

    def __iter__(self):
        return iter({**self._global_mapping, **self._local_mapping})

    def __len__(self):
        return len(self._global_mapping.keys() | self._local_mapping.keys())

    def get_interface(self, name, default):
        if name != "eager" and name not in self:
            raise KeyError(name)
        return super().get(name, default)


REGISTRY = _Registry()


def registry_lookup(x):
    eager = REGISTRY.get_interface("eager", torch.tanh)  # missing: the default
    double = REGISTRY.get_interface("double", torch.tanh)
    return eager(x) + double(x), "double" in REGISTRY, REGISTRY.get("other")


def test_mapping_get_with_missing_key():
    check(registry_lookup, t(3))


def test_mapping_get_sees_a_new_registration():
    import capture

    capture.reset()
    compiled = capture.optimize(registry_lookup, backend="eager", fullgraph=True)
    x = t(3)
    assert torch.equal(compiled(x)[0], registry_lookup(x)[0])
    REGISTRY["eager"] = lambda v: v * 10  # a local override: the guarded keys change
    try:
        assert torch.equal(compiled(x)[0], registry_lookup(x)[0])
        assert torch.equal(compiled(x)[0], x * 10 + x * 2)
    finally:
        del REGISTRY["eager"]
