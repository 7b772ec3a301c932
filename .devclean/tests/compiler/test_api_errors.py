"""Errors at the API edge (issue 11, group 8): what a user sees when something goes wrong is
what eager Python shows, or an error naming the backend and the option that changes it.

Each case runs eagerly and compiled on the same inputs, several calls in a row, and compares
results or exception types, messages and the user's line.
"""

from __future__ import annotations

import logging
import traceback
import warnings

import _user_asserts
import capture
import compiler
import pytest
import torch
from _user_asserts import checked

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _fresh():
    compiler.reset()
    yield
    compiler.reset()


def _raised(fn, *args, **kwargs) -> BaseException:
    try:
        fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the exception is the result under test
        return e
    raise AssertionError(f"{fn} raised nothing")


def _user_line(error: BaseException) -> tuple[str, int]:
    """File and line of the innermost traceback frame in the user's code (this test file or
    `_user_asserts`)."""
    users = (__file__, _user_asserts.__file__)
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename in users]
    assert frames, f"no frame of {users} in the traceback of {error!r}"
    return frames[-1].filename, frames[-1].lineno


def assert_same_error(compiled_error: BaseException, eager_error: BaseException) -> None:
    assert type(compiled_error) is type(eager_error), (compiled_error, eager_error)
    assert str(compiled_error) == str(eager_error)
    assert _user_line(compiled_error) == _user_line(eager_error)


# -- wrong number of arguments ------------------------------------------------------------


def one_arg(x):
    return x + 1


def kw_only(x, *, scale):
    return x * scale


class Scaler:
    def apply(self, x):
        return x * 2


@pytest.mark.parametrize(
    ("fn", "args", "kwargs"),
    [
        (one_arg, (torch.ones(2), torch.ones(2)), {}),
        (one_arg, (), {}),
        (one_arg, (torch.ones(2),), {"y": 1}),
        (kw_only, (torch.ones(2),), {}),
        (kw_only, (torch.ones(2), 3), {}),
    ],
    ids=["too-many", "missing", "unexpected-kw", "missing-kw-only", "kw-only-as-positional"],
)
def test_wrong_arguments_raise_pythons_own_type_error(fn, args, kwargs):
    compiled = compiler.compile(fn, backend="eager")
    for _ in range(2):  # before and after a successful compile
        expected = _raised(fn, *args, **kwargs)
        got = _raised(compiled, *args, **kwargs)
        assert type(got) is TypeError and str(got) == str(expected)
        assert "_bind" not in str(got)
        good = compiled(torch.ones(2), scale=2.0) if fn is kw_only else compiled(torch.ones(2))
        torch.testing.assert_close(good, fn(torch.ones(2), scale=2.0) if fn is kw_only
                                   else fn(torch.ones(2)))


def test_wrong_arguments_of_a_bound_method():
    s = Scaler()
    compiled = compiler.compile(s.apply, backend="eager")
    for _ in range(2):
        expected = _raised(s.apply, torch.ones(2), torch.ones(2))
        got = _raised(compiled, torch.ones(2), torch.ones(2))
        assert type(got) is TypeError and str(got) == str(expected)
        torch.testing.assert_close(compiled(torch.ones(2)), s.apply(torch.ones(2)))


def calls_helper_wrongly(x):
    return one_arg(x, x)  # the user's mistake, one call deeper


@pytest.mark.parametrize("fullgraph", [False, True])
def test_wrong_arguments_of_a_module_and_of_a_nested_call(fullgraph):
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 4)
    compiled = compiler.compile(lin, backend="eager", fullgraph=fullgraph)
    nested = compiler.compile(calls_helper_wrongly, backend="eager", fullgraph=fullgraph)
    x = torch.randn(2, 3)
    for _ in range(2):
        got, expected = _raised(compiled, x, 5), _raised(lin, x, 5)
        assert type(got) is TypeError and str(got) == str(expected)
        torch.testing.assert_close(compiled(x), lin(x))
        assert_same_error(_raised(nested, x), _raised(calls_helper_wrongly, x))


# -- the user's own errors ---------------------------------------------------------------


def matmul(x, y):
    return torch.relu(x @ y) + 1


def lookup(x, table, key):
    return x * table[key]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fullgraph", [False, True])
def test_shape_mismatch_is_eagers_error_from_the_users_line(backend, fullgraph, caplog):
    compiled = compiler.compile(matmul, backend=backend, fullgraph=fullgraph)
    good = (torch.randn(2, 3), torch.randn(3, 4))
    bad = (torch.randn(2, 3), torch.randn(2, 3))
    with caplog.at_level(logging.WARNING):
        for args in (good, bad, good, bad):
            if args is good:
                torch.testing.assert_close(compiled(*args), matmul(*args))
                continue
            assert_same_error(_raised(compiled, *args), _raised(matmul, *args))
    text = caplog.text
    assert "failed while attempting to run meta" not in text
    assert "missing feature" not in text


