"""capture.frame: argument binding, the guard cache hot path, recompiles with their
`[frame/recompile]` log marker, the cache-size limit, eager fallback, fullgraph errors,
backend errors, verbose printing, and the transformed code object."""

from __future__ import annotations

import contextlib
import logging
import warnings

import capture
import guards
import pytest
import torch
from capture.frame import make_binder


def _counting():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm.forward

    return backend, graphs


def test_binder_matches_python_binding() -> None:
    def f(a, b=2, *args, c, d=4, **kw):
        return a

    bind = make_binder(f)
    assert bind(1, c=3) == {"a": 1, "b": 2, "c": 3, "d": 4, "args": (), "kw": {}}
    assert bind(1, 5, 6, 7, c=3, z=9) == {
        "a": 1, "b": 5, "c": 3, "d": 4, "args": (6, 7), "kw": {"z": 9}
    }
    with pytest.raises(TypeError):
        bind()


def test_binder_positional_only_and_free_variables() -> None:
    k = 10

    def f(a, /, b):
        return a + b + k

    bind = make_binder(f)
    assert bind(1, b=2) == {"a": 1, "b": 2, "k": 10}


def test_cache_hit_and_recompile_marker(caplog: pytest.LogCaptureFixture) -> None:
    backend, graphs = _counting()

    def f(x):
        return x * 2

    fast = capture.optimize(f, backend=backend, fullgraph=True)
    fast(torch.ones(3))
    fast(torch.ones(3))
    assert len(graphs) == 1
    with caplog.at_level(logging.INFO, logger="capture.recompiles"):
        fast(torch.ones(5))
    assert len(graphs) == 2
    text = caplog.text
    assert f"[{fast.frame_id}/1]" in text and "L['x']" in text


def test_cache_size_limit_warns_once_then_runs_eagerly() -> None:
    backend, graphs = _counting()

    def f(x):
        return x + 1

    fast = capture.optimize(f, backend=backend, fullgraph=True, dynamic=False)
    with (guards.config.patch(cache_size_limit=2), capture.config.patch(log_recompiles=False),
          warnings.catch_warnings(record=True) as caught):
        warnings.simplefilter("always")
        for n in range(1, 6):
            torch.testing.assert_close(fast(torch.ones(n)), torch.ones(n) + 1)
    assert len(graphs) == 2
    assert sum("cache_size_limit" in str(w.message) for w in caught) == 1


def test_fullgraph_error_names_file_and_line() -> None:
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    fast = capture.optimize(f, backend="eager", fullgraph=True)
    with pytest.raises(capture.Unsupported) as info:
        fast(torch.ones(2))
    assert __file__ in str(info.value)
    assert info.value.user_location.startswith(__file__)
    assert "if x.sum() > 0" in str(info.value)


def test_unsupported_without_fullgraph_runs_eagerly_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @contextlib.contextmanager
    def opened():
        yield

    def f(x):
        # NOTE: no graph break while a generator-based context manager is open (its
        # generator cannot be resumed elsewhere): the frame runs eagerly
        with opened():
            if x.sum().item() > 0:  # branching on a value read from a tensor
                return x + 1
        return x - 1

    fast = capture.optimize(f, backend="eager")
    with caplog.at_level(logging.WARNING, logger="capture"):
        a = fast(torch.ones(2))
        b = fast(torch.ones(2))
    torch.testing.assert_close(a, f(torch.ones(2)))
    torch.testing.assert_close(b, a)
    assert caplog.text.count("running it eagerly") == 1


