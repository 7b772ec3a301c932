"""Graph breaks with resume functions: at a construct capture cannot put in a graph (a
branch on a tensor's value, `print`, a `disable`d call, an opaque call) the graph so far is
compiled, the construct runs for real and a resume function continues the frame, itself
compiled. Results and side effects equal eager's over several calls; graph counts are at
most torch.compile's on the same program, counted in the same run."""

from __future__ import annotations

import contextlib
import io

import capture
import pytest
import torch
from _differential import CountingBackend, assert_same, fresh, t

LOG: list[object] = []


def _count_torch_graphs(fn, calls) -> int:
    """Graphs torch.compile (the yardstick, with a counting eager backend) makes for `calls`."""
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(fn, backend=backend)
    with contextlib.redirect_stdout(io.StringIO()):
        for args in calls:
            compiled(*fresh(args))
    torch._dynamo.reset()
    return len(graphs)


def run_both(fn, calls, *, graphs: int | None = None, compare_torch: bool = False):
    """Each call's args run eagerly and compiled (fresh copies); results, arguments after
    the call and printed output compared; returns the backend."""
    capture.reset()
    backend = CountingBackend()
    compiled = capture.optimize(fn, backend=backend)
    for i, args in enumerate(calls):
        e_args, c_args = fresh(args), fresh(args)
        e_out, c_out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(e_out):
            expected = fn(*e_args)
        with contextlib.redirect_stdout(c_out):
            actual = compiled(*c_args)
        assert_same(actual, expected, f"call {i + 1}: result")
        assert_same(list(c_args), list(e_args), f"call {i + 1}: arguments after the call")
        assert c_out.getvalue() == e_out.getvalue(), f"call {i + 1}: printed output"
    if graphs is not None:
        assert backend.frame_count == graphs, f"{backend.frame_count} graphs, expected {graphs}"
    if compare_torch:
        theirs = _count_torch_graphs(fn, calls)
        assert backend.frame_count <= theirs, f"ours {backend.frame_count} > torch {theirs}"
    return backend


def branch_on_tensor(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def test_branch_on_a_tensor_value_one_graph_per_branch_taken():
    pos, neg = t(4).abs(), -t(4, seed=1).abs()
    backend = run_both(branch_on_tensor, [(t(4), pos), (t(4), neg), (t(4), pos), (t(4), neg)],
                       graphs=3, compare_torch=True)
    # the graph before the branch holds the division; each branch's graph the product
    assert any("div" in str(n.target) for n in backend.call_nodes(0))


def print_in_the_middle(x):
    y = x.sin() * 2
    print("between", y.shape)
    return y.cos() + 1


def test_print_in_the_middle_keeps_the_output_and_splits_once():
    run_both(print_in_the_middle, [(t(3),), (t(3, seed=2),)], graphs=2, compare_torch=True)


def item_then_python_arithmetic(x):
    s = x.sum().item()
    scale = s * 2 + 1
    if scale > 0:
        return x * 2
    return x - 3


def test_item_then_branch():
    run_both(item_then_python_arithmetic, [(t(4).abs(),), (-t(4).abs(),), (t(4).abs(),)])


@capture.disable
def opaque(y):
    return y * 3 + 1


def calls_disabled(x):
    y = x + 1
    z = opaque(y)
    return z * 2, y.sum()


def test_disabled_call_is_a_break_around_that_call():
    backend = run_both(calls_disabled, [(t(4),), (t(4, seed=3),)], graphs=2)
    assert all(len(backend.call_nodes(i)) >= 1 for i in range(2))


def effects_before_break(x, log, box):
    log.append(x.sum())
    box["n"] = box.get("n", 0) + 1
    LOG.append(len(log))
    print("effects")
    log.append("after")
    return x * box["n"]


def test_side_effects_before_the_break_happen_once_and_in_order():
    LOG.clear()
    run_both(effects_before_break, [(t(2), [], {}), (t(2), [1], {"n": 5})])
    # eager, compiled, eager, compiled: each entry the length of that call's list
    assert LOG == [1, 1, 2, 2]


def two_breaks(x):
    y = x + 1
    print("one")
    z = y * 2
    print("two")
    return z - y


def test_two_breaks_three_graphs():
    run_both(two_breaks, [(t(3),), (t(3, seed=4),)], graphs=3, compare_torch=True)


def locals_after_break(x, n):
    total = x * 0
    k = n + 1
    print("k", k)
    for i in range(k):
        total = total + x * i
    return total, k


def test_locals_survive_the_break():
    run_both(locals_after_break, [(t(3), 2), (t(3), 2)])


def break_inside_loop(x):
    for i in range(3):
        x = x + i
        print("iteration", i)
    return x


def test_break_inside_a_loop_keeps_eager_results():
    # NOTE: one graph before the first break and one per later iteration (each resume
    # function continues the loop with the iterator's remaining items; the last one has no
    # tensor work). torch.compile skips a frame with a break in a loop (0 graphs: the whole
    # loop runs eagerly).
    backend = run_both(break_inside_loop, [(t(3),), (t(3),)], graphs=3)
    assert all(len(backend.call_nodes(i)) >= 1 for i in range(3))


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x).relu()
            print("layer", i, x.sum() > 0)
        return x * 2


