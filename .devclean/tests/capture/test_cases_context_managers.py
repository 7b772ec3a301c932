"""Differential cases: grad-mode and autocast context managers, try/finally that raises nothing."""

from __future__ import annotations

import capture
import pytest
import torch
from _differential import case, check, t


def ctx_no_grad(x):
    with torch.no_grad():
        y = x * 2
    return y + x


def ctx_no_grad_whole_body(x):
    with torch.no_grad():
        return x.sin() * 3


def ctx_enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
    return a + b


def ctx_set_grad_enabled_false(x):
    with torch.set_grad_enabled(False):
        y = x.exp()
    return y, x.exp()


def ctx_set_grad_enabled_from_flag(x, flag):
    with torch.set_grad_enabled(flag):
        y = x * x
    return y


def ctx_no_grad_decorated_helper(x):
    @torch.no_grad()
    def stats(v):
        return v.mean()

    return x - stats(x)


def ctx_autocast_bfloat16_matmul(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
    return y.float() + 1


def ctx_autocast_disabled_region(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.autocast("cpu", enabled=False):
            y = x @ w
        z = x @ w
    return y, z


def ctx_try_finally(x):
    state = []
    try:
        y = x * 2
        state.append(1)
    finally:
        state.append(2)
    return y + len(state)


def ctx_try_except_not_raised(x, d):
    try:
        v = d["k"]
    except KeyError:
        v = 0.0
    return x * v


def ctx_try_finally_return_inside(x):
    try:
        return x + 1
    finally:
        pass


def ctx_nested_with_and_loop(x):
    out = []
    with torch.no_grad():
        for i in range(3):
            out.append(x * i)
    return torch.stack(out)


def ctx_record_function_block(x):
    with torch.autograd.profiler.record_function("my_block") as rf:
        y = x * 2
    return y + 1, rf is not None


def ctx_profiler_record_function_nested_no_grad(x):
    with torch.profiler.record_function("outer"), torch.no_grad():
        y = x.sin()
    return y * x


def ctx_record_function_decorator(x):
    @torch.autograd.profiler.record_function("helper")
    def helper(v):
        return v.cos()

    return helper(x) + x


def ctx_typing_cast(x):
    import typing

    y = typing.cast(torch.Tensor, x * 2)
    z = typing.assert_type(y, torch.Tensor)
    if typing.TYPE_CHECKING:
        z = z * 100
    return typing.cast("torch.Tensor", z) + 1


def ctx_record_function_graph_break_inside(x):
    with torch.autograd.profiler.record_function("broken"):
        y = x * 2
        capture.graph_break()
        z = y + 1
    return z * 3


CASES = [
    case(ctx_record_function_block, t(4)),
    case(ctx_profiler_record_function_nested_no_grad, t(4, requires_grad=True), grad=True),
    case(ctx_record_function_decorator, t(4)),
    case(ctx_typing_cast, t(4)),
    case(ctx_record_function_graph_break_inside, t(4), graphs=2, fullgraph=False),
    case(ctx_no_grad, t(4, requires_grad=True), grad=True),
    case(ctx_no_grad_whole_body, t(4, requires_grad=True)),
    case(ctx_enable_grad_inside_no_grad, t(4, requires_grad=True), grad=True),
    case(ctx_set_grad_enabled_false, t(4, requires_grad=True), grad=True),
    case(ctx_set_grad_enabled_from_flag, t(4, requires_grad=True), False),
    case(ctx_no_grad_decorated_helper, t(4, requires_grad=True), grad=True),
    case(ctx_autocast_bfloat16_matmul, t(4, 8), t(8, 4, seed=1)),
    case(ctx_autocast_disabled_region, t(4, 8), t(8, 4, seed=1)),
    case(ctx_try_finally, t(4)),
    case(ctx_try_except_not_raised, t(4), {"k": 2.0}),
    case(ctx_try_finally_return_inside, t(4)),
    case(ctx_nested_with_and_loop, t(4, requires_grad=True)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_context_managers(fn, args, opts):
    check(fn, *args, **opts)


def test_grad_mode_restored_after_call():
    """A compiled function that uses no_grad leaves the caller's grad mode untouched."""
    import capture
    from _differential import CountingBackend

    capture.reset()
    compiled = capture.optimize(ctx_no_grad, backend=CountingBackend(), fullgraph=True)
    compiled(t(4, requires_grad=True))
    assert torch.is_grad_enabled()
    with torch.no_grad():
        compiled(t(4, requires_grad=True))
        assert not torch.is_grad_enabled()