@pytest.mark.parametrize("fullgraph", [False, True])
def test_key_error_and_assertion_are_eagers(fullgraph):
    table = {"a": 2.0}
    compiled = compiler.compile(lookup, backend="eager", fullgraph=fullgraph)
    x = torch.ones(3)
    torch.testing.assert_close(compiled(x, table, "a"), lookup(x, table, "a"))
    assert_same_error(_raised(compiled, x, table, "b"), _raised(lookup, x, table, "b"))
    table["b"] = 5.0  # state changed between calls: now the key exists
    torch.testing.assert_close(compiled(x, table, "b"), lookup(x, table, "b"))

    compiled_check = compiler.compile(checked, backend="eager", fullgraph=fullgraph)
    for rows in (3, 2, 3, 4):
        x = torch.randn(rows, 2)
        if rows == 3:
            torch.testing.assert_close(compiled_check(x), checked(x))
        else:
            assert_same_error(_raised(compiled_check, x), _raised(checked, x))


def inplace_on_leaf(x):
    x.add_(1.0)
    return x * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_error_a_backend_finds_that_eager_raises_too_is_eagers(backend):
    """aot_eager and inductor trace with autograd while compiling: the program's own error
    they meet is raised as eager raises it, not as a backend failure."""
    compiled = compiler.compile(inplace_on_leaf, backend=backend)
    for _ in range(2):
        x, x_eager = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
        got, expected = _raised(compiled, x), _raised(inplace_on_leaf, x_eager)
        assert type(got) is type(expected) and str(got) == str(expected)
        torch.testing.assert_close(x, x_eager)  # untouched, as in eager
        y = torch.ones(3)
        torch.testing.assert_close(compiled(y), inplace_on_leaf(torch.ones(3)))
        torch.testing.assert_close(y, torch.full((3,), 2.0))


def factor(a):
    return torch.linalg.cholesky(a) * 2


def benchmarking(gm, example_inputs):
    """A backend that runs the graph while compiling (as an autotuner does)."""
    gm(*[t.clone() for t in example_inputs])
    return gm.forward


def test_an_error_a_backend_meets_by_running_the_graph_is_eagers():
    compiled = compiler.compile(factor, backend=benchmarking)
    not_positive_definite = -torch.eye(3)
    positive_definite = torch.eye(3) * 4
    for a in (not_positive_definite, positive_definite, not_positive_definite):
        if a is positive_definite:
            torch.testing.assert_close(compiled(a), factor(a))
            continue
        got, expected = _raised(compiled, a.clone()), _raised(factor, a.clone())
        assert type(got) is type(expected) and str(got) == str(expected)
        assert not isinstance(got, capture.BackendCompilerFailed)


# -- backend failures ---------------------------------------------------------------------


def cosine(x):
    return x.cos() * 2


def returns_none(gm, example_inputs):
    return None


def returns_a_number(gm, example_inputs):
    return 3


def broken(gm, example_inputs):
    raise ValueError("boom in the backend")


@pytest.mark.parametrize("backend", [returns_none, returns_a_number, broken])
def test_failing_backend_is_named(backend):
    compiled = compiler.compile(cosine, backend=backend)
    for _ in range(2):
        with pytest.raises(capture.BackendCompilerFailed) as info:
            compiled(torch.ones(2))
        assert backend.__name__ in str(info.value)
        assert "suppress_errors" in str(info.value)


@pytest.mark.parametrize("backend", [returns_none, returns_a_number, broken])
def test_suppress_errors_logs_and_runs_eagerly(backend, caplog):
    compiled = compiler.compile(cosine, backend=backend, options={"suppress_errors": True})
    with caplog.at_level(logging.WARNING, logger="capture"), warnings.catch_warnings():
        warnings.simplefilter("error")  # a log record, not a warning
        for n in (2, 2, 3):
            x = torch.randn(n)
            torch.testing.assert_close(compiled(x), cosine(x))
    assert backend.__name__ in caplog.text and "suppress_errors" in caplog.text
    # the option belongs to that compiled function only
    with pytest.raises(capture.BackendCompilerFailed):
        compiler.compile(cosine, backend=backend)(torch.ones(2))
    with compiler.config.patch(suppress_errors=True):
        torch.testing.assert_close(compiler.compile(cosine, backend=backend)(torch.ones(2)),
                                   cosine(torch.ones(2)))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_lazy_backend_failure_reaches_suppress_errors(backend, monkeypatch):
    """aot_eager and inductor compile a graph for its first call's signature; a failure there
    goes through the same path as a backend that raises right away."""
    import aotgrad.api

    def failing_compile(self, *args, **kwargs):
        raise RuntimeError("lowering exploded")

    monkeypatch.setattr(aotgrad.api.AotCompiled, "_compile", failing_compile)
    with pytest.raises(capture.BackendCompilerFailed, match=f"'{backend}'.*lowering exploded"):
        compiler.compile(cosine, backend=backend)(torch.ones(2))
    compiled = compiler.compile(cosine, backend=backend, options={"suppress_errors": True})
    for n in (2, 2, 5):
        x = torch.randn(n, requires_grad=n == 5)
        out = compiled(x)
        torch.testing.assert_close(out, cosine(x))
        if n == 5:
            out.sum().backward()
            torch.testing.assert_close(x.grad, -2 * x.detach().sin())


