"""compiler.compile: functions, methods, modules, decorator forms, argument checking, backends,
modes and options."""

from __future__ import annotations

import inspect

import compiler
import pytest
import torch


@pytest.fixture(autouse=True)
def _fresh():
    compiler.reset()
    yield
    compiler.reset()


class Counting:
    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def f(x, y):
    return torch.relu(x @ y) + 1


def test_function():
    backend = Counting()
    fast = compiler.compile(f, backend=backend, fullgraph=True)
    x, y = torch.randn(2, 3), torch.randn(3, 4)
    torch.testing.assert_close(fast(x, y), f(x, y))
    torch.testing.assert_close(fast(x, y), f(x, y))
    assert len(backend.graphs) == 1


def test_bare_decorator():
    @compiler.compile
    def g(x):
        return x * 2

    # default backend is inductor, as in torch.compile; call only if it is registered
    if "inductor" in compiler.list_backends():
        torch.testing.assert_close(g(torch.ones(3)), torch.full((3,), 2.0))
    assert callable(g)


def test_decorator_with_arguments():
    backend = Counting()

    @compiler.compile(fullgraph=True, backend=backend)
    def g(x):
        return x.sin() + x.cos()

    x = torch.randn(5)
    torch.testing.assert_close(g(x), x.sin() + x.cos())
    assert len(backend.graphs) == 1