def test_break_inside_a_loop_over_modules_with_data_dependent_print():
    torch.manual_seed(0)
    backend = run_both(Stack(), [(t(2, 4),), (t(2, 4, seed=3),)])
    ops = [str(n.target) for i in range(backend.frame_count) for n in backend.call_nodes(i)]
    assert sum("linear" in op for op in ops) == 3, ops


def loop_break_keeps_list_order(xs):
    out = []
    for x in xs:
        out.append(x * 2)
        print(len(out))
    return out


def test_break_inside_a_loop_over_a_list_argument():
    run_both(loop_break_keeps_list_order, [([t(2), t(2, seed=1)],), ([t(2)],)])


def break_inside_no_grad(x):
    with torch.no_grad():
        y = x * 2
        print("inside")
    return y + x


def test_break_inside_with_block_keeps_eager_semantics():
    backend = run_both(break_inside_no_grad,
                       [(t(3, requires_grad=True),), (t(3, requires_grad=True),)],
                       graphs=2, compare_torch=True)
    assert torch.is_grad_enabled()
    del backend


def break_inside_nested_grad_blocks(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
            print("deep")
            c = b * 4
        d = x * 5
    return a, b, c, d, x * 6


def test_break_inside_nested_grad_blocks_reenters_both():
    capture.reset()
    compiled = capture.optimize(break_inside_nested_grad_blocks, backend=CountingBackend())
    for _ in range(2):
        x = t(3, requires_grad=True)
        with contextlib.redirect_stdout(io.StringIO()):
            got, expected = compiled(x), break_inside_nested_grad_blocks(x)
        assert_same(got, expected)
        assert [g.requires_grad for g in got] == [e.requires_grad for e in expected]
        assert torch.is_grad_enabled()


@capture.disable
def _raises_value_error(y):
    raise ValueError("from the disabled call")


def break_that_raises_inside_no_grad(x):
    with torch.no_grad():
        y = x * 2
        _raises_value_error(y)
    return y


def test_exception_at_a_break_inside_no_grad_restores_grad_mode():
    capture.reset()
    compiled = capture.optimize(break_that_raises_inside_no_grad, backend=CountingBackend())
    for _ in range(2):
        with pytest.raises(ValueError, match="from the disabled call"):
            compiled(t(2, requires_grad=True))
        assert torch.is_grad_enabled()


def break_inside_try(x):
    try:
        y = x * 2
        print("in try")
    except ValueError:
        y = x
    return y + 1


def test_break_inside_try():
    # NOTE: torch.compile runs a frame with a break inside `try` eagerly (0 graphs)
    run_both(break_inside_try, [(t(3),), (t(3, seed=1),)], graphs=2)
    assert _count_torch_graphs(break_inside_try, [(t(3),)]) == 0


@capture.disable
def _raises_if_positive(y):
    if y.sum() > 0:
        raise ValueError("positive")
    return y * 3


def break_that_may_raise_inside_try(x, log):
    y = x * 2
    try:
        z = _raises_if_positive(y)
        z = z + 1
    except ValueError as e:
        log.append(str(e))
        z = y - 1
    finally:
        log.append("finally")
    return z * 2


def test_exception_at_a_break_inside_try_goes_to_the_handler():
    # NOTE: the exception continues in a resume function entered at the handler
    pos, neg = t(3).abs() + 0.1, -t(3).abs() - 0.1
    run_both(break_that_may_raise_inside_try, [(pos, []), (neg, []), (pos, []), (neg, [])])


def break_in_no_grad_in_try(x):
    try:
        with torch.no_grad():
            y = x * 2
            z = _raises_if_positive(y)
    except ValueError:
        z = x * 5
    return z + x, torch.is_grad_enabled()


def test_exception_at_a_break_in_no_grad_inside_try_leaves_the_block_first():
    pos, neg = t(3).abs() + 0.1, -t(3).abs() - 0.1
    run_both(break_in_no_grad_in_try,
             [(pos.requires_grad_(),), (neg.requires_grad_(),), (pos,), (neg,)])
    assert torch.is_grad_enabled()


def break_inside_except(x):
    try:
        raise KeyError("k")
    except KeyError:
        y = x * 2
        print("in except")
    return y + 1


def test_break_inside_an_except_clause_resumes_in_the_handler():
    # NOTE: torch.compile runs this frame eagerly (0 graphs); capture compiles both sides
    run_both(break_inside_except, [(t(3),), (t(3, seed=1),)], graphs=2)


def _helper_with_print(y):
    z = y.exp()
    print("helper")
    return z + 1


def break_inside_inlined_call(x):
    y = x * 2
    return _helper_with_print(y) - y


def test_break_inside_an_inlined_call_compiles_the_callee_too():
    backend = run_both(break_inside_inlined_call, [(t(3),), (t(3, seed=5),)],
                       compare_torch=True)
    ops = [str(n.target) for i in range(backend.frame_count) for n in backend.call_nodes(i)]
    assert any("exp" in op for op in ops), "the helper's own frame was not compiled"


class Inner(torch.nn.Module):
    def forward(self, y):
        z = y.tanh()
        print("inner module")
        return z * 3


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x + 1) - 1