def test_inductor_build_failure_reaches_suppress_errors(tmp_path):
    """A real failure inside inductor (no C++ compiler), by a per-call option."""
    options = {"cxx": "/nonexistent/c++", "cache_dir": str(tmp_path)}
    with pytest.raises(capture.BackendCompilerFailed, match="'inductor'"):
        compiler.compile(cosine, backend="inductor", options=options)(torch.ones(2))
    compiled = compiler.compile(cosine, backend="inductor",
                                options={**options, "suppress_errors": True})
    for n in (2, 3):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), cosine(x))


# -- the backend registry -----------------------------------------------------------------


def test_register_backend_over_an_existing_name_needs_override():
    def first(gm, example_inputs):
        return gm.forward

    def second(gm, example_inputs):
        return gm.forward

    compiler.register_backend("api_errors_backend", first)
    with pytest.raises(ValueError, match="api_errors_backend.*override=True"):
        compiler.register_backend("api_errors_backend", second)
    assert compiler.lookup_backend("api_errors_backend") is first
    with pytest.raises(ValueError, match="override=True"):
        compiler.register_backend("eager", second)
    with pytest.raises(ValueError, match="override=True"):
        capture.register_backend("inductor", second)
    with pytest.raises(ValueError, match="override=True"):
        @compiler.register_backend("api_errors_backend")
        def third(gm, example_inputs):
            return gm.forward

    assert compiler.register_backend("api_errors_backend", second, override=True) is second
    assert compiler.lookup_backend("api_errors_backend") is second
    x = torch.randn(3)
    torch.testing.assert_close(compiler.compile(cosine, backend="api_errors_backend")(x),
                               cosine(x))
    assert compiler.lookup_backend("eager") is capture.lookup_backend("eager")


# -- recompiles and the cache limit -------------------------------------------------------


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.0)

    def forward(self, x):
        return self.drop(self.lin(x)).relu()


def test_recompile_reasons_go_to_a_logger_not_warnings(caplog):
    torch.manual_seed(0)
    net = Net()
    compiled = compiler.compile(net, backend="eager")
    x = torch.randn(2, 4)
    with caplog.at_level(logging.INFO, logger="capture.recompiles"), \
            warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            net.eval()
            torch.testing.assert_close(compiled(x), net(x))
            net.train()
            torch.testing.assert_close(compiled(x), net(x))
            with torch.no_grad():
                torch.testing.assert_close(compiled(x), net(x))
    records = [r for r in caplog.records if r.name == "capture.recompiles"]
    assert records and all(r.levelno < logging.WARNING for r in records)
    assert any("training" in r.getMessage() or "grad" in r.getMessage() for r in records)


def test_cache_limit_warning_names_the_option_that_raises_it():
    compiled = compiler.compile(one_arg, backend="eager", options={"cache_size_limit": 2},
                                dynamic=False)  # NOTE: a recompile per shape
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (1, 2, 3, 4, 5):
            x = torch.ones(n)
            torch.testing.assert_close(compiled(x), one_arg(x))
    messages = [str(w.message) for w in caught if "cache_size_limit" in str(w.message)]
    assert len(messages) == 1
    assert "options={'cache_size_limit'" in messages[0]
    assert "compiler.config.patch(cache_size_limit=" in messages[0]
    assert "GUARDS_CACHE_SIZE_LIMIT" in messages[0]
    # the named option does raise the limit
    with compiler.config.patch(cache_size_limit=8), warnings.catch_warnings():
        warnings.simplefilter("error")
        more = compiler.compile(one_arg, backend="eager")
        for n in (1, 2, 3, 4, 5):
            torch.testing.assert_close(more(torch.ones(n)), one_arg(torch.ones(n)))
