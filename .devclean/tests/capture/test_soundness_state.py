"""Soundness: state read through classes, modules and other globals.

Each case runs eagerly and compiled over several calls; between calls it changes Python state
the program reads without passing it in: class attributes (through the class, `type(obj)`,
an instance, `super()`), methods, static methods and properties replaced on the class or the
instance, `fn.__defaults__`, monkeypatched library functions, builtins shadowed by globals,
attributes of objects held by other modules, other modules' globals, and global module hooks.
A change must recompile (or invalidate), never return the old answer.
"""

from __future__ import annotations

import builtins

import _soundness_helpers as helpers
import pytest
import torch
import torch.nn.functional as F
from _differential import t
from _soundness import BACKEND_PARAMS, runner
from torch import nn


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request):
    """Each case runs with every backend registered (eager always; aot_eager, inductor)."""
    return request.param


def steps(*setters):
    """Makers that run `setter()` and return `(t(4),)`."""
    def maker(setter):
        def make():
            setter()
            return (t(4),)
        return make
    return [maker(s) for s in setters]


# -- class attributes ------------------------------------------------------------------------
class K:
    scale = 2.0

    def __init__(self) -> None:
        self.bias = 1.0

    def method(self, x):
        return x * 2

    @staticmethod
    def static(x):
        return x + 1

    @classmethod
    def klass(cls, x):
        return x * cls.scale

    @property
    def prop(self):
        return 4.0


_ORIGINAL = dict(vars(K))


@pytest.fixture(autouse=True)
def _restore_k():
    yield
    for name in list(vars(K)):
        if name not in _ORIGINAL:
            delattr(K, name)
    for name in ("scale", "method", "static", "klass", "prop"):
        setattr(K, name, _ORIGINAL[name])
    helpers.SCALE = 2.0
    helpers.LIMIT = 3
    helpers.cfg.scale = 3.0
    helpers.Mode.factor = 2.0
    _OBJ.__dict__.pop("method", None)
    _OBJ.__dict__.pop("scale", None)


_OBJ = K()


def set_scale(v):
    return lambda: setattr(K, "scale", v)


def through_class(x):
    return x * K.scale


def through_type(x):
    return x * type(_OBJ).scale


def through_instance(x):
    return x * _OBJ.scale


def through_classmethod(x):
    return _OBJ.klass(x)


def through_argument_type(x, o):
    return x * type(o).scale


def test_class_attribute_through_class(backend):
    runner(backend)(through_class, steps(set_scale(2.0), set_scale(3.0), set_scale(2.0)))


def test_class_attribute_through_type(backend):
    runner(backend)(through_type, steps(set_scale(2.0), set_scale(5.0)))


def test_class_attribute_through_instance(backend):
    runner(backend)(through_instance, steps(set_scale(2.0), set_scale(5.0)))


def test_class_attribute_through_classmethod(backend):
    runner(backend)(through_classmethod, steps(set_scale(2.0), set_scale(5.0)))


def test_class_attribute_through_argument_type(backend):
    def make(v):
        def inner():
            K.scale = v
            return (t(4), K())
        return inner
    runner(backend)(through_argument_type, [make(2.0), make(7.0), make(2.0)])


def test_instance_attribute_shadows_class_attribute(backend):
    def shadow():
        _OBJ.scale = 9.0

    def unshadow():
        _OBJ.__dict__.pop("scale", None)
    runner(backend)(through_instance, steps(unshadow, shadow, unshadow))


# -- super() ---------------------------------------------------------------------------------
class Base:
    offset = 1.0

    def f(self, x):
        return x * 2


class Child(Base):
    def f(self, x):
        return super().f(x) + super().offset


_CHILD = Child()


def calls_super(x):
    return _CHILD.f(x)


def test_super_method_replaced(backend):
    original = Base.f
    try:
        runner(backend)(calls_super, steps(
            lambda: setattr(Base, "f", original),
            lambda: setattr(Base, "f", lambda self, x: x * 5),
            lambda: setattr(Base, "f", original)))
    finally:
        Base.f = original


def test_super_attribute_changed(backend):
    try:
        runner(backend)(calls_super, steps(lambda: setattr(Base, "offset", 1.0),
                                     lambda: setattr(Base, "offset", 4.0)))
    finally:
        Base.offset = 1.0


# -- methods replaced ------------------------------------------------------------------------
def calls_method(x):
    return _OBJ.method(x)


def calls_static(x):
    return K.static(x) + _OBJ.static(x)


