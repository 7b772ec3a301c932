# ruff: noqa  # a probe corpus: it spells odd constructs (globals, lambdas, shadowing) on purpose
"""Soundness probes (breaks_and_autograd): `python tools/probes/breaks_and_autograd.py [name ...]` prints OK/BAD per
program for backends eager, aot_eager and inductor, and the count of BAD ones."""
import sys, torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, __import__("os").path.dirname(__file__))
from harness import check, main
T = lambda *s: torch.randn(*s)
P = []
def probe(f): P.append(f); return f

@probe
def break_then_effects():
    log = []
    def f(x):
        log.append(1)
        y = x * 2
        print("hi")
        log.append(2)
        return y + len(log)
    x = T(3)
    return f, lambda: list(log), [lambda fn: fn(x)] * 3

@probe
def break_global_write_then_read():
    g = globals(); g["CNT"] = 0
    def f(x):
        global CNT
        CNT += 1
        print("mid")
        return x * CNT
    x = T(3)
    return f, lambda: CNT, [lambda fn: fn(x)] * 3

@probe
def break_inplace_input():
    def f(x):
        x.add_(1)
        print("mid")
        x.mul_(2)
        return x.sum()
    x = torch.zeros(3)
    return f, lambda: x.clone(), [lambda fn: fn(x)] * 3

@probe
def break_module_method():
    class M(nn.Module):
        def __init__(self):
            super().__init__(); self.l = nn.Linear(3, 3); self.calls = 0
        def forward(self, x):
            h = self.l(x)
            self.calls += 1
            print("calls", self.calls)
            return h.relu() + self.calls
    torch.manual_seed(0); m = M(); x = T(2, 3)
    return m, lambda: m.calls, [lambda fn: fn(x)] * 3

@probe
def break_training_grads():
    torch.manual_seed(0); m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)); x = T(5, 3)
    def f(x):
        h = m(x)
        if h.sum() > 0:
            h = h * 2
        return h.pow(2).mean()
    def c(fn):
        m.zero_grad()
        loss = fn(x); loss.backward()
        return loss.detach(), [p.grad.clone() for p in m.parameters()]
    return f, None, [c, c]

@probe
def break_data_dep_in_loop():
    def f(x):
        for i in range(3):
            if x.sum() > i:
                x = x - 1
            else:
                x = x + 1
        return x
    return f, None, [lambda fn: fn(torch.ones(3)), lambda fn: fn(torch.zeros(3))]

@probe
def break_nonlocal():
    def make():
        n = 0
        def f(x):
            nonlocal n
            n += 1
            print("n", n)
            return x + n
        return f
    f = make()
    x = T(2)
    return f, None, [lambda fn: fn(x)] * 3

@probe
def break_list_arg_mutation():
    def f(x, l):
        l.append(x.sum())
        print(len(l))
        l.append(x.mean())
        return x * len(l)
    ls = []
    return f, lambda: len(ls), [lambda fn: fn(T(3), ls)] * 3

@probe
def break_returns_tuple_locals():
    def f(x, y):
        a = x + y
        b = x - y
        print("ab")
        c = a * b
        return a, b, c
    return f, None, [lambda fn: fn(T(2), T(2))] * 2

@probe
def break_aliasing():
    def f(x, y):
        z = x * 2
        print("al")
        x.add_(1)
        return y + z
    a = torch.zeros(3)
    return f, lambda: a.clone(), [lambda fn: fn(a, a), lambda fn: fn(a, torch.zeros(3)), lambda fn: fn(a, a)]

@probe
def tolist_item():
    def f(x):
        vals = x.tolist()
        return x * sum(vals)
    return f, None, [lambda fn: fn(torch.tensor([1., 2.])), lambda fn: fn(torch.tensor([3., 4.]))]

@probe
def recursion():
    def fact(n): return 1 if n <= 1 else n * fact(n - 1)
    def f(x, n): return x * fact(n)
    return f, None, [lambda fn: fn(T(2), 3), lambda fn: fn(T(2), 4)]

