"""Differential cases: guards and recompiles. Each assumption is guarded: a call that breaks one
recompiles (logged with a `[frame/recompile]` marker and the reason), a call that keeps them all
hits the cache, and past `cache_size_limit` the code runs eagerly after one warning."""

from __future__ import annotations

import logging
import os
import re
import warnings

import capture
import guards
import pytest
import torch
from _differential import CountingBackend, assert_same, t
from torch import nn


def _compile(fn):
    capture.reset()
    backend = CountingBackend()
    return capture.optimize(fn, backend=backend, fullgraph=True), backend


def _run_sequence(fn, inputs):
    """Call compiled `fn` on each args tuple; compare with eager; return graph counts after each."""
    compiled, backend = _compile(fn)
    counts = []
    for i, args in enumerate(inputs):
        assert_same(compiled(*args), fn(*args), f"call {i + 1}")
        counts.append(backend.frame_count)
    return counts


def scale_add(x, k):
    return x * k + 1


def plain(x):
    return x.sin() + 1


def two_inputs(x, y):
    return x @ y


def takes_list(x, items):
    return x * len(items) + sum(items)


def takes_dict(x, d):
    out = x
    for key in d:
        out = out + d[key]
    return out


def takes_flag(x, flag):
    return x + 1 if flag else x - 1


def takes_string(x, mode):
    return x.relu() if mode == "relu" else x.tanh()


def takes_none(x, y):
    return x - 1 if y is None else x + y


def takes_callable(x, fn):
    return fn(x)


def takes_dtype(x, dtype):
    return x.to(dtype) * 2


SEQUENCES = [
    pytest.param(plain, [(t(4),), (t(4, seed=1),), (t(4, seed=2),)], [1, 1, 1],
                 id="same_metadata_hits_cache"),
    pytest.param(plain, [(t(4),), (t(8),), (t(4),), (t(8),)], [1, 2, 2, 2],
                 id="shape_change_recompiles_once_per_shape"),
    pytest.param(plain, [(t(4),), (t(4).double(),)], [1, 2], id="dtype_change_recompiles"),
    pytest.param(plain, [(t(4),), (t(4, requires_grad=True),)], [1, 2],
                 id="requires_grad_change_recompiles"),
    pytest.param(plain, [(t(2, 3),), (t(3, 2).T,)], [1, 2], id="stride_change_recompiles"),
    pytest.param(two_inputs, [(t(2, 3), t(3, 4)), (t(2, 3), t(3, 5))], [1, 2],
                 id="second_argument_shape_change"),
    pytest.param(scale_add, [(t(4), 2), (t(4), 2), (t(4), 3)], [1, 1, 2],
                 id="int_constant_change_recompiles"),
    pytest.param(scale_add, [(t(4), 0.5), (t(4), 1.5)], [1, 2], id="float_constant_change"),
    pytest.param(takes_list, [(t(4), [1, 2]), (t(4), [1, 2]), (t(4), [1, 2, 3])], [1, 1, 2],
                 id="list_length_change"),
    pytest.param(takes_list, [(t(4), [1, 2]), (t(4), [1, 5])], [1, 2], id="list_item_change"),
    pytest.param(takes_dict, [(t(4), {"a": 1.0}), (t(4), {"a": 1.0, "b": 2.0})], [1, 2],
                 id="dict_keys_change"),
    pytest.param(takes_flag, [(t(4), True), (t(4), False), (t(4), True)], [1, 2, 2],
                 id="bool_flag_change"),
    pytest.param(takes_string, [(t(4), "relu"), (t(4), "tanh")], [1, 2], id="string_change"),
    pytest.param(takes_none, [(t(4), None), (t(4), t(4))], [1, 2], id="none_to_tensor"),
    pytest.param(takes_callable, [(t(4), torch.sin), (t(4), torch.cos), (t(4), torch.sin)],
                 [1, 2, 2], id="function_identity_change"),
    pytest.param(takes_dtype, [(t(4), torch.float64), (t(4), torch.float16)], [1, 2],
                 id="dtype_constant_change"),
]


@pytest.mark.parametrize(("fn", "inputs", "expected_counts"), SEQUENCES)
def test_guard_sequences(fn, inputs, expected_counts):
    assert _run_sequence(fn, inputs) == expected_counts


G_FACTOR = 2.0


def reads_global(x):
    return x * G_FACTOR


