"""Differential cases: user-defined classes used by model code: objects created inside the
compiled function, dunder methods (operators, len/iter/contains/getitem), properties with
setters, __getattr__ fallbacks (config objects), dataclasses with __post_init__ and
default_factory, mixins, and standard-library helpers (functools.reduce, itertools)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import ClassVar

import pytest
import torch
from _differential import case, check, t


class Vec:
    def __init__(self, data: torch.Tensor) -> None:
        self.data = data

    def __add__(self, other: Vec) -> Vec:
        return Vec(self.data + other.data)

    def __mul__(self, k: float) -> Vec:
        return Vec(self.data * k)

    def __neg__(self) -> Vec:
        return Vec(-self.data)

    def __len__(self) -> int:
        return self.data.shape[0]

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.data[i]


class Bag:
    def __init__(self, *items: torch.Tensor) -> None:
        self.items = list(items)

    def __iter__(self):
        return iter(self.items)

    def __contains__(self, name: str) -> bool:
        return name == "bag"


class Config:
    """Like transformers' configs: attribute aliases through __getattr__."""

    aliases: ClassVar[dict[str, str]] = {"hidden_size": "d_model"}

    def __init__(self) -> None:
        self.d_model = 4
        self.scale = 0.5

    def __getattr__(self, name: str):
        if name in Config.aliases:
            return getattr(self, Config.aliases[name])
        raise AttributeError(name)


class Temperature:
    def __init__(self) -> None:
        self._t = 1.0

    @property
    def t(self) -> float:
        return self._t

    @t.setter
    def t(self, value: float) -> None:
        self._t = max(value, 0.1)


class ScaleMixin:
    def scale(self, x):
        return x * self.factor


class ShiftMixin:
    def shift(self, x):
        return x + self.offset


class Affine(ScaleMixin, ShiftMixin):
    def __init__(self, factor: float, offset: float) -> None:
        self.factor = factor
        self.offset = offset

    def __call__(self, x):
        return self.shift(self.scale(x))


@dataclasses.dataclass
class Spec:
    dims: list[int] = dataclasses.field(default_factory=lambda: [2, 3])
    scale: float = 1.0
    total: int = 0

    def __post_init__(self) -> None:
        self.total = math.prod(self.dims)


class Counter:
    created = 0

    def __init__(self) -> None:
        Counter.created += 1


def create_object_inside(x):
    v = Vec(x) + Vec(x * 2)
    return (-v * 0.5).data


def dunder_len_getitem(x):
    v = Vec(x)
    return v[0] * len(v) + v[-1]


def custom_iterable(x, y):
    total = x * 0
    for item in Bag(x, y):
        total = total + item
    return total * ("bag" in Bag())


def config_getattr_alias(x, cfg):
    return x.reshape(-1, cfg.hidden_size) * cfg.scale


def property_setter(x, temp):
    temp.t = 0.01
    return x / temp.t


def mixins(x):
    return Affine(2.0, -1.0)(x)


def dataclass_post_init_and_factory(x):
    spec = Spec(scale=3.0)
    return x.reshape(spec.dims) * spec.scale + spec.total


def dataclass_replace(x):
    spec = dataclasses.replace(Spec(), scale=5.0)
    return x * spec.scale


def class_attribute_mutation(x):
    Counter()
    return x + Counter.created


def functools_reduce(x, ts):
    return functools.reduce(lambda a, b: a * b, ts, x)


def itertools_chain_product(x):
    pairs = list(itertools.product([1, 2], [3]))
    flat = list(itertools.chain([1], [2, 3]))
    return x * len(pairs) + sum(flat) + pairs[-1][0]


def itertools_accumulate_pairwise(x):
    acc = list(itertools.accumulate([1, 2, 3]))
    return x * acc[-1]


def isinstance_of_user_class(x, v):
    if isinstance(v, Vec):
        return x + v.data
    return x


def user_object_returned(x):
    return Vec(x * 3)


class Helper:
    @staticmethod
    def twice(v):
        return v * 2


def staticmethod_on_instance_created_inside(x):
    return Helper().twice(x) + Helper.twice(x)


CASES = [
    case(create_object_inside, t(4)),
    case(dunder_len_getitem, t(3, 2)),
    case(custom_iterable, t(4), t(4, seed=1)),
    case(config_getattr_alias, t(8), Config()),
    case(property_setter, t(4), Temperature()),
    case(mixins, t(4)),
    case(dataclass_post_init_and_factory, t(6)),
    case(dataclass_replace, t(4)),
    case(functools_reduce, t(4), [t(4, seed=1), t(4, seed=2)]),
    case(itertools_chain_product, t(4)),
    case(itertools_accumulate_pairwise, t(4)),
    case(isinstance_of_user_class, t(4), Vec(t(4, seed=3))),
    case(user_object_returned, t(4)),
    case(staticmethod_on_instance_created_inside, t(4)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_user_classes(fn, args, opts):
    check(fn, *args, **opts)


def test_class_attribute_mutation_replayed():
    import capture
    from _differential import CountingBackend, assert_same

    capture.reset()
    compiled = capture.optimize(class_attribute_mutation, backend=CountingBackend(),
                                fullgraph=True)
    Counter.created = 0
    expected = class_attribute_mutation(t(4))
    eager_count = Counter.created
    Counter.created = 0
    actual = compiled(t(4))
    assert_same(actual, expected)
    assert Counter.created == eager_count == 1
