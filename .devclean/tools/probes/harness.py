# ruff: noqa  # a probe corpus: it spells odd constructs (globals, lambdas, shadowing) on purpose
"""Differential probe runner (eager vs compiled over several calls with state changed
between them: results, printed output, state); used by tools/probes/*.py."""
"""Differential probe runner: each probe is (name, setup) where setup() returns
(fn, calls) with calls a list of (args-thunk, between-thunk)."""
import copy, io, contextlib, sys, traceback, math
import torch, compiler

def same(a, b):
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor): return False
        if a.shape != b.shape or a.dtype != b.dtype: return False
        if a.requires_grad != b.requires_grad: return f"requires_grad {a.requires_grad} vs {b.requires_grad}"
        return torch.allclose(a.detach().double(), b.detach().double(), rtol=1e-4, atol=1e-5, equal_nan=True)
    if isinstance(a, (list, tuple)):
        return type(a) == type(b) and len(a) == len(b) and all(same(x, y) is True for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(a)==type(b) and a.keys() == b.keys() and all(same(a[k], b[k]) is True for k in a)
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a): return math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return type(a) == type(b) and a == b

def run_side(make, backend, ncalls):
    torch.manual_seed(1234)
    fn, state, calls = make()
    if backend is not None:
        fn = compiler.compile(fn, backend=backend)
    outs = []
    torch.manual_seed(0)
    for i, call in enumerate(calls):
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                r = call(fn)
            outs.append(("ok", r, buf.getvalue(), copy.deepcopy(state()) if state else None))
        except Exception as e:
            outs.append(("exc", type(e).__name__, buf.getvalue(), None))
    return outs

def check(name, make, backends=("eager", "aot_eager", "inductor")):
    compiler.reset()
    ref = run_side(make, None, 0)
    res = {}
    for b in backends:
        compiler.reset()
        try:
            got = run_side(make, b, 0)
        except Exception as e:
            res[b] = f"CRASH {type(e).__name__}: {e}"[:200]; continue
        bad = None
        for i, (r, g) in enumerate(zip(ref, got)):
            if r[0] != g[0]:
                bad = f"call {i}: eager {r[0]} {r[1] if r[0]=='exc' else ''} vs {g[0]} {g[1] if g[0]=='exc' else ''}"; break
            if r[0] == "exc":
                if r[1] != g[1]: bad = f"call {i}: exc {r[1]} vs {g[1]}"; break
                continue
            s = same(r[1], g[1])
            if s is not True: bad = f"call {i}: result differs ({s}) {str(r[1])[:60]} vs {str(g[1])[:60]}"; break
            if r[2] != g[2]: bad = f"call {i}: stdout {r[2]!r} vs {g[2]!r}"; break
            s = same(r[3], g[3])
            if s is not True: bad = f"call {i}: state differs {str(r[3])[:80]} vs {str(g[3])[:80]}"; break
        res[b] = bad or "ok"
    line = "  ".join(f"{b}={v}" for b, v in res.items())
    flag = "OK  " if all(v == "ok" for v in res.values()) else "BAD "
    print(f"{flag}{name}: {line}", flush=True)
    return res


def main(probes, argv):
    """Run `probes` (those named in `argv`, or all) and print the count of BAD ones."""
    bad = 0
    for p in probes:
        if argv and p.__name__ not in argv:
            continue
        try:
            r = check(p.__name__, p)
        except Exception as e:
            print("ERR ", p.__name__, type(e).__name__, str(e)[:200])
            continue
        bad += any(v != "ok" for v in r.values())
    print("bad", bad, "of", len(probes))