def test_global_constant_change_recompiles():
    global G_FACTOR
    compiled, backend = _compile(reads_global)
    try:
        G_FACTOR = 2.0
        assert_same(compiled(t(4)), reads_global(t(4)))
        G_FACTOR = 3.0
        assert_same(compiled(t(4)), reads_global(t(4)))
        assert backend.frame_count == 2
    finally:
        G_FACTOR = 2.0


def test_grad_mode_change_recompiles():
    compiled, backend = _compile(plain)
    x = t(4, requires_grad=True)
    out = compiled(x)
    assert out.requires_grad
    with torch.no_grad():
        out = compiled(x)
        assert not out.requires_grad
    assert backend.frame_count == 2


def test_module_attribute_change_recompiles():
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.scale = 1.0

        def forward(self, x):
            return self.fc(x) * self.scale

    m = Scaled()
    capture.reset()
    backend = CountingBackend()
    compiled = capture.optimize(m, backend=backend, fullgraph=True)
    x = t(2, 4)
    assert_same(compiled(x), m(x))
    m.scale = 3.0
    assert_same(compiled(x), m(x))
    assert backend.frame_count == 2


def test_closure_value_change_recompiles():
    k = 2.0

    def fn(x):
        return x * k

    compiled, backend = _compile(fn)
    assert_same(compiled(t(4)), t(4) * 2.0)
    k = 5.0
    assert_same(compiled(t(4)), t(4) * 5.0)
    assert backend.frame_count == 2


def test_reset_clears_the_cache():
    backend = CountingBackend()
    capture.reset()
    compiled = capture.optimize(plain, backend=backend, fullgraph=True)
    compiled(t(4))
    capture.reset()
    compiled(t(4))
    assert backend.frame_count == 2


def test_recompile_logged_with_marker_and_reason(caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="capture")
    compiled, _ = _compile(plain)
    compiled(t(4))
    compiled(t(8))
    messages = [r.getMessage() for r in caplog.records]
    marked = [m for m in messages if re.search(r"\[\d+/1\]", m)]
    assert marked, f"no record with a [frame/1] marker among {messages}"
    assert any(re.search(r"recompil", m, re.IGNORECASE) for m in marked), marked
    assert any("L['x']" in m and re.search(r"size|shape", m, re.IGNORECASE) for m in messages), messages


def test_first_compile_marker_is_zero(caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="capture")
    compiled, _ = _compile(plain)
    compiled(t(4))
    assert any(re.search(r"\[\d+/0\]", r.getMessage()) for r in caplog.records)


def _limit_warnings(caught, caplog):
    texts = [str(w.message) for w in caught]
    texts += [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return [m for m in texts if re.search(r"limit", m, re.IGNORECASE)]


def test_cache_size_limit_warns_once_then_runs_eagerly(caplog):
    capture.reset()
    backend = CountingBackend()
    compiled = capture.optimize(plain, backend=backend, fullgraph=False,
                                dynamic=False)  # NOTE: a recompile per shape
    with guards.config.patch(cache_size_limit=2), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (1, 2, 3, 4, 5):
            x = t(n)
            assert_same(compiled(x), plain(x), f"shape ({n},)")
        assert backend.frame_count == 2
        assert len(_limit_warnings(caught, caplog)) == 1
        # Cached entries still work after the limit was reached.
        assert_same(compiled(t(1)), plain(t(1)))
        assert backend.frame_count == 2


def test_new_tensor_objects_with_same_metadata_hit_cache():
    compiled, backend = _compile(two_inputs)
    for seed in range(5):
        compiled(t(2, 3, seed=seed), t(3, 4, seed=seed))
    assert backend.frame_count == 1
    assert backend.calls == 5


def test_two_backends_keep_two_entries():
    capture.reset()
    b1, b2 = CountingBackend(), CountingBackend()
    c1 = capture.optimize(plain, backend=b1, fullgraph=True)
    c2 = capture.optimize(plain, backend=b2, fullgraph=True)
    c1(t(4))
    c2(t(4))
    c1(t(4))
    assert (b1.frame_count, b2.frame_count) == (1, 1)
    assert (b1.calls, b2.calls) == (2, 1)


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).relu()


def _compiled_net():
    torch.manual_seed(0)
    m = _Net()
    capture.reset()
    backend = CountingBackend()
    return m, capture.optimize(m, backend=backend, fullgraph=True), backend


def test_parameter_replaced_with_new_shape():
    m, compiled, backend = _compiled_net()
    x = t(2, 4)
    assert_same(compiled(x), m(x))
    m.fc = nn.Linear(4, 6)
    assert_same(compiled(x), m(x))
    assert backend.frame_count == 2


