# ruff: noqa  # a probe corpus: it spells odd constructs (globals, lambdas, shadowing) on purpose
"""Soundness probes (state_and_semantics): `python tools/probes/state_and_semantics.py [name ...]` prints OK/BAD per
program for backends eager, aot_eager and inductor, and the count of BAD ones."""
import sys, torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, __import__("os").path.dirname(__file__))
from harness import check, main
T = lambda *s: torch.randn(*s)
P = []
def probe(f): P.append(f); return f

@probe
def closure_cell_change():
    k = [2.0]
    def make_fn():
        scale = k[0]
        def f(x): return x * scale
        return f
    box = {"s": 2.0}
    def f(x): return x * box["s"]
    x = T(3)
    def c2(fn): box["s"] = 3.0; return fn(x)
    return f, lambda: dict(box), [lambda fn: fn(x), c2, c2]

@probe
def nonlocal_counter():
    n = 0
    def f(x):
        nonlocal n
        n += 1
        return x + n
    x = T(3)
    return f, lambda: n, [lambda fn: fn(x)] * 3

@probe
def closure_rebound():
    s = 1.0
    def f(x): return x * s
    x = T(3)
    def c(fn):
        nonlocal s
        s += 1.0
        return fn(x)
    return f, None, [c, c, c]

@probe
def batchnorm_train_eval():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    x = T(8, 4)
    def c_train(fn): m.train(); return fn(x)
    def c_eval(fn): m.eval(); return fn(x)
    return m, lambda: (m[1].running_mean.clone(), m[1].num_batches_tracked.clone()), [c_train, c_train, c_eval, c_train]

@probe
def param_update_between_calls():
    torch.manual_seed(0)
    m = nn.Linear(4, 4)
    x = T(2, 4)
    def c(fn):
        r = fn(x)
        with torch.no_grad(): m.weight.add_(1.0)
        return r
    return m, None, [c, c, c]

@probe
def param_replaced():
    torch.manual_seed(0)
    m = nn.Linear(4, 4)
    x = T(2, 4)
    def c(fn):
        r = fn(x)
        m.weight = nn.Parameter(torch.randn(4, 4))
        return r
    return m, None, [c, c, c]

@probe
def requires_grad_toggle():
    x = T(3)
    w = T(3)
    def f(a, b): return (a * b).sum()
    def c1(fn): return fn(x, w)
    def c2(fn):
        ww = w.clone().requires_grad_()
        out = fn(x, ww); out.backward(); return ww.grad
    return f, None, [c1, c2, c1, c2]

@probe
def dtype_change():
    def f(x): return x * 2 + 1
    return f, None, [lambda fn: fn(torch.ones(3)), lambda fn: fn(torch.ones(3, dtype=torch.float64)), lambda fn: fn(torch.ones(3, dtype=torch.int64))]

@probe
def noncontig_input():
    def f(x): return x.view(-1) if x.is_contiguous() else x.reshape(-1) * 2
    a = T(4, 4)
    return f, None, [lambda fn: fn(a), lambda fn: fn(a.t()), lambda fn: fn(a)]

@probe
def print_in_fn():
    def f(x):
        y = x + 1
        print("hello", y.shape)
        return y * 2
    x = T(3)
    return f, None, [lambda fn: fn(x)] * 2

@probe
def item_branch():
    def f(x):
        if x.sum().item() > 0: return x + 1
        return x - 1
    return f, None, [lambda fn: fn(torch.ones(3)), lambda fn: fn(-torch.ones(3)), lambda fn: fn(torch.ones(3))]

@probe
def tensor_bool_branch():
    def f(x):
        if x.sum() > 0: return x + 1
        return x - 1
    return f, None, [lambda fn: fn(torch.ones(3)), lambda fn: fn(-torch.ones(3))]

@probe
def kwargs_defaults_change():
    def f(x, scale=2.0): return x * scale
    x = T(3)
    def c(fn):
        f.__defaults__ = (f.__defaults__[0] + 1,)
        return fn(x)
    return f, None, [c, c, c]

@probe
def global_tensor_rebind():
    g = globals()
    g["GT"] = torch.ones(3)
    def f(x): return x + GT
    x = T(3)
    def c(fn): g["GT"] = g["GT"] + 1; return fn(x)
    return f, None, [c, c, c]

@probe
def global_tensor_inplace():
    g = globals()
    g["GT2"] = torch.ones(3)
    def f(x): return x + GT2
    x = T(3)
    def c(fn): GT2.add_(1); return fn(x)
    return f, None, [c, c, c]

@probe
def input_mutation_inplace():
    def f(x): x.add_(1); return x * 2
    x = torch.zeros(3)
    return f, lambda: x.clone(), [lambda fn: fn(x)] * 3

