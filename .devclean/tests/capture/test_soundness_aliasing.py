"""Soundness: identity and aliasing of inputs, and tensor facts a program reads.

Each case runs eagerly and compiled over several calls whose inputs alias differently
(`f(x, x)` then `f(x, y)`, and back), comparing results and the inputs after the call. An entry
compiled for one aliasing pattern must never serve another one, and facts such as
`storage_offset()`, `is_leaf`, `grad_fn is None`, `_is_view()` and `x.contiguous() is x` must be
read right on the first call and guarded after.
"""

from __future__ import annotations

import pytest
import torch
from _differential import t
from _soundness import BACKEND_PARAMS, run_steps, runner
from torch import nn


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request):
    """Each case runs with every backend registered (eager always; aot_eager, inductor)."""
    return request.param


def same(*shape):
    """A maker of `(x, x)`: one tensor passed twice."""
    def make():
        x = t(*shape)
        return (x, x)
    return make


def distinct(*shape):
    """A maker of `(x, y)`: two tensors of equal metadata."""
    def make():
        return (t(*shape, seed=1), t(*shape, seed=2))
    return make


# -- two arguments ---------------------------------------------------------------------------
def add_two(a, b):
    return a + b * 2


def inplace_then_read(a, b):
    a.add_(1)
    return b * 2


def identity_test(a, b):
    return a is b


def identity_branch(a, b):
    if a is b:
        return a * 10
    return a - b


def is_not_branch(a, b):
    if a is not b:
        return a + b
    return a * 0


def three_args(a, b, c):
    a.mul_(2)
    return a + b + c


def three_same():
    x = t(4)
    return (x, x, x)


def three_ab():
    x = t(4)
    return (x, x, t(4, seed=3))


def three_bc():
    x = t(4, seed=3)
    return (t(4), x, x)


def three_ac():
    x = t(4)
    return (x, t(4, seed=3), x)


def three_distinct():
    return (t(4), t(4, seed=3), t(4, seed=5))


PAIR_CASES = [
    pytest.param(add_two, [same(4), distinct(4), same(4)], id="add_same_then_distinct"),
    pytest.param(add_two, [distinct(4), same(4), distinct(4)], id="add_distinct_then_same"),
    pytest.param(inplace_then_read, [distinct(4), same(4), distinct(4)], id="inplace_distinct_then_same"),
    pytest.param(inplace_then_read, [same(4), distinct(4), same(4)], id="inplace_same_then_distinct"),
    pytest.param(identity_test, [same(4), distinct(4), same(4)], id="is_same_then_distinct"),
    pytest.param(identity_test, [distinct(4), same(4)], id="is_distinct_then_same"),
    pytest.param(identity_branch, [same(4), distinct(4), same(4)], id="is_branch"),
    pytest.param(is_not_branch, [distinct(4), same(4), distinct(4)], id="is_not_branch"),
    pytest.param(three_args, [three_same, three_ab, three_bc, three_ac, three_distinct, three_same],
                 id="three_partitions"),
    pytest.param(three_args, [three_distinct, three_ac, three_bc, three_ab, three_same],
                 id="three_partitions_reverse"),
]


@pytest.mark.parametrize("fn, makers", PAIR_CASES)
def test_argument_aliasing(fn, makers, backend):
    runner(backend)(fn, makers)


# -- containers ------------------------------------------------------------------------------
def list_sum(xs):
    xs[0].add_(1)
    return xs[0] + xs[1]


def list_same():
    x = t(4)
    return ([x, x],)


def list_distinct():
    return ([t(4), t(4, seed=4)],)


def dict_items(d):
    d["a"].mul_(3)
    return d["b"] + 1


def dict_same():
    x = t(4)
    return ({"a": x, "b": x},)


def dict_distinct():
    return ({"a": t(4), "b": t(4, seed=4)},)


def arg_and_list(x, xs):
    x.sub_(1)
    return xs[0] * 2


def arg_in_list():
    x = t(4)
    return (x, [x])


def arg_not_in_list():
    return (t(4), [t(4, seed=6)])


@pytest.mark.parametrize("fn, makers", [
    pytest.param(list_sum, [list_same, list_distinct, list_same], id="list_slots"),
    pytest.param(list_sum, [list_distinct, list_same, list_distinct], id="list_slots_reverse"),
    pytest.param(dict_items, [dict_same, dict_distinct, dict_same], id="dict_values"),
    pytest.param(dict_items, [dict_distinct, dict_same], id="dict_values_reverse"),
    pytest.param(arg_and_list, [arg_in_list, arg_not_in_list, arg_in_list], id="arg_and_list"),
    pytest.param(arg_and_list, [arg_not_in_list, arg_in_list], id="arg_and_list_reverse"),
])
def test_container_aliasing(fn, makers, backend):
    runner(backend)(fn, makers)


# -- globals ---------------------------------------------------------------------------------
GA = torch.ones(4)
GB = torch.ones(4)


def reads_two_globals(x):
    return x + GA + GB * 2


def mutates_one_global(x):
    GA.add_(x)
    return GB * 1


def _globals(tied):
    def make():
        global GA, GB
        GA = t(4, seed=7)
        GB = GA if tied else t(4, seed=8)
        return (t(4),)
    return make


def _observe_globals():
    return (GA.clone(), GB.clone(), GA is GB)