def test_break_inside_a_submodule_compiles_the_submodule():
    backend = run_both(Outer(), [(t(3),), (t(3, seed=7),)], compare_torch=True)
    ops = [str(n.target) for i in range(backend.frame_count) for n in backend.call_nodes(i)]
    assert any("tanh" in op for op in ops), "the submodule's forward was not compiled"


def keyword_call_break(x, g):
    noise = torch.randn(x.shape, generator=g)
    return x + noise


def test_break_at_a_keyword_call():
    capture.reset()
    compiled = capture.optimize(keyword_call_break, backend=CountingBackend())
    g_e, g_c = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    for _ in range(3):
        x = t(4)
        assert_same(compiled(x, g_c), keyword_call_break(x, g_e))


def closure_break():
    scale = 3.0

    def f(x):
        y = x * scale
        print("closure")
        return y + scale

    return f


def test_break_in_a_closure():
    run_both(closure_break(), [(t(3),), (t(3, seed=6),)], graphs=2)


def training_through_break(w, x):
    h = (x @ w).relu()
    if h.sum() > 0:
        h = h * 2
    return (h - 1).pow(2).mean()


def test_gradients_through_a_graph_break():
    capture.reset()
    compiled = capture.optimize(training_through_break, backend=CountingBackend())
    for seed in range(3):
        w_e = t(4, 3, seed=seed, requires_grad=True)
        w_c = w_e.detach().clone().requires_grad_()
        x = t(2, 4, seed=seed + 10)
        training_through_break(w_e, x).backward()
        compiled(w_c, x).backward()
        assert_same(w_c.grad, w_e.grad, "grad")


def test_fullgraph_still_raises_at_the_first_break():
    compiled = capture.optimize(print_in_the_middle, backend=CountingBackend(), fullgraph=True)
    with pytest.raises(Exception, match="print"):
        compiled(t(3))


DISPATCH = {int: 2.0, float: 3.0}


def reads_a_type_keyed_dict(x):
    table = DISPATCH
    get = table.get
    return x * get(int, 0.0) + get(str, 1.0)


def test_c_method_of_a_type_keyed_global_dict_compiles_once():
    # NOTE: reading `table.get` once made a new bound method whose identity was guarded,
    # so every call recompiled.
    backend = run_both(reads_a_type_keyed_dict, [(t(3),), (t(3, seed=1),), (t(3),)])
    assert backend.frame_count <= 1


def calls_an_opaque_c_function(x):
    import zlib

    return x * (zlib.crc32(b"abc") % 7)


def test_fullgraph_error_for_an_unsupported_call_says_what_to_do():
    compiled = capture.optimize(calls_an_opaque_c_function, backend=CountingBackend(),
                                fullgraph=True)
    with pytest.raises(capture.Unsupported) as info:
        compiled(t(3))
    text = str(info.value)
    assert "crc32" in text and "calls_an_opaque_c_function" in text
    for remedy in ("compiler.disable", "compiler.allow_in_graph", "compiler.substitute_in_graph"):
        assert remedy in text


def break_in_a_nested_call(x):
    # the break at opaque() leaves torch.relu and the NULL of its pending call on the stack
    return torch.relu(opaque(x.sin()) * 2) + torch.from_numpy(x.numpy() * 3)


def test_break_in_the_argument_of_a_pending_call():
    run_both(break_in_a_nested_call, [(t(4),), (t(4, seed=1),)])


def grouped_then_break(w):
    from torch.utils._foreach_utils import _group_tensors_by_device_and_dtype

    grads = [w * 1]
    grouped = _group_tensors_by_device_and_dtype([grads])
    print("grouped")
    for [tensors], _ in grouped.values():
        torch._foreach_mul_(tensors, 0.5)
    return grads[0]


def test_a_torch_helper_returning_tensors_in_a_dict_never_passes_fake_tensors_on():
    # NOTE: its result once became a constant holding the trace's fake tensors, which the
    # resume function then received in place of the real ones (silently wrong results).
    run_both(grouped_then_break, [(t(3),), (t(3, seed=1),)])


def test_clip_grad_norm_through_breaks_in_no_grad_blocks():
    def clip(w):
        torch.nn.utils.clip_grad_norm_([w], 0.1)
        return w * 2

    capture.reset()
    compiled = capture.optimize(clip, backend=CountingBackend())
    for seed in range(3):
        w_e, w_c = t(3, seed=seed, requires_grad=True), t(3, seed=seed, requires_grad=True)
        w_e.grad, w_c.grad = t(3, seed=seed + 7), t(3, seed=seed + 7)
        assert_same(compiled(w_c), clip(w_e))
        assert_same(w_c.grad, w_e.grad, "clipped grad")