def test_bound_method():
    class Scaler:
        def __init__(self) -> None:
            self.k = 3.0

        def apply(self, x):
            return x * self.k

    s = Scaler()
    fast = compiler.compile(s.apply, backend="eager", fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(fast(x), x * 3.0)


def test_module_wrapper_forwards():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    cm = compiler.compile(m, backend="eager", fullgraph=True)
    x = torch.randn(3, 4)
    torch.testing.assert_close(cm(x), m(x))
    assert getattr(cm, "0") is m[0]
    assert [id(p) for p in cm.parameters()] == [id(p) for p in m.parameters()]
    assert list(cm.state_dict()) == list(m.state_dict())
    cm.eval()
    assert not m.training


def test_disable_returns_model_unchanged():
    assert compiler.compile(f, disable=True) is f
    m = torch.nn.Linear(2, 2)
    assert compiler.compile(m, disable=True, backend="eager") is m


def test_signature_matches_torch_compile():
    ours = inspect.signature(compiler.compile).parameters
    theirs = inspect.signature(torch.compile).parameters
    assert list(ours) == ["model", "fullgraph", "dynamic", "backend", "mode", "options", "disable"]
    order = list(theirs)
    assert [order.index(name) for name in ours] == sorted(order.index(name) for name in ours)
    for name in ours:
        assert ours[name].kind == theirs[name].kind, name
        if name != "backend":  # torch >= 2.13 spells the default inductor backend as None
            assert ours[name].default == theirs[name].default, name
    assert ours["backend"].default == "inductor"


@pytest.mark.parametrize(
    ("kwargs", "parameter", "type_shown"),
    [
        ({"fullgraph": "yes"}, "fullgraph", "str"),
        ({"dynamic": 1}, "dynamic", "int"),
        ({"backend": 3}, "backend", "int"),
        ({"mode": 2}, "mode", "int"),
        ({"options": ["fusion"]}, "options", "list"),
        ({"disable": None}, "disable", "NoneType"),
    ],
)
def test_wrong_argument_types_name_the_parameter(kwargs, parameter, type_shown):
    with pytest.raises(TypeError) as info:
        compiler.compile(f, **kwargs)
    assert repr(parameter) in str(info.value)
    assert type_shown in str(info.value)


def test_wrong_model_type():
    with pytest.raises(TypeError) as info:
        compiler.compile(42, backend="eager")
    assert "'model'" in str(info.value) and "int" in str(info.value)


def test_wrong_argument_type_in_decorator_form_fails_early():
    with pytest.raises(TypeError, match="'fullgraph'"):
        compiler.compile(fullgraph=1)


def test_unknown_backend_lists_close_and_all_names():
    with pytest.raises(ValueError) as info:
        compiler.compile(f, backend="eagerr")
    message = str(info.value)
    assert "'eager'" in message
    for name in compiler.list_backends():
        assert name in message


def test_backend_names_resolve_through_registry():
    seen = []

    def mine(gm, example_inputs):
        seen.append(len(example_inputs))
        return gm.forward

    compiler.register_backend("facade_test_backend", mine)
    assert "facade_test_backend" in compiler.list_backends()
    assert compiler.lookup_backend("facade_test_backend") is mine
    fast = compiler.compile(f, backend="facade_test_backend")
    fast(torch.randn(2, 3), torch.randn(3, 4))
    assert seen == [2]


def test_register_backend_as_decorator():
    @compiler.register_backend("facade_test_decorated")
    def decorated(gm, example_inputs):
        return gm.forward

    assert compiler.lookup_backend("facade_test_decorated") is decorated


def test_register_backend_type_errors():
    with pytest.raises(TypeError, match="'name'"):
        compiler.register_backend(3, lambda gm, ex: gm.forward)
    with pytest.raises(TypeError, match="'fn'"):
        compiler.register_backend("x", 3)


def test_lookup_backend_type_error():
    with pytest.raises(TypeError, match="'name'.*int"):
        compiler.lookup_backend(1)


def test_unknown_mode_lists_close_names():
    with pytest.raises(ValueError) as info:
        compiler.compile(f, mode="max-autotun")
    assert "'max-autotune'" in str(info.value)


def test_unknown_option_lists_close_names():
    name = next(iter(compiler.list_options()))
    with pytest.raises(ValueError) as info:
        compiler.compile(f, options={name + "x": True})
    assert repr(name) in str(info.value)


def test_mode_and_options_together_rejected():
    with pytest.raises(RuntimeError, match="mode"):
        compiler.compile(f, mode="default", options={})


def test_mode_only_for_inductor():
    with pytest.raises(RuntimeError, match="inductor"):
        compiler.compile(f, backend="eager", mode="max-autotune")


def test_known_mode_and_options_accepted():
    for mode in compiler.list_mode_options():
        assert callable(compiler.compile(f, mode=mode))
    for name in compiler.list_options():
        value = compiler.config.get(name)
        assert callable(compiler.compile(f, options={name: value}))


def test_option_of_wrong_value_type_rejected_at_compile():
    values = compiler.config.as_dict()
    for name, value in values.items():
        if isinstance(value, bool):
            with pytest.raises(TypeError):
                compiler.compile(f, options={name: "not a bool"})


def test_options_reach_the_inductor_backend_as_an_argument(monkeypatch):
    import capture
    from inductor import config as inductor_config

    values = inductor_config.values()
    name = next(n for n, v in values.items() if isinstance(v, bool))
    seen = []

    def fake_inductor(gm, example_inputs, options=None):
        seen.append((dict(options or {}), getattr(inductor_config.options, name)))
        return gm.forward

    real_lookup = capture.lookup_backend
    monkeypatch.setattr(
        capture, "lookup_backend", lambda n: fake_inductor if n == "inductor" else real_lookup(n)
    )
    fast = compiler.compile(lambda x: x + 1, options={name: not values[name]})
    fast(torch.ones(2))
    # the option travels as an argument; the global config is not patched
    assert seen == [({name: not values[name]}, values[name])]


def test_is_compiling_true_only_while_capturing():
    seen = []

    def g(x):
        seen.append(compiler.is_compiling())
        return x + 1

    assert compiler.is_compiling() is False
    fast = compiler.compile(g, backend="eager")
    fast(torch.ones(2))
    assert seen and seen[0] is True


def test_disable_runs_eagerly_inside_compiled_code():
    calls = []

    @compiler.disable
    def helper(x):
        calls.append(compiler.is_compiling())
        return x * 2

    def g(x):
        return helper(x) + 1

    fast = compiler.compile(g, backend="eager")
    torch.testing.assert_close(fast(torch.ones(2)), torch.full((2,), 3.0))
    assert calls and calls[-1] is False


def test_disable_decorator_factory_and_type_error():
    @compiler.disable()
    def h(x):
        return x

    assert h(3) == 3
    with pytest.raises(TypeError, match="'fn'"):
        compiler.disable(3)


def test_reset_forces_recompile():
    backend = Counting()
    fast = compiler.compile(f, backend=backend)
    x, y = torch.randn(2, 3), torch.randn(3, 4)
    fast(x, y)
    compiler.reset()
    fast(x, y)
    assert len(backend.graphs) == 2


def test_list_mode_options_single_and_unknown():
    modes = compiler.list_mode_options()
    assert {"default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"} <= set(modes)
    assert compiler.list_mode_options("max-autotune") == modes["max-autotune"]
    with pytest.raises(ValueError, match="reduce-overhead"):
        compiler.list_mode_options("reduce_overhead")
    with pytest.raises(TypeError, match="'mode'"):
        compiler.list_mode_options(3)


def test_list_options_are_every_packages():
    from inductor import config as inductor_config

    options = compiler.list_options()
    assert {f"inductor.{k}" for k in inductor_config.list_options()} <= set(options)
    assert "capture.suppress_errors" in options and "guards.cache_size_limit" in options


def test_public_surface():
    assert sorted(compiler.__all__) == sorted([
        "Backend", "ExplainOutput", "GraphBreakInfo", "__version__", "allow_in_graph",
        "assume_constant_result", "compile", "config", "disable", "disallow_in_graph",
        "explain", "graph_break", "is_compiling", "list_backends", "list_mode_options",
        "list_options", "lookup_backend", "register_backend", "reset", "substitute_in_graph",
        "mark_dynamic", "mark_static", "maybe_mark_dynamic",
        "PrecompiledGuardError", "PrecompiledModule", "load_cache_artifacts", "load_precompiled",
        "precompile", "save_cache_artifacts",
    ])
    for name in compiler.__all__:
        obj = getattr(compiler, name)
        if callable(obj) and name != "Backend" and not isinstance(obj, type):
            doc = inspect.getdoc(obj) or ""
            for section in ("Returns:", "Examples:", "Notes:"):
                assert section in doc, f"compiler.{name} docstring lacks {section}"