@pytest.mark.parametrize("fn", [reads_two_globals, mutates_one_global])
@pytest.mark.parametrize("order", ["tied_first", "untied_first"])
def test_global_aliasing(fn, order, backend):
    makers = [_globals(True), _globals(False), _globals(True)]
    if order == "untied_first":
        makers = [_globals(False), _globals(True), _globals(False)]
    runner(backend)(fn, makers, observe=_observe_globals)


def global_and_arg(x):
    GA.mul_(2)
    return x + 1


def _global_is_arg(tied):
    def make():
        global GA
        x = t(4)
        GA = x if tied else t(4, seed=9)
        return (x,)
    return make


def test_global_aliases_argument(backend):
    runner(backend)(global_and_arg, [_global_is_arg(False), _global_is_arg(True), _global_is_arg(False)],
              observe=lambda: GA.clone())


# -- tied weights ----------------------------------------------------------------------------
class TwoLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4, bias=False)
        self.b = nn.Linear(4, 4, bias=False)

    def forward(self, x):
        with torch.no_grad():
            self.a.weight.mul_(0.5)
        return self.b(x)


_MODEL = TwoLinear()


def run_model(x):
    return _MODEL(x)


def _model(tied):
    def make():
        torch.manual_seed(0)
        _MODEL.a.weight = nn.Parameter(torch.randn(4, 4))
        _MODEL.b.weight = _MODEL.a.weight if tied else nn.Parameter(torch.randn(4, 4))
        return (t(2, 4),)
    return make


def test_tied_weights(backend):
    runner(backend)(run_model, [_model(False), _model(True), _model(False), _model(True)],
              observe=lambda: (_MODEL.a.weight.detach().clone(), _MODEL.b.weight.detach().clone()))


# -- non-tensor identity ---------------------------------------------------------------------
class Box:
    def __init__(self, v):
        self.v = v


def objects_identity(x, p, q):
    if p is q:
        return x * p.v
    return x + p.v + q.v


def _boxes(tied):
    def make():
        p = Box(2.0)
        return (t(4), p, p if tied else Box(2.0))
    return make


def objects_mutation(x, p, q):
    p.v = 5.0
    return x * q.v


def lists_identity(x, a, b):
    a.append(1)
    return x * len(b)


def _lists(tied):
    def make():
        a = [1]
        return (t(4), a, a if tied else [1])
    return make


@pytest.mark.parametrize("fn, maker", [
    (objects_identity, _boxes), (objects_mutation, _boxes), (lists_identity, _lists),
])
@pytest.mark.parametrize("tied_first", [True, False])
def test_object_identity(fn, maker, tied_first, backend):
    runner(backend)(fn, [maker(tied_first), maker(not tied_first), maker(tied_first)])


# -- tensor facts ----------------------------------------------------------------------------
def reads_storage_offset(x):
    return x * x.storage_offset()


def _offset(start):
    def make():
        base = t(10)
        return (base[start:start + 4],)
    return make


def reads_is_leaf(x):
    if x.is_leaf:
        return x * 2
    return x * 3


def reads_grad_fn(x):
    if x.grad_fn is None:
        return x + 1
    return x - 1


def _leaf(leaf):
    def make():
        x = t(4, requires_grad=True)
        return (x if leaf else x * 1,)
    return make


def reads_is_view(x):
    if x._is_view():
        return x + 100
    return x


def _view(view):
    def make():
        x = t(4)
        return (x.view(4) if view else x,)
    return make


def contiguous_is(x):
    y = x.contiguous()
    if y is x:
        return y + 1
    return y - 1


def _contig(contiguous):
    def make():
        x = t(4, 4)
        return (x if contiguous else x.t(),)
    return make


def reads_data_ptr_equal(a, b):
    if a.data_ptr() == b.data_ptr():
        return a * 2
    return a + b


def _views_of_one_base(shared):
    def make():
        base = t(8)
        other = base if shared else t(8, seed=3)
        return (base[:4], other[:4])
    return make


@pytest.mark.parametrize("fn, makers", [
    pytest.param(reads_storage_offset, [_offset(1), _offset(2), _offset(0), _offset(1)],
                 id="storage_offset"),
    pytest.param(reads_is_leaf, [_leaf(True), _leaf(False), _leaf(True)], id="is_leaf"),
    pytest.param(reads_is_leaf, [_leaf(False), _leaf(True)], id="is_leaf_reverse"),
    pytest.param(reads_grad_fn, [_leaf(True), _leaf(False), _leaf(True)], id="grad_fn_is_none"),
    pytest.param(reads_grad_fn, [_leaf(False), _leaf(True)], id="grad_fn_reverse"),
    pytest.param(reads_is_view, [_view(False), _view(True), _view(False)], id="is_view"),
    pytest.param(reads_is_view, [_view(True), _view(False)], id="is_view_reverse"),
    pytest.param(contiguous_is, [_contig(True), _contig(False), _contig(True)], id="contiguous_is"),
    pytest.param(reads_data_ptr_equal, [_views_of_one_base(True), _views_of_one_base(False)],
                 id="data_ptr_shared_storage"),
])
def test_tensor_facts(fn, makers, backend):
    runner(backend)(fn, makers)


def test_aliasing_unchanged_hits_the_cache():
    counting = run_steps(add_two, [same(4), same(4), same(4), distinct(4), distinct(4)])
    assert counting is not None and counting.frame_count == 2