def reads_property(x):
    return x * _OBJ.prop


def test_method_replaced_on_class(backend):
    runner(backend)(calls_method, steps(
        lambda: setattr(K, "method", _ORIGINAL["method"]),
        lambda: setattr(K, "method", lambda self, x: x * 7),
        lambda: setattr(K, "method", _ORIGINAL["method"])))


def test_method_replaced_on_instance(backend):
    def patch():
        _OBJ.method = lambda x: x * 11

    def unpatch():
        _OBJ.__dict__.pop("method", None)
    runner(backend)(calls_method, steps(unpatch, patch, unpatch))


def test_staticmethod_replaced(backend):
    runner(backend)(calls_static, steps(
        lambda: setattr(K, "static", _ORIGINAL["static"]),
        lambda: setattr(K, "static", staticmethod(lambda x: x - 3)),
        lambda: setattr(K, "static", _ORIGINAL["static"])))


def test_property_replaced(backend):
    runner(backend)(reads_property, steps(
        lambda: setattr(K, "prop", _ORIGINAL["prop"]),
        lambda: setattr(K, "prop", property(lambda self: -1.0)),
        lambda: setattr(K, "prop", _ORIGINAL["prop"])))


def test_method_added_to_subclass_overrides(backend):
    try:
        runner(backend)(calls_super, steps(lambda: None,
                                     lambda: setattr(Child, "f", lambda self, x: x * 0)))
    finally:
        Child.f = _CHILD_F


_CHILD_F = Child.f


# -- module forward replaced -----------------------------------------------------------------
class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


def test_module_forward_replaced_on_instance(backend):
    torch.manual_seed(0)
    net = Net()

    def compile_module(fn, backend):
        import capture
        return capture.optimize(net, backend=backend)

    def plain():
        net.__dict__.pop("forward", None)

    def patched():
        net.forward = lambda x: net.fc(x) * 100
    runner(backend)(lambda x: net(x), steps(plain, patched, plain), compile_fn=compile_module)


def test_module_forward_replaced_on_class(backend):
    torch.manual_seed(0)
    net = Net()
    original = Net.forward

    def compile_module(fn, backend):
        import capture
        return capture.optimize(net, backend=backend)
    try:
        runner(backend)(lambda x: net(x), steps(
            lambda: setattr(Net, "forward", original),
            lambda: setattr(Net, "forward", lambda self, x: self.fc(x) - 50)),
            compile_fn=compile_module)
    finally:
        Net.forward = original


def test_submodule_method_replaced_on_instance(backend):
    torch.manual_seed(0)
    net = Net()

    def run(x):
        return net(x)

    def plain():
        net.fc.__dict__.pop("forward", None)

    def patched():
        net.fc.forward = lambda x: x * 3
    runner(backend)(run, steps(plain, patched, plain))


# -- defaults ----------------------------------------------------------------------------------
def helper_with_default(x, k=2.0):
    return x * k


def calls_helper_default(x):
    return helper_with_default(x)


def test_helper_defaults_changed(backend):
    runner(backend)(calls_helper_default, steps(
        lambda: setattr(helper_with_default, "__defaults__", (2.0,)),
        lambda: setattr(helper_with_default, "__defaults__", (5.0,)),
        lambda: setattr(helper_with_default, "__defaults__", (2.0,))))


def own_default(x, k=2.0):
    return x * k


def test_own_defaults_changed(backend):
    runner(backend)(own_default, steps(
        lambda: setattr(own_default, "__defaults__", (2.0,)),
        lambda: setattr(own_default, "__defaults__", (6.0,))))


def kwonly_helper(x, *, k=2.0):
    return x + k


def calls_kwonly(x):
    return kwonly_helper(x)


def test_kwdefaults_changed(backend):
    runner(backend)(calls_kwonly, steps(
        lambda: setattr(kwonly_helper, "__kwdefaults__", {"k": 2.0}),
        lambda: setattr(kwonly_helper, "__kwdefaults__", {"k": 8.0})))


# -- monkeypatched library functions ---------------------------------------------------------
def uses_gelu(x):
    return F.gelu(x)


def uses_torch_nn_functional_relu(x):
    return torch.nn.functional.relu(x)


def uses_torch_sin(x):
    return torch.sin(x)


