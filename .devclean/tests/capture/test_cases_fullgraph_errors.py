"""Cases: an unsupported construct under fullgraph=True raises `capture.Unsupported` naming the
user's file and line; under fullgraph=False the frame runs eagerly with the same result."""

# ruff: noqa: F841  # the corpus spells these constructs on purpose: it tests them

from __future__ import annotations

import os

import capture
import pytest
import torch
from _differential import CountingBackend, assert_same, line_of, t


def data_dependent_branch(x):
    y = x * 2
    if y.sum() > 0:  # BREAK
        return y + 1
    return y - 1


def item_into_python(x):
    n = int(x.sum().item())  # BREAK
    return x * n


def prints_something(x):
    y = x + 1
    print("value", y.shape)  # BREAK
    return y


def data_dependent_while(x):
    while x.abs().max() > 1:  # BREAK
        x = x / 2
    return x


def bool_of_tensor(x):
    return x * 2 if x.any() else x  # BREAK


def tolist_loop(x):
    total = x * 0
    for v in x.tolist():  # BREAK
        total = total + v
    return total


def branch_on_item(x):
    if x.sum().item() > 0:  # BREAK
        return x + 1
    return x - 1


def nonzero_dynamic_shape(x):
    idx = torch.nonzero(x > 0)  # BREAK
    return idx.float().sum()


def raises_exception(x):
    y = x * 2
    raise ValueError("user error")  # BREAK


def _generator(x):
    yield x
    yield x * 2


def consumes_user_generator(x):
    return sum(_generator(x))  # BREAK


def calls_numpy_on_tensor(x):
    return torch.from_numpy(x.numpy() * 2)  # BREAK


# Constructs that cannot be one graph (data-dependent Python control flow, I/O, raising).
BREAKING = [data_dependent_branch, data_dependent_while, bool_of_tensor, prints_something,
            branch_on_item]
# Constructs a capture may support or reject; if it rejects, the error must name the line.
MAYBE = [item_into_python, nonzero_dynamic_shape, consumes_user_generator, calls_numpy_on_tensor,
         tolist_loop]


def _assert_names_location(fn, error):
    message = str(error)
    assert os.path.basename(__file__) in message, message
    assert str(line_of(fn, "# BREAK")) in message, message


@pytest.mark.parametrize("fn", MAYBE, ids=lambda f: f.__name__)
def test_fullgraph_supported_or_error_names_line(fn):
    capture.reset()
    compiled = capture.optimize(fn, backend=CountingBackend(), fullgraph=True)
    x = t(4)
    try:
        result = compiled(x)
    except capture.Unsupported as error:
        _assert_names_location(fn, error)
    else:
        assert_same(result, fn(x))


@pytest.mark.parametrize("fn", BREAKING + [raises_exception], ids=lambda f: f.__name__)
def test_fullgraph_error_names_file_and_line(fn):
    capture.reset()
    compiled = capture.optimize(fn, backend=CountingBackend(), fullgraph=True)
    with pytest.raises((capture.Unsupported, ValueError)) as info:
        compiled(t(4))
    if fn is raises_exception and isinstance(info.value, ValueError):
        return  # re-raising the user's own exception is also correct
    _assert_names_location(fn, info.value)


@pytest.mark.parametrize("fn", BREAKING + MAYBE, ids=lambda f: f.__name__)
def test_without_fullgraph_runs_correctly(fn, capsys):
    capture.reset()
    compiled = capture.optimize(fn, backend=CountingBackend(), fullgraph=False)
    for seed in range(2):
        x = t(4, seed=seed)
        assert_same(compiled(x), fn(x), f"seed {seed}")


def test_fullgraph_error_mentions_the_construct():
    capture.reset()
    compiled = capture.optimize(data_dependent_branch, backend=CountingBackend(), fullgraph=True)
    with pytest.raises(capture.Unsupported) as info:
        compiled(t(4))
    text = str(info.value)
    assert "y.sum() > 0" in text or "data-dependent" in text.lower() or "bool" in text.lower()


def test_fullgraph_error_in_inlined_callee_names_callee_line():
    def outer(x):
        return data_dependent_branch(x) + 1

    capture.reset()
    compiled = capture.optimize(outer, backend=CountingBackend(), fullgraph=True)
    with pytest.raises(capture.Unsupported) as info:
        compiled(t(4))
    assert str(line_of(data_dependent_branch, "# BREAK")) in str(info.value)