@probe
def input_view_mutation():
    def f(x): v = x[0]; v.mul_(2); return x.sum()
    x = torch.ones(3, 3)
    return f, lambda: x.clone(), [lambda fn: fn(x)] * 3

@probe
def aliased_args_inplace():
    def f(a, b): a.add_(1); return b * 2
    x = torch.zeros(3); y = torch.zeros(3)
    return f, lambda: (x.clone(), y.clone()), [lambda fn: fn(x, y), lambda fn: fn(x, x), lambda fn: fn(x, y)]

@probe
def returns_input():
    def f(x): return x
    x = T(3)
    return f, None, [lambda fn: fn(x) is x] * 2

@probe
def returns_same_twice():
    def f(x): y = x + 1; return y, y
    x = T(3)
    return f, None, [lambda fn: (lambda r: r[0] is r[1])(fn(x))] * 2

@probe
def generator_in_fn():
    def f(x):
        def gen():
            for i in range(3): yield x * i
        return sum(gen())
    x = T(3)
    return f, None, [lambda fn: fn(x)] * 2

@probe
def exception_caught():
    def f(x, d):
        try:
            v = d["k"]
        except KeyError:
            v = 1.0
        return x * v
    x = T(3)
    return f, None, [lambda fn: fn(x, {}), lambda fn: fn(x, {"k": 3.0}), lambda fn: fn(x, {})]

@probe
def user_exception_raised():
    def f(x):
        if x.shape[0] > 2: raise ValueError("too big")
        return x
    return f, None, [lambda fn: fn(T(2)), lambda fn: fn(T(3)), lambda fn: fn(T(2))]

@probe
def shape_mismatch_error():
    def f(x, y): return x @ y
    return f, None, [lambda fn: fn(T(2, 3), T(3, 2)), lambda fn: fn(T(2, 3), T(2, 2))]

@probe
def int_arg_change():
    def f(x, n): return x * n + n
    x = T(3)
    return f, None, [lambda fn: fn(x, 1), lambda fn: fn(x, 2), lambda fn: fn(x, True), lambda fn: fn(x, 2.5)]

@probe
def float_neg_zero():
    def f(x, s): return x / s if s != 0 else x * math.copysign(1.0, s)
    import math
    globals()["math"] = math
    x = T(3)
    return f, None, [lambda fn: fn(x, 0.0), lambda fn: fn(x, -0.0)]

@probe
def string_arg():
    def f(x, mode):
        if mode == "a": return x + 1
        return x - 1
    x = T(3)
    return f, None, [lambda fn: fn(x, "a"), lambda fn: fn(x, "b"), lambda fn: fn(x, "a")]

@probe
def list_arg_len_change():
    def f(xs): return sum(xs)
    return f, None, [lambda fn: fn([T(2), T(2)]), lambda fn: fn([T(2), T(2), T(2)])]

@probe
def module_attr_flag():
    class M(nn.Module):
        def __init__(self): super().__init__(); self.flag = True; self.lin = nn.Linear(3, 3)
        def forward(self, x): return self.lin(x) if self.flag else x
    torch.manual_seed(0); m = M(); x = T(3)
    def c(fn): m.flag = not m.flag; return fn(x)
    return m, None, [c, c, c]

@probe
def hooks_added():
    torch.manual_seed(0); m = nn.Linear(3, 3); x = T(3)
    def c1(fn): return fn(x)
    def c2(fn):
        m.register_forward_hook(lambda mod, i, o: o * 10)
        return fn(x)
    return m, None, [c1, c2, c1]

@probe
def autocast_probe():
    def f(x, y): return x @ y
    a, b = T(4, 4), T(4, 4)
    def c1(fn): return fn(a, b)
    def c2(fn):
        with torch.autocast("cpu", dtype=torch.bfloat16): return fn(a, b)
    return f, None, [c1, c2, c1]

@probe
def no_grad_caller():
    w = T(3).requires_grad_()
    def f(x): return (x * w).sum()
    x = T(3)
    def c1(fn): return fn(x).requires_grad
    def c2(fn):
        with torch.no_grad(): return fn(x).requires_grad
    return f, None, [c1, c2, c1]

@probe
def rng_consumption():
    def f(x): return x + torch.rand(3)
    x = torch.zeros(3)
    def c(fn): r = fn(x); return (r, torch.rand(1))
    return f, None, [c, c]

@probe
def dropout_train():
    m = nn.Dropout(0.5); x = torch.ones(1000)
    def c(fn): r = fn(x); return ((r == 0).float().mean() > 0.4).item() and ((r == 0).float().mean() < 0.6).item()
    return m, None, [c, c]

@probe
def int_pow_neg():
    def f(x): return x ** -1
    return f, None, [lambda fn: fn(torch.tensor([1, 2]))]

@probe
def int_div_zero():
    def f(x, y): return x // y
    return f, None, [lambda fn: fn(torch.tensor([1, 2]), torch.tensor([1, 0]))]