@pytest.mark.parametrize("fn, owner, name, replacement", [
    (uses_gelu, F, "gelu", lambda x: x * 2),
    (uses_torch_nn_functional_relu, torch.nn.functional, "relu", lambda x: x - 1),
    (uses_torch_sin, torch, "sin", torch.cos),
    (helpers.activation, F, "gelu", lambda x: x + 5),
])
def test_library_function_monkeypatched(fn, owner, name, replacement, backend):
    original = getattr(owner, name)
    try:
        runner(backend)(fn, steps(lambda: setattr(owner, name, original),
                            lambda: setattr(owner, name, replacement),
                            lambda: setattr(owner, name, original)))
    finally:
        setattr(owner, name, original)


# -- builtins shadowed -------------------------------------------------------------------------
def uses_len(x):
    return x * len([1, 2])


def uses_max(x):
    return x + max(1, 2)


@pytest.mark.parametrize("fn, name, replacement", [
    (uses_len, "len", lambda s: 5),
    (uses_max, "max", lambda a, b: -10),
])
def test_builtin_shadowed_by_global(fn, name, replacement, backend):
    def shadow():
        globals()[name] = replacement

    def unshadow():
        globals().pop(name, None)
    try:
        runner(backend)(fn, steps(unshadow, shadow, unshadow, shadow))
    finally:
        globals().pop(name, None)


def uses_divmod(x):
    return x * divmod(7, 2)[0]


def test_builtin_replaced_in_builtins(backend):
    original = builtins.divmod
    try:
        runner(backend)(uses_divmod, steps(lambda: setattr(builtins, "divmod", original),
                                     lambda: setattr(builtins, "divmod", lambda a, b: (0, 0)),
                                     lambda: setattr(builtins, "divmod", original)))
    finally:
        builtins.divmod = original


# -- other modules ---------------------------------------------------------------------------
def reads_module_object_attr(x):
    return x * helpers.cfg.scale


def reads_module_global(x):
    return x * helpers.SCALE


def setter(obj, name, value):
    return lambda: setattr(obj, name, value)


@pytest.mark.parametrize("fn, changes", [
    pytest.param(reads_module_object_attr, [setter(helpers.cfg, "scale", 3.0),
                                            setter(helpers.cfg, "scale", 6.0)], id="module_object_attr"),
    pytest.param(helpers.uses_cfg, [setter(helpers.cfg, "scale", 3.0),
                                    setter(helpers.cfg, "scale", 6.0)], id="helper_reads_its_object"),
    pytest.param(reads_module_global, [setter(helpers, "SCALE", 2.0),
                                       setter(helpers, "SCALE", 4.0)], id="module_global"),
    pytest.param(helpers.scaled, [setter(helpers, "SCALE", 2.0),
                                  setter(helpers, "SCALE", 4.0)], id="helper_reads_its_global"),
    pytest.param(lambda x: helpers.two_step(x), [setter(helpers, "SCALE", 2.0),
                                                 setter(helpers, "SCALE", 4.0)],
                 id="helper_calls_helper"),
    pytest.param(lambda x: helpers.clipped(x), [setter(helpers, "LIMIT", 3),
                                                setter(helpers, "LIMIT", 0)], id="helper_int_global"),
    pytest.param(lambda x: helpers.uses_mode(x), [setter(helpers.Mode, "factor", 2.0),
                                                  setter(helpers.Mode, "factor", 0.5)],
                 id="helper_reads_class_attr"),
    pytest.param(lambda x: helpers.scaled(x), [setter(helpers, "scaled", helpers.scaled),
                                               setter(helpers, "scaled", lambda x: x * 0)],
                 id="module_function_rebound"),
])
def test_other_module_state(fn, changes, backend):
    original_scaled = helpers.scaled
    try:
        runner(backend)(fn, steps(*changes, changes[0]))
    finally:
        helpers.scaled = original_scaled


# -- global module hooks ---------------------------------------------------------------------
@pytest.mark.parametrize("register", [
    lambda: nn.modules.module.register_module_forward_hook(lambda m, i, o: o * 2),
    lambda: nn.modules.module.register_module_forward_pre_hook(lambda m, i: (i[0] + 1,)),
])
def test_global_module_hooks_added_after_first_call(register, backend):
    torch.manual_seed(0)
    net = Net()
    handles = []

    def add():
        if not handles:
            handles.append(register())

    def remove():
        while handles:
            handles.pop().remove()
    try:
        runner(backend)(lambda x: net(x), steps(remove, add, remove))
    finally:
        remove()