def test_unsupported_without_fullgraph_breaks_the_graph_and_logs_the_break(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def f(x):
        if x.sum().item() > 0:  # branching on a value read from a tensor
            return x + 1
        return x - 1

    fast = capture.optimize(f, backend="eager")
    with caplog.at_level(logging.INFO, logger="capture.graph_breaks"):
        a = fast(torch.ones(2))
        b = fast(-torch.ones(2))
        c = fast(torch.ones(2))
    torch.testing.assert_close(a, f(torch.ones(2)))
    torch.testing.assert_close(b, f(-torch.ones(2)))
    torch.testing.assert_close(c, a)
    assert caplog.text.count("graph break in f") == 1
    assert "running it eagerly" not in caplog.text


def test_backend_error_is_named_and_can_be_suppressed(caplog: pytest.LogCaptureFixture) -> None:
    def broken(gm, example_inputs):
        raise ValueError("boom")

    def f(x):
        return x.cos()

    with pytest.raises(capture.BackendCompilerFailed, match="broken.*boom"):
        capture.optimize(f, backend=broken)(torch.ones(2))
    with (capture.config.patch(suppress_errors=True),
          caplog.at_level(logging.WARNING, logger="capture")):
        out = capture.optimize(f, backend=broken)(torch.ones(2))
    assert "boom" in caplog.text and "broken'" in caplog.text
    torch.testing.assert_close(out, torch.ones(2).cos())


def test_verbose_prints_graph_guards_and_bytecode(capsys: pytest.CaptureFixture[str]) -> None:
    def f(x):
        return torch.relu(x) + 1

    with capture.config.patch(verbose=True):
        capture.optimize(f, backend="eager")(torch.ones(2))
    out = capsys.readouterr().out
    assert "graph" in out and "relu" in out
    assert "guards" in out and "L['x']" in out
    assert "transformed:" in out and "original:" in out


def test_transformed_code_keeps_signature_and_graph_is_a_constant() -> None:
    def f(x, y=1.0, *, scale=2):
        return (x + y) * scale

    fast = capture.optimize(f, backend="eager", fullgraph=True)
    torch.testing.assert_close(fast(torch.ones(2)), f(torch.ones(2)))
    torch.testing.assert_close(fast(torch.ones(2), 3.0, scale=4), f(torch.ones(2), 3.0, scale=4))
    code = fast.compiles[-1].code
    assert code is not None
    assert code.co_varnames[: code.co_argcount] == f.__code__.co_varnames[: f.__code__.co_argcount]
    assert any(callable(c) for c in code.co_consts)
    assert "x" in f.__globals__ or "__capture" not in "".join(map(str, f.__globals__))


def test_is_compiling_only_while_tracing() -> None:
    seen = []

    def backend(gm, example_inputs):
        seen.append(capture.is_compiling())
        return gm.forward

    def f(x):
        return x + 1

    assert not capture.is_compiling()
    capture.optimize(f, backend=backend)(torch.ones(1))
    assert seen == [False]


def test_disable_runs_eagerly() -> None:
    backend, graphs = _counting()

    @capture.disable
    def helper(x):
        return x.sum().item()

    def f(x):
        return helper(x)

    fast = capture.optimize(f, backend=backend)
    assert fast(torch.ones(3)) == 3.0
    assert graphs == []


def test_reset_forgets_entries() -> None:
    backend, graphs = _counting()

    def f(x):
        return x - 1

    fast = capture.optimize(f, backend=backend)
    fast(torch.ones(1))
    capture.reset()
    fast(torch.ones(1))
    assert len(graphs) == 2


def test_method_and_module_targets() -> None:
    lin = torch.nn.Linear(3, 2)
    backend, graphs = _counting()
    fast = capture.optimize(lin, backend=backend, fullgraph=True)
    x = torch.randn(4, 3)
    torch.testing.assert_close(fast(x), lin(x))
    assert fast.weight is lin.weight
    assert list(fast.parameters()) == list(lin.parameters())
    assert fast.state_dict().keys() == lin.state_dict().keys()
    gm = graphs[0][0]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 3  # x, weight, bias: parameters are inputs, not constants
    bound = capture.optimize(lin.forward, backend="eager", fullgraph=True)
    torch.testing.assert_close(bound(x), lin(x))
