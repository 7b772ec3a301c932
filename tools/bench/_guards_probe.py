"""Throwaway probe: cost of candidate guard expressions (not a benchmark of record)."""
import contextvars
import time
import weakref

import torch

x = torch.ones(1)
TB = torch._C.TensorBase
cv = contextvars.ContextVar("b", default=None)
cands = {
    "empty": "True",
    "id(v)": "id(v)",
    "type": "type(v) is T",
    "dtype": "v.dtype is d",
    "shape": "v.shape == s",
    "stride": "v.stride() == st",
    "contig": "v.is_contiguous()",
    "rg": "v.requires_grad is False",
    "is_cpu": "v.is_cpu",
    "device==": "v.device == dev",
    "is_inference": "v.is_inference()",
    "is_conj": "v.is_conj()",
    "is_neg": "v.is_neg()",
    "layout": "v.layout is lay",
    "dk raw": "_dk(v).raw_repr() == kr",
    "dk ==": "_dk(v) == k",
    "grad": "_ge() is True",
    "defdtype": "_gd() is d",
    "det": "_det() is False",
    "anyac": "_anyac() is False",
    "ac cpu": "_ac('cpu') is False",
    "backend": "id(_cv()) == 0",
    "memo": "_m.get(id(v)) is v",
    "wref memo": "(_w.get(id(v)) or _none)() is v",
    "ag": "_ag(v) == e",
    "ndim": "v.ndim == 1",
}
ag = __import__("operator").attrgetter("dtype", "requires_grad", "is_cpu")
env = dict(T=torch.Tensor, d=torch.float32, s=(1,), st=(1,), dev=torch.device("cpu"),
           lay=torch.strided, _dk=torch._C._dispatch_keys, kr=torch._C._dispatch_keys(x).raw_repr(),
           k=torch._C._dispatch_keys(x), _ge=torch._C.is_grad_enabled, _gd=torch.get_default_dtype,
           _det=torch._C._get_deterministic_algorithms, _anyac=torch._C._is_any_autocast_enabled,
           _ac=torch.is_autocast_enabled, _cv=cv.get, _m={id(x): x}, _w={id(x): weakref.ref(x)},
           _none=lambda: None, _ag=ag, e=ag(x))
for name, expr in cands.items():
    src = (f"def mk({','.join(env)}):\n  def f(v):\n    for _ in range(100000):\n      {expr}\n"
           f"  return f\n")
    ns: dict = {}
    exec(src, ns)
    f = ns["mk"](**env)
    best = 1e9
    for _ in range(7):
        t0 = time.perf_counter_ns()
        f(x)
        best = min(best, (time.perf_counter_ns() - t0) / 100000)
    print(f"{name:12s} {best:7.1f}")