def test_submodule_swapped_for_same_shape():
    m, compiled, _ = _compiled_net()
    x = t(2, 4)
    compiled(x)
    m.fc = nn.Linear(4, 4)
    assert_same(compiled(x), m(x))


def test_hook_added_after_compile_is_respected():
    m, compiled, _ = _compiled_net()
    x = t(2, 4)
    compiled(x)
    m.fc.register_forward_hook(lambda mod, inp, out: out * 10)
    assert_same(compiled(x), m(x))


def test_frozen_parameter_gets_no_grad():
    m, compiled, _ = _compiled_net()
    x = t(2, 4)
    compiled(x).sum().backward()
    m.zero_grad(set_to_none=True)
    m.fc.weight.requires_grad_(False)
    compiled(x).sum().backward()
    assert m.fc.weight.grad is None
    assert m.fc.bias.grad is not None


def test_autocast_state_is_respected():
    m, compiled, _ = _compiled_net()
    x = t(2, 4)
    compiled(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = m(x)
        actual = compiled(x)
    assert actual.dtype == expected.dtype == torch.bfloat16
    assert_same(actual, expected)


G_WEIGHT = torch.ones(4)


def uses_global_tensor(x):
    return x * G_WEIGHT


def test_global_tensor_reassigned():
    global G_WEIGHT
    compiled, _ = _compile(uses_global_tensor)
    try:
        assert_same(compiled(t(4)), uses_global_tensor(t(4)))
        G_WEIGHT = torch.full((4,), 3.0)
        assert_same(compiled(t(4)), uses_global_tensor(t(4)))
        G_WEIGHT = torch.full((1,), 2.0)
        assert_same(compiled(t(4)), uses_global_tensor(t(4)))
    finally:
        G_WEIGHT = torch.ones(4)


def test_global_tensor_mutated_in_place_is_seen():
    compiled, _ = _compile(uses_global_tensor)
    try:
        compiled(t(4))
        G_WEIGHT.mul_(5)
        assert_same(compiled(t(4)), uses_global_tensor(t(4)))
    finally:
        G_WEIGHT.fill_(1.0)


def test_same_function_compiled_twice_shares_the_code_cache():
    backend = CountingBackend()
    capture.reset()
    first = capture.optimize(plain, backend=backend, fullgraph=True)
    second = capture.optimize(plain, backend=backend, fullgraph=True)
    first(t(4))
    second(t(4))
    assert backend.frame_count == 1, "the cache is per code object, not per wrapper"


def test_nothing_injected_into_user_globals():
    import types

    module = types.ModuleType("user_module_for_capture_test")
    exec(  # noqa: S102 - builds a user module with its own globals
        "import torch\nSCALE = 2.0\ndef f(x, items):\n"
        "    items.append(x.shape[0])\n    return torch.relu(x) * SCALE\n",
        module.__dict__,
    )
    before = set(module.__dict__)
    capture.reset()
    compiled = capture.optimize(module.f, backend=CountingBackend(), fullgraph=True)
    for n in (4, 4, 8):
        compiled(t(n), [])
    assert set(module.__dict__) == before, set(module.__dict__) - before


def reads_environment(x):
    scale = float(os.environ.get("CAPTURE_TEST_ENV_SCALE", "1"))
    return x * scale + ("CAPTURE_TEST_ENV_FLAG" in os.environ)


def test_environment_reads_are_guarded_not_graph_breaks(monkeypatch):
    """`os.environ.get`, `in os.environ` of set and unset variables trace into the graph
    (fullgraph): each read is guarded, so setting, changing or removing a variable
    recompiles and a call with the same environment hits the cache."""
    monkeypatch.delenv("CAPTURE_TEST_ENV_SCALE", raising=False)
    monkeypatch.delenv("CAPTURE_TEST_ENV_FLAG", raising=False)
    compiled, backend = _compile(reads_environment)
    x = torch.arange(3.0)
    counts = []
    for edit in (None, None, ("CAPTURE_TEST_ENV_SCALE", "3"), None,
                 ("CAPTURE_TEST_ENV_FLAG", "1"), ("CAPTURE_TEST_ENV_SCALE", None)):
        if edit is not None:
            name, value = edit
            if value is None:
                monkeypatch.delenv(name)
            else:
                monkeypatch.setenv(name, value)
        assert_same(compiled(x), reads_environment(x), f"environment {dict(os.environ)}")
        counts.append(backend.frame_count)
    assert counts == [1, 1, 2, 2, 3, 4]
