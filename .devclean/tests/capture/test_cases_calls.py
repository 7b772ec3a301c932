"""Differential cases: calls and inlining (methods, super, class/static methods, lambdas,
partial, *args/**kwargs, decorators, callable objects)."""

from __future__ import annotations

import functools

import pytest
import torch
from _differential import case, check, t


def _add(a, b):
    return a + b


def _scale(x, factor=2.0, *, shift=0.0):
    return x * factor + shift


def _varargs(*xs):
    total = xs[0]
    for v in xs[1:]:
        total = total + v
    return total, len(xs)


def _varkw(x, **opts):
    for k in sorted(opts):
        x = x * opts[k] if k.startswith("m") else x + opts[k]
    return x


def _both(x, *args, **kwargs):
    return x * len(args) + len(kwargs)


def _factorial(n):
    return 1 if n <= 1 else n * _factorial(n - 1)


def _depth(x, n):
    if n == 0:
        return x
    return _depth(x.sin(), n - 1)


class Base:
    def __init__(self, k: float) -> None:
        self.k = k

    def apply(self, x):
        return x * self.k

    @classmethod
    def make(cls, k):
        return cls(k)

    @staticmethod
    def offset(x):
        return x + 10


class Child(Base):
    def apply(self, x):
        return super().apply(x) + 1


class GrandChild(Child):
    def apply(self, x):
        return super(Child, self).apply(x) * 2 + super().apply(x)


class Affine:
    def __init__(self, w: torch.Tensor, b: torch.Tensor) -> None:
        self.w = w
        self.b = b

    def __call__(self, x):
        return x @ self.w + self.b


def _twice(fn):
    @functools.wraps(fn)
    def wrapper(x):
        return fn(fn(x))

    return wrapper


@_twice
def _plus_one(x):
    return x + 1


def call_user_function(x, y):
    return _add(x, y) * 2


def call_nested_user_functions(x):
    return _add(_scale(x), _scale(x, 3.0, shift=1.0))


def call_keyword_arguments(x):
    return _scale(factor=0.5, x=x, shift=2.0)


def call_star_args_definition(x, y):
    total, n = _varargs(x, y, x * y)
    return total * n


def call_star_kwargs_definition(x):
    return _varkw(x, mul=2.0, add=1.0, more=3.0)


def call_both_star_definitions(x):
    return _both(x, 1, 2, 3, a=1, b=2)


def call_python_recursion(x):
    return x * _factorial(4)


def call_tensor_recursion(x):
    return _depth(x, 3)


def call_lambda(x):
    sq = lambda v: v * v
    return sq(x) + sq(2)


def call_lambda_default_and_kw(x):
    f = lambda v, k=3, *, s=1: v * k + s
    return f(x, s=5)


def call_partial_positional(x, y):
    p = functools.partial(_add, x)
    return p(y)


def call_partial_keyword(x):
    p = functools.partial(_scale, factor=4.0, shift=-1.0)
    return p(x)


def call_partial_of_torch_function(x):
    soft = functools.partial(torch.softmax, dim=-1)
    return soft(x)


def call_partial_prebuilt(x, fn):
    return fn(x)


def call_method(x, obj):
    return obj.apply(x)


def call_bound_method_variable(x, obj):
    m = obj.apply
    return m(x) + m(x * 2)


def call_super(x, obj):
    return obj.apply(x)


def call_super_two_arg(x, obj):
    return obj.apply(x)


def call_classmethod_constructor(x):
    obj = Child.make(3.0)
    return obj.apply(x)


def call_staticmethod(x, obj):
    return obj.offset(x) + Base.offset(x)


def call_callable_object(x, layer):
    return layer(x).relu()


def call_decorated_function(x):
    return _plus_one(x)


def call_nested_def_with_defaults(x):
    base = 3.0

    def inner(v, scale=base):
        return v * scale

    return inner(x) + inner(x, 1.0)


def call_function_returning_function(x):
    def make(k):
        return lambda v: v + k

    return make(2)(x) * make(3)(x)


def call_function_argument(x, fn):
    return fn(x) + fn(-x)


def call_unbound_method_of_class(x, obj):
    return Base.apply(obj, x)


def call_torch_function_via_alias(x):
    f = torch.nn.functional.relu
    g = torch.Tensor.exp
    return f(x) + g(x)


CASES = [
    case(call_user_function, t(4), t(4, seed=1)),
    case(call_nested_user_functions, t(4)),
    case(call_keyword_arguments, t(4)),
    case(call_star_args_definition, t(4), t(4, seed=1)),
    case(call_star_kwargs_definition, t(4)),
    case(call_both_star_definitions, t(4)),
    case(call_python_recursion, t(4)),
    case(call_tensor_recursion, t(4)),
    case(call_lambda, t(4)),
    case(call_lambda_default_and_kw, t(4)),
    case(call_partial_positional, t(4), t(4, seed=1)),
    case(call_partial_keyword, t(4)),
    case(call_partial_of_torch_function, t(2, 3)),
    case(call_partial_prebuilt, t(4), functools.partial(_scale, factor=-1.0)),
    case(call_method, t(4), Base(2.0)),
    case(call_bound_method_variable, t(4), Base(2.0)),
    case(call_super, t(4), Child(3.0)),
    case(call_super_two_arg, t(4), GrandChild(0.5)),
    case(call_classmethod_constructor, t(4)),
    case(call_staticmethod, t(4), Child(1.0)),
    case(call_callable_object, t(2, 3), Affine(t(3, 4, seed=1), t(4, seed=2))),
    case(call_decorated_function, t(4)),
    case(call_nested_def_with_defaults, t(4)),
    case(call_function_returning_function, t(4)),
    case(call_function_argument, t(4), torch.tanh, id="call_function_argument_torch"),
    case(call_function_argument, t(4), lambda v: v * 3, id="call_function_argument_lambda"),
    case(call_unbound_method_of_class, t(4), Child(2.0)),
    case(call_torch_function_via_alias, t(4)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_calls(fn, args, opts):
    check(fn, *args, **opts)