# -- attributes found missing, added later ---------------------------------------------------
def hasattr_extra(x):
    if hasattr(_OBJ, "extra"):
        return x * 2
    return x


def getattr_default_on_class(x):
    return x * getattr(K, "factor", 1.0)


def getattr_default_on_child(x):
    return x * getattr(Child, "factor", 1.0)


def getattr_default_on_module(x):
    return x + getattr(helpers, "OFFSET", 0.0)


def _del(obj, name):
    def undo():
        if name in vars(obj):
            delattr(obj, name)
    return undo


@pytest.mark.parametrize("fn, owner, name, value", [
    pytest.param(hasattr_extra, K, "extra", 1, id="hasattr_class_attr_added"),
    pytest.param(hasattr_extra, _OBJ, "extra", 1, id="hasattr_instance_attr_added"),
    pytest.param(getattr_default_on_class, K, "factor", 3.0, id="getattr_default_class"),
    pytest.param(getattr_default_on_child, Base, "factor", 3.0, id="getattr_default_base_class"),
    pytest.param(getattr_default_on_module, helpers, "OFFSET", 5.0, id="getattr_default_module"),
])
def test_missing_attribute_added_later(fn, owner, name, value, backend):
    undo = _del(owner, name)
    try:
        runner(backend)(fn, steps(undo, setter(owner, name, value), undo))
    finally:
        undo()


# -- library modules reached through torch's own code ----------------------------------------
class GeluNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = nn.GELU()

    def helper(self, x):
        return x * 2

    def forward(self, x):
        return self.helper(self.act(x))


_GELU_NET = GeluNet()


def calls_gelu_net(x):
    return _GELU_NET(x)


def test_monkeypatch_seen_by_torch_module_code(backend):
    original = F.gelu
    try:
        runner(backend)(calls_gelu_net, steps(lambda: setattr(F, "gelu", original),
                                              lambda: setattr(F, "gelu", lambda x, **kw: x * 0),
                                              lambda: setattr(F, "gelu", original)))
    finally:
        F.gelu = original


def test_module_helper_method_replaced(backend):
    def plain():
        _GELU_NET.__dict__.pop("helper", None)
        GeluNet.helper = _GELU_HELPER

    def on_instance():
        _GELU_NET.helper = lambda x: x - 1

    def on_class():
        _GELU_NET.__dict__.pop("helper", None)
        GeluNet.helper = lambda self, x: x + 10
    try:
        runner(backend)(calls_gelu_net, steps(plain, on_instance, plain, on_class, plain))
    finally:
        plain()


_GELU_HELPER = GeluNet.helper


# -- special methods replaced on the class ---------------------------------------------------
class Vec:
    def __init__(self, t) -> None:
        self.t = t

    def __add__(self, other):
        return self.t + other

    def __len__(self):
        return 2

    def __getitem__(self, i):
        return self.t * (i + 1)

    def __bool__(self):
        return True


_VEC_ORIGINAL = dict(vars(Vec))


def uses_add(x, v):
    return v + x


def uses_len(x, v):
    return x * len(v)


def uses_getitem(x, v):
    return v[1] + x


class Scaler:
    def __call__(self, x):
        return x - 1


_SCALER = Scaler()
_SCALER_CALL = Scaler.__call__


def uses_call(x):
    return _SCALER(x)


def test_call_replaced_on_class(backend):
    try:
        runner(backend)(uses_call, steps(lambda: setattr(Scaler, "__call__", _SCALER_CALL),
                                         lambda: setattr(Scaler, "__call__", lambda s, x: x * 4),
                                         lambda: setattr(Scaler, "__call__", _SCALER_CALL)))
    finally:
        Scaler.__call__ = _SCALER_CALL


def uses_bool(x, v):
    if v:
        return x + 1
    return x - 1


@pytest.mark.parametrize("fn, name, replacement", [
    (uses_add, "__add__", lambda self, other: self.t * other),
    (uses_len, "__len__", lambda self: 5),
    (uses_getitem, "__getitem__", lambda self, i: self.t - i),
    (uses_bool, "__bool__", lambda self: False),
])
def test_special_method_replaced_on_class(fn, name, replacement, backend):
    def make(patched):
        def inner():
            setattr(Vec, name, replacement if patched else _VEC_ORIGINAL[name])
            return (t(4), Vec(t(4, seed=5)))
        return inner
    try:
        runner(backend)(fn, [make(False), make(True), make(False)])
    finally:
        setattr(Vec, name, _VEC_ORIGINAL[name])