@probe
def index_oob():
    def f(x, i): return x[i]
    return f, None, [lambda fn: fn(T(3), torch.tensor([0, 1])), lambda fn: fn(T(3), torch.tensor([0, 5]))]

@probe
def max_empty():
    def f(x): return x.max()
    return f, None, [lambda fn: fn(torch.ones(0))]

@probe
def dict_iter_mutation():
    def f(x, d):
        for k in d:
            d[k + "x"] = 1
        return x
    return f, None, [lambda fn: fn(T(2), {"a": 1})]

@probe
def list_iter_append():
    def f(x):
        l = [1]
        for v in l:
            if len(l) < 4: l.append(v + 1)
        return x * len(l), l
    return f, None, [lambda fn: fn(T(2))] * 2

@probe
def dict_views_live():
    def f(x):
        d = {"a": 1}
        ks = d.keys()
        d["b"] = 2
        return x * len(ks), list(ks)
    return f, None, [lambda fn: fn(T(2))] * 2

@probe
def class_counter():
    class K:
        count = 0
        reg = []
    def f(x):
        K.count += 1
        K.reg.append(K.count)
        return x + K.count
    x = T(2)
    return f, lambda: (K.count, list(K.reg)), [lambda fn: fn(x)] * 3

@probe
def mutable_default():
    def f(x, acc=[]):
        acc.append(1)
        return x * len(acc)
    x = T(2)
    return f, lambda: list(f.__defaults__[0]), [lambda fn: fn(x)] * 3

@probe
def global_log_list():
    g = globals(); g["LOG"] = []
    def f(x):
        LOG.append(x.sum())
        return x + len(LOG)
    x = T(2)
    return f, lambda: len(LOG), [lambda fn: fn(x)] * 12

@probe
def super_attr():
    class A:
        scale = 2.0
        def g(self, x): return x * self.scale
    class B(A):
        def g(self, x): return super().g(x) + 1
    b = B(); x = T(2)
    def c(fn): A.scale += 1; return fn(x)
    return (lambda x: b.g(x)), None, [c, c, c]

@probe
def method_replaced_on_instance():
    torch.manual_seed(0); m = nn.Linear(2, 2); x = T(2)
    def c1(fn): return fn(x)
    def c2(fn): m.forward = lambda x: x * 100; return fn(x)
    return m, None, [c1, c2, c1]

@probe
def monkeypatch_F():
    def f(x): return F.gelu(x)
    x = T(3); orig = F.gelu
    def c1(fn): F.gelu = orig; return fn(x)
    def c2(fn): F.gelu = torch.relu; return fn(x)
    return f, None, [c1, c2, c1]

@probe
def shadow_builtin():
    g = globals()
    def f(x): return x * len([1, 2])
    x = T(3)
    def c1(fn): g.pop("len", None); return fn(x)
    def c2(fn): g["len"] = lambda l: 10; return fn(x)
    return f, None, [c1, c2, c1]

@probe
def storage_offset_read():
    def f(x): return x * x.storage_offset()
    base = T(10)
    return f, None, [lambda fn: fn(base[1:4]), lambda fn: fn(base[2:5]), lambda fn: fn(base[0:3])]

@probe
def is_leaf_read():
    def f(x): return x * 2 if x.is_leaf else x * 3
    a = T(3).requires_grad_()
    return f, None, [lambda fn: fn(a).detach(), lambda fn: fn(a * 1).detach()]

@probe
def contiguous_is():
    def f(x): return x.contiguous() is x
    a = T(3, 3)
    return f, None, [lambda fn: fn(a), lambda fn: fn(a.t()), lambda fn: fn(a)]

@probe
def detach_output():
    def f(x): return x.detach() * 2
    a = T(3).requires_grad_()
    return f, None, [lambda fn: fn(a).requires_grad] * 2

@probe
def nonleaf_inplace_grad():
    def f(a): a.mul_(2); return a.sum()
    def c(fn):
        leaf = T(3).requires_grad_()
        fn(leaf * 1).backward(); return leaf.grad
    return f, None, [c, c]

@probe
def overlap_copy():
    def f(x): x[1:] = x[:-1]; return x
    return f, None, [lambda fn: fn(torch.arange(5.0))]

@probe
def set_grad_enabled_leak():
    def f(x): torch.set_grad_enabled(False); return x * 2
    a = T(3).requires_grad_()
    def c(fn):
        try:
            r = fn(a); return (r.requires_grad, torch.is_grad_enabled())
        finally: torch.set_grad_enabled(True)
    return f, None, [c, c]

@probe
def returned_view_alias():
    def f(x): y = x + 1; return y, y.view(-1)
    def c(fn):
        a, b = fn(torch.ones(2, 2)); b.add_(1); return a
    return f, None, [c, c]

if __name__ == "__main__":
    main(P, sys.argv[1:])
