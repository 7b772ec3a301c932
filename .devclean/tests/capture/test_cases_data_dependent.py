"""Cases: data-dependent values under `fullgraph=True` (`.item()`, `.tolist()`, `nonzero`,
`unique`, `repeat_interleave`, `tensor_split` with tensor indices...), differential against
eager with the `eager` and `aot_eager` backends: results, gradients, and the errors eager
raises on bad data (a compiled function must raise too, never return other numbers).

Values read from tensors are unbacked symbols: the graph computes them (no constant, no
guard), so new data reuses the graph; branching on them is unsupported and names the line.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

import capture
import pytest
import torch
from _differential import CountingBackend, assert_same, fresh, line_of, t

_AOTGRAD_SPEC = importlib.util.find_spec("aotgrad")
# NOTE: aot_eager lives in the aotgrad package; capture's tests run without it too. A spec
# without origin is the tests/aotgrad folder seen as a namespace package, not the package.
_HAS_AOTGRAD = _AOTGRAD_SPEC is not None and _AOTGRAD_SPEC.origin is not None
needs_aotgrad = pytest.mark.skipif(not _HAS_AOTGRAD, reason="aotgrad is not installed")
BACKENDS = ["eager", pytest.param("aot_eager", marks=needs_aotgrad)]


class Recording:
    """Wraps a backend (by name) and counts the graphs it receives."""

    def __init__(self, name: str) -> None:
        self.inner = CountingBackend() if name == "eager" else capture.lookup_backend(name)
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.graphs.append(gm)
        return self.inner(gm, example_inputs)


def run(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, BaseException | None]:
    try:
        return fn(*args), None
    except Exception as error:  # noqa: BLE001  # the error is what is compared
        return None, error


def compare(fn: Callable[..., Any], calls: list[tuple[Any, ...]], backend: str,
            grad: bool = False) -> Recording:
    """Compile `fn` once (fullgraph); for each argument tuple compare the compiled call with
    eager: same result (and input gradients with `grad`), or an error of the same class (or a
    RuntimeError from a runtime check of the graph)."""
    capture.reset()
    recording = Recording(backend)
    compiled = capture.optimize(fn, backend=recording, fullgraph=True)
    for index, args in enumerate(calls):
        e_args, c_args = fresh(args), fresh(args)
        expected, e_error = run(fn, e_args)
        actual, c_error = run(compiled, c_args)
        where = f"call {index + 1}"
        if isinstance(c_error, capture.Unsupported):
            raise c_error
        if e_error is not None:
            assert c_error is not None, f"{where}: eager raised {e_error!r}, compiled returned"
            # NOTE: the graph's runtime checks raise RuntimeError where eager's kernel may raise
            # a subclass-free IndexError/ValueError first (as with torch.compile).
            assert isinstance(c_error, (type(e_error), RuntimeError)), (
                f"{where}: eager raised {e_error!r}, compiled raised {c_error!r}")
            continue
        assert c_error is None, f"{where}: compiled raised {c_error!r}"
        assert_same(actual, expected, f"{where}: result")
        if grad:
            e_out = [o for o in torch.utils._pytree.tree_leaves(expected)
                     if isinstance(o, torch.Tensor) and o.requires_grad]
            c_out = [o for o in torch.utils._pytree.tree_leaves(actual)
                     if isinstance(o, torch.Tensor) and o.requires_grad]
            sum(o.sum() for o in e_out).backward()
            sum(o.sum() for o in c_out).backward()
            for i, (a, e) in enumerate(zip(c_args, e_args)):
                if isinstance(e, torch.Tensor) and e.requires_grad:
                    assert_same(a.grad, e.grad, f"{where}: grad of argument {i}")
    return recording


# -- programs --------------------------------------------------------------------------------

def item_returned(x):
    return x.sum().item()


def item_arithmetic(x, t):
    n = t.item()
    return x * (n * 2 + 1), n - 3


def narrow_item_start(x, t):
    return x.narrow(0, t.item(), 2) * 2


def narrow_tensor_start(x, t):
    return torch.narrow(x, 0, t, 3) + 1


def tolist_sum(x):
    total = x * 0
    for v in x.tolist():
        total = total + v
    return total


def tolist_returned(x):
    return x.tolist()


def nonzero_rows(x):
    idx = torch.nonzero(x > 0)
    return idx, idx.float().sum()


def nonzero_count(x):
    return torch.nonzero(x > 0).shape[0] * 2 + 1


def argwhere_op(x):
    return torch.argwhere(x > 0.5)


def masked_select_op(x):
    return torch.masked_select(x, x > 0) * 3


def gather_positive(x):
    return x[torch.nonzero(x > 0).squeeze(1)].exp()


def unique_op(x):
    values, counts = torch.unique(x.round(), sorted=True, return_counts=True)
    return values, counts


def unique_consecutive_op(x):
    return torch.unique_consecutive(x.round(), return_inverse=True)


def repeat_interleave_op(x, r):
    return torch.repeat_interleave(x, r, dim=0)


def tensor_split_op(x, idx):
    return torch.tensor_split(x, idx)


def zeros_of_item(x, t):
    return torch.zeros(t.item()) + x.sum()


def checked_item(x, t):
    n = t.item()
    torch._check(n > 0)
    return x * n


def branch_on_item(x, t):
    if t.item() > 0:  # BREAK
        return x + 1
    return x - 1


def int_of_item(x):
    n = int(x.sum().item())  # BREAK
    return x * n


def index_with_item(x, t):
    return x[t.item()] * 2


def slice_with_item(x, t):
    n = t.item()
    return x[: n // 2 + 1], x[1:n]


def reshape_with_item(x, t):
    return x.reshape(t.item(), -1)


def arange_of_item(x, t):
    return torch.arange(t.item()) * x.sum()


def min_max_of_items(x, t):
    n = t.item()
    return x[: max(n, 1)] * min(n, 2, t.sum().item()), max(x.sum().item(), 0.5)


def tensor_of_item(x, t):
    return torch.tensor(t.item()) + x.int(), torch.tensor(x.sum().item(), dtype=torch.float64)


CASES = [
    (item_returned, [(t(4),), (t(4, seed=1),)]),
    (item_arithmetic, [(t(3), torch.tensor(2)), (t(3), torch.tensor(-5))]),
    (narrow_item_start, [(t(5), torch.tensor(1)), (t(5), torch.tensor(3)),
                         (t(5), torch.tensor(4)), (t(5), torch.tensor(-2)),
                         (t(5), torch.tensor(9))]),
    (narrow_tensor_start, [(t(6), torch.tensor(0)), (t(6), torch.tensor(3)),
                           (t(6), torch.tensor(5))]),
    (tolist_sum, [(t(4),), (t(4, seed=2),)]),
    (tolist_returned, [(t(2, 3),), (t(2, 3, seed=1),)]),
    (nonzero_rows, [(t(6),), (t(6, seed=3),), (-t(6).abs(),)]),
    (nonzero_count, [(t(7),), (t(7, seed=4),)]),
    (argwhere_op, [(t(3, 4),), (t(3, 4, seed=1),)]),
    (masked_select_op, [(t(2, 5),), (t(2, 5, seed=2),)]),
    (gather_positive, [(t(8),), (t(8, seed=5),)]),
    (unique_op, [(t(9) * 3,), (t(9, seed=1) * 3,)]),
    (unique_consecutive_op, [(t(9) * 2,), (t(9, seed=2) * 2,)]),
    (repeat_interleave_op, [(t(4, 2), torch.tensor([1, 0, 3, 2])),
                            (t(4, 2), torch.tensor([2, 2, 2, 2])),
                            (t(4, 2), torch.tensor([1, -1, 3, 2]))]),
    (tensor_split_op, [(t(7), torch.tensor([2, 5])), (t(7), torch.tensor([5, 2])),
                       (t(7), torch.tensor([0, 9]))]),
    (zeros_of_item, [(t(2), torch.tensor(3)), (t(2), torch.tensor(0)),
                     (t(2), torch.tensor(-1))]),
    (checked_item, [(t(3), torch.tensor(2)), (t(3), torch.tensor(-2))]),
    (index_with_item, [(t(5, 3), torch.tensor(1)), (t(5, 3), torch.tensor(-2)),
                       (t(5, 3), torch.tensor(7))]),
    (slice_with_item, [(t(6, 2), torch.tensor(3)), (t(6, 2), torch.tensor(-4)),
                       (t(6, 2), torch.tensor(20))]),
    (reshape_with_item, [(t(4, 3), torch.tensor(6)), (t(4, 3), torch.tensor(4)),
                         (t(4, 3), torch.tensor(5))]),
    (arange_of_item, [(t(2), torch.tensor(4)), (t(2), torch.tensor(0)),
                      (t(2), torch.tensor(-3))]),
    (min_max_of_items, [(t(4), torch.tensor(3)), (t(4, seed=1), torch.tensor(-1))]),
    (tensor_of_item, [(t(3), torch.tensor(5)), (t(3, seed=2), torch.tensor(-2))]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("fn", "calls"), CASES, ids=[c[0].__name__ for c in CASES])
def test_data_dependent_matches_eager(fn, calls, backend):
    recording = compare(fn, calls, backend)
    # New data never recompiles: values read from tensors are not guarded.
    assert len(recording.graphs) == 1, f"{len(recording.graphs)} graphs"


GRAD_CASES = [
    (narrow_item_start, [(t(5, requires_grad=True), torch.tensor(1)),
                         (t(5, requires_grad=True), torch.tensor(3))]),
    (masked_select_op, [(t(2, 5, requires_grad=True),), (t(2, 5, seed=1, requires_grad=True),)]),
    (gather_positive, [(t(8, requires_grad=True),), (t(8, seed=5, requires_grad=True),)]),
    (repeat_interleave_op, [(t(4, 2, requires_grad=True), torch.tensor([1, 0, 3, 2]))]),
    (tensor_split_op, [(t(7, requires_grad=True), torch.tensor([2, 5]))]),
    (item_arithmetic, [(t(3, requires_grad=True), torch.tensor(2))]),
    (index_with_item, [(t(5, 3, requires_grad=True), torch.tensor(-2))]),
    (slice_with_item, [(t(6, 2, requires_grad=True), torch.tensor(3))]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("fn", "calls"), GRAD_CASES, ids=[c[0].__name__ for c in GRAD_CASES])
def test_data_dependent_gradients_match_eager(fn, calls, backend):
    compare(fn, calls, backend, grad=True)


def test_item_is_a_graph_value_not_a_constant():
    recording = compare(narrow_item_start, [(t(5), torch.tensor(1)), (t(5), torch.tensor(2))],
                        "eager")
    (gm,) = recording.graphs
    targets = [n.target for n in gm.graph.nodes if n.op in ("call_method", "call_function")]
    assert "item" in targets
    narrow = next(n for n in gm.graph.nodes if n.target == "narrow")
    assert isinstance(narrow.args[2], torch.fx.Node), narrow.args  # the start is computed


def test_item_can_be_an_output_and_reaches_python():
    capture.reset()
    compiled = capture.optimize(item_arithmetic, backend=CountingBackend(), fullgraph=True)
    _, n = compiled(t(3), torch.tensor(7))
    assert type(n) is int and n == 4


@pytest.mark.parametrize("fn", [branch_on_item, int_of_item], ids=lambda f: f.__name__)
def test_branch_on_read_value_is_unsupported_with_the_line(fn):
    capture.reset()
    args = (t(3), torch.tensor(1)) if fn is branch_on_item else (t(3),)
    compiled = capture.optimize(fn, backend=CountingBackend(), fullgraph=True)
    try:
        result = compiled(*args)
    except capture.Unsupported as error:
        message = str(error)
        assert os.path.basename(__file__) in message, message
        assert str(line_of(fn, "# BREAK")) in message, message
        assert "data-dependent" in message
    else:
        assert fn is int_of_item  # int() of a read float may be supported: then it is right
        assert_same(result, fn(*args))


@pytest.mark.parametrize("value", [1, -1])
def test_branch_on_item_without_fullgraph_runs_eagerly(value):
    capture.reset()
    compiled = capture.optimize(branch_on_item, backend=CountingBackend(), fullgraph=False)
    x = t(3)
    assert_same(compiled(x, torch.tensor(value)), branch_on_item(x, torch.tensor(value)))


def test_bool_known_from_value_ranges_needs_no_branch():
    def fn(x):
        n = torch.nonzero(x).shape[0]
        if n >= 0:  # always true for a size: decided without a guard or an assumption
            return x + n
        return x

    compare(fn, [(t(4),), (torch.zeros(4),)], "eager")


def int_float_of_items(x, t):
    n = int(x.sum().item() * 3)
    f = float(t.item())
    return x * n + f, n // 2, n % 3


def len_of_nonzero(x):
    idx = torch.nonzero(x > 0)
    return idx.sum() + len(idx)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [int_float_of_items, len_of_nonzero], ids=lambda f: f.__name__)
def test_python_conversions_of_read_values(fn, backend):
    calls = [(t(4), torch.tensor(3)), (t(4, seed=1), torch.tensor(-2))]
    if fn is len_of_nonzero:
        calls = [(t(4),), (t(4, seed=1),)]
    recording = compare(fn, calls, backend)
    assert len(recording.graphs) == 1


def test_runtime_checks_are_in_the_captured_graph():
    recording = compare(narrow_item_start, [(t(5), torch.tensor(1))], "eager")
    (gm,) = recording.graphs
    checks = [n for n in gm.graph.nodes if n.target is torch.ops.aten._assert_scalar.default]
    assert checks, gm.code
    plain = compare(lambda x: x.sin() + 1, [(t(3),)], "eager")
    assert not any(n.target is torch.ops.aten._assert_scalar.default
                   for n in plain.graphs[0].graph.nodes)


def two_data_dependent_sizes(x, y):
    return torch.nonzero(x > 0) + torch.nonzero(y > 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_assumed_equal_sizes_are_checked(backend):
    # Tracing assumes two data-dependent sizes are equal (not broadcast from 1, as with
    # torch.compile); data that breaks the assumption raises instead of using the trace.
    capture.reset()
    compiled = capture.optimize(two_data_dependent_sizes, backend=Recording(backend),
                                fullgraph=True)
    x, y = torch.tensor([1.0, -1.0, 2.0]), torch.tensor([3.0, 4.0, -1.0])
    assert_same(compiled(x, y), two_data_dependent_sizes(x, y))
    y = torch.tensor([3.0, -4.0, -1.0])  # one row: eager broadcasts
    with pytest.raises(RuntimeError, match="check failed"):
        compiled(x, y)
