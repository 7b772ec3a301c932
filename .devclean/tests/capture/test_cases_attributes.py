"""Differential cases: attribute access and subscripts on Python objects and tensors."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from _differential import case, check, t


class Inner:
    def __init__(self) -> None:
        self.w = torch.arange(4.0)
        self.k = 3


class Holder:
    FACTOR = 4

    def __init__(self) -> None:
        self.scale = 2.0
        self.bias = torch.ones(4)
        self.name = "h"
        self.inner = Inner()
        self.items = [1.0, 2.0, 3.0]


class WithProperty:
    def __init__(self, v: float) -> None:
        self.v = v

    @property
    def doubled(self) -> float:
        return self.v * 2


class WithSlots:
    __slots__ = ("a", "b")

    def __init__(self, a: float, b: float) -> None:
        self.a = a
        self.b = b


@dataclasses.dataclass
class Cfg:
    hidden: int = 4
    eps: float = 1e-5
    act: str = "relu"


@dataclasses.dataclass(frozen=True)
class FrozenCfg:
    scale: float = 0.5
    shift: float = 1.0


def attr_scalar(x, h):
    return x * h.scale


def attr_tensor(x, h):
    return x + h.bias


def attr_nested(x, h):
    return x * h.inner.w + h.inner.k


def attr_string_compare(x, h):
    if h.name == "h":
        return x + 1
    return x - 1


def attr_class_attribute_via_instance(x, h):
    return x * h.FACTOR


def attr_class_attribute_via_type(x, h):
    return x * type(h).FACTOR


def attr_list_attribute(x, h):
    return x * h.items[2] - h.items[0]


def attr_dataclass(x, cfg):
    y = x * cfg.hidden + cfg.eps
    return y.relu() if cfg.act == "relu" else y


def attr_frozen_dataclass(x, cfg):
    return x * cfg.scale + cfg.shift


def attr_property(x, obj):
    return x + obj.doubled


def attr_slots(x, s):
    return x * s.a - s.b


def attr_getattr_default(x, h):
    return x * getattr(h, "missing", 5) + getattr(h, "scale", 0)


def attr_tensor_T(x):
    return x.T @ x


def attr_tensor_mT(x):
    return x.mT.sum(0)


def attr_tensor_data_free_attrs(x):
    return x * x.ndim + x.shape[-1] + x.numel()


def sub_list_index(x, lst):
    return x * lst[0] + lst[-1]


def sub_tuple_index(x, tup):
    return x * tup[1] - tup[0]


def sub_dict_key(x, d):
    return x * d["w"] + d["b"]


def sub_nested_containers(x, d):
    return x * d["a"][1]["k"]


def sub_slice_of_list(x, lst):
    a, b = lst[1:3]
    return x * a + b


def sub_string_index(x, s):
    if s[0] == "a" and s[-1] == "z":
        return x + 1
    return x


def sub_dict_get_default(x, d):
    return x * d.get("missing", 1.5) + d.get("b", 0.0)


def sub_list_of_tensors(x, ts):
    return x + ts[0] * ts[1]


def sub_tensor_int(x):
    return x[0] + x[-1]


def sub_tensor_slices(x):
    return x[1:3, ::2]


def sub_tensor_ellipsis_none(x):
    return x[..., 0] + x[:, None, 1].squeeze(1)


def sub_tensor_index_from_python_list(x, idx):
    return x[idx[0]] * x[idx[1]]


def sub_tensor_negative_step_free(x):
    return x[-2:] - x[:2]


CASES = [
    case(attr_scalar, t(4), Holder()),
    case(attr_tensor, t(4), Holder()),
    case(attr_nested, t(4), Holder()),
    case(attr_string_compare, t(4), Holder()),
    case(attr_class_attribute_via_instance, t(4), Holder()),
    case(attr_class_attribute_via_type, t(4), Holder()),
    case(attr_list_attribute, t(4), Holder()),
    case(attr_dataclass, t(4), Cfg()),
    case(attr_frozen_dataclass, t(4), FrozenCfg()),
    case(attr_property, t(4), WithProperty(1.5)),
    case(attr_slots, t(4), WithSlots(2.0, 0.5)),
    case(attr_getattr_default, t(4), Holder()),
    case(attr_tensor_T, t(3, 2)),
    case(attr_tensor_mT, t(2, 3, 4)),
    case(attr_tensor_data_free_attrs, t(2, 3)),
    case(sub_list_index, t(4), [2.0, 3.0, -1.0]),
    case(sub_tuple_index, t(4), (1, 2)),
    case(sub_dict_key, t(4), {"w": 2.0, "b": t(4, seed=5)}),
    case(sub_nested_containers, t(4), {"a": [{"k": 1}, {"k": 7}]}),
    case(sub_slice_of_list, t(4), [0.0, 2.0, 3.0, 4.0]),
    case(sub_string_index, t(4), "abcz"),
    case(sub_dict_get_default, t(4), {"b": 2.5}),
    case(sub_list_of_tensors, t(4), [t(4, seed=1), t(4, seed=2)]),
    case(sub_tensor_int, t(3, 4)),
    case(sub_tensor_slices, t(4, 5)),
    case(sub_tensor_ellipsis_none, t(3, 4)),
    case(sub_tensor_index_from_python_list, t(5, 2), [1, 3]),
    case(sub_tensor_negative_step_free, t(6)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_attributes(fn, args, opts):
    check(fn, *args, **opts)