@probe
def break_under_no_grad_caller():
    w = T(3).requires_grad_()
    def f(x):
        y = x * w
        print("ng")
        return y.sum()
    x = T(3)
    def c1(fn): return fn(x).requires_grad
    def c2(fn):
        with torch.no_grad(): return fn(x).requires_grad
    return f, None, [c1, c2, c1]

@probe
def set_grad_enabled_inside_break():
    def f(x):
        with torch.enable_grad():
            y = x * 2
        return y
    x = T(3).requires_grad_()
    def c(fn):
        with torch.no_grad(): return fn(x).requires_grad
    return f, None, [c, c]

@probe
def attr_mutation_object():
    class O: pass
    o = O(); o.v = 1.0
    def f(x):
        o.v = o.v + 1
        return x * o.v
    x = T(2)
    return f, lambda: o.v, [lambda fn: fn(x)] * 3

@probe
def dict_arg_changes_keys():
    def f(x, d):
        return sum(x * v for v in d.values())
    x = T(2)
    return f, None, [lambda fn: fn(x, {"a": 1}), lambda fn: fn(x, {"a": 1, "b": 2}), lambda fn: fn(x, {"b": 3})]

@probe
def tensor_method_rebind():
    def f(x): return x.relu()
    x = T(4)
    return f, None, [lambda fn: fn(x), lambda fn: fn(x.double())]

@probe
def isinstance_branch():
    def f(x, y):
        if isinstance(y, torch.Tensor): return x + y
        return x * y
    return f, None, [lambda fn: fn(T(2), T(2)), lambda fn: fn(T(2), 3), lambda fn: fn(T(2), T(2))]

@probe
def none_arg():
    def f(x, m=None):
        if m is None: return x
        return x * m
    return f, None, [lambda fn: fn(T(2)), lambda fn: fn(T(2), T(2)), lambda fn: fn(T(2))]

@probe
def enumerate_zip():
    def f(xs, ws):
        return sum(i * x * w for i, (x, w) in enumerate(zip(xs, ws)))
    return f, None, [lambda fn: fn([T(2), T(2)], [1.0, 2.0])] * 2

@probe
def global_module_object_attr():
    import types as _t
    mod = _t.ModuleType("cfgmod"); mod.SCALE = 2.0
    sys.modules["cfgmod"] = mod
    g = globals(); g["cfgmod"] = mod
    def f(x): return x * cfgmod.SCALE
    x = T(2)
    def c(fn): mod.SCALE += 1; return fn(x)
    return f, None, [c, c, c]

@probe
def class_attr_via_type():
    class A:
        k = 1.0
        def f(self, x): return x * type(self).k
    a = A(); x = T(2)
    def c(fn): A.k += 1; return fn(x)
    return (lambda x: a.f(x)), None, [c, c, c]

@probe
def property_replaced():
    class A:
        @property
        def s(self): return 2.0
    a = A(); x = T(2)
    def c1(fn): return fn(x)
    def c2(fn): A.s = property(lambda self: 5.0); return fn(x)
    return (lambda x: x * a.s), None, [c1, c2, c1]

@probe
def staticmethod_replaced():
    class A:
        @staticmethod
        def g(x): return x + 1
    x = T(2)
    def c1(fn): return fn(x)
    def c2(fn): A.g = staticmethod(lambda x: x - 1); return fn(x)
    return (lambda x: A.g(x)), None, [c1, c2, c1]

@probe
def helper_other_module_global():
    import types as _t
    mod = _t.ModuleType("othermod")
    exec("FACTOR = 2.0\ndef helper(x):\n    return x * FACTOR\n", mod.__dict__)
    x = T(2)
    def c(fn): mod.FACTOR += 1.0; return fn(x)
    return (lambda x: mod.helper(x)), None, [c, c, c]

@probe
def global_forward_hook():
    import torch.nn.modules.module as mm
    torch.manual_seed(0); m = nn.Linear(2, 2); x = T(2)
    handles = []
    def c1(fn): return fn(x)
    def c2(fn):
        handles.append(mm.register_module_forward_hook(lambda mod, i, o: o * 0))
        try: return fn(x)
        finally: handles.pop().remove()
    return m, None, [c1, c2, c1]

@probe
def tied_weights():
    torch.manual_seed(0)
    emb = nn.Embedding(5, 3); lin = nn.Linear(3, 5, bias=False)
    def f(ids): return lin(emb(ids))
    ids = torch.tensor([1, 2])
    def c1(fn): return fn(ids)
    def c2(fn): lin.weight = emb.weight; return fn(ids)
    def c3(fn): lin.weight = nn.Parameter(torch.randn(5, 3)); return fn(ids)
    return f, None, [c1, c2, c3, c2]

@probe
def list_slots_alias():
    def f(xs):
        xs[0].add_(1)
        return xs[1] * 2
    a, b = torch.zeros(2), torch.zeros(2)
    return f, lambda: (a.clone(), b.clone()), [lambda fn: fn([a, b]), lambda fn: fn([a, a]), lambda fn: fn([a, b])]

@probe
def is_check_objects():
    def f(x, a, b): return x + 1 if a is b else x - 1
    o1, o2 = object(), object()
    return f, None, [lambda fn: fn(T(2), o1, o1), lambda fn: fn(T(2), o1, o2), lambda fn: fn(T(2), o1, o1)]

@probe
def grad_fn_none():
    def f(x): return x * 2 if x.grad_fn is None else x * 3
    a = T(3).requires_grad_()
    return f, None, [lambda fn: fn(a).detach(), lambda fn: fn(a * 1).detach(), lambda fn: fn(a).detach()]

@probe
def is_view_read():
    def f(x): return x + 1 if x._is_view() else x - 1
    a = T(4)
    return f, None, [lambda fn: fn(a), lambda fn: fn(a[1:]), lambda fn: fn(a)]

@probe
def retain_grad_inside():
    def f(x):
        y = x * 2
        y.retain_grad()
        z = (y * y).sum()
        return z, y
    def c(fn):
        a = torch.ones(3, requires_grad=True)
        z, y = fn(a); z.backward(); return a.grad, y.grad
    return f, None, [c, c]

@probe
def autograd_grad_create_graph():
    def f(x):
        y = (x ** 3).sum()
        g, = torch.autograd.grad(y, x, create_graph=True)
        return g.sum()
    def c(fn):
        a = torch.ones(3, requires_grad=True)
        r = fn(a); r.backward(); return r.detach(), a.grad
    return f, None, [c, c]

@probe
def requires_grad_inside():
    def f(x):
        x.requires_grad_()
        return (x * 2).sum()
    def c(fn):
        a = torch.ones(3)
        r = fn(a); r.backward(); return a.grad
    return f, None, [c, c]

@probe
def out_empty():
    def f(a, b):
        out = torch.empty(0)
        torch.add(a, b, out=out)
        return out
    return f, None, [lambda fn: fn(T(3), T(3))] * 2

@probe
def resize_input():
    def f(a):
        a.resize_(4)
        return a.fill_(1.0)
    return f, None, [lambda fn: fn(torch.zeros(2))] * 2

@probe
def detach_input_():
    def f(a):
        a.detach_()
        return a * 2
    def c(fn):
        a = (torch.ones(3, requires_grad=True) * 1)
        r = fn(a); return r, r.requires_grad, a.requires_grad
    return f, None, [c, c]

@probe
def F_dropout():
    def f(x): return F.dropout(x, 0.5, training=True)
    def c(fn):
        torch.manual_seed(5); r = fn(torch.ones(2000)); frac = (r == 0).float().mean().item()
        return 0.4 < frac < 0.6 and set(r.unique().tolist()) <= {0.0, 2.0}
    return f, None, [c, c]

@probe
def bernoulli_inplace():
    def f(x): return x.bernoulli_(0.5)
    def c(fn):
        r = fn(torch.zeros(2000)); return 0.4 < r.mean().item() < 0.6
    return f, None, [c, c]

if __name__ == "__main__":
    main(P, sys.argv[1:])
