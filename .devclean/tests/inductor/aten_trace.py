"""A tiny ATen recorder local to inductor's tests (aotgrad owns the real tracer).

Runs a function on real tensors under a TorchDispatchMode, records every ATen op into an
FX graph (decomposing with inductor's table), and puts a FakeTensor into every node's
`meta["example_value"]`, as the ATen-graph contract asks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from inductor.decompositions import decomposition_table
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode


class _Recorder(TorchDispatchMode):
    def __init__(self, graph: torch.fx.Graph, root: torch.nn.Module,
                 decomps: dict[Any, Callable[..., Any]]) -> None:
        super().__init__()
        self.graph = graph
        self.root = root
        self.decomps = decomps
        self.env: dict[int, tuple[torch.Tensor, torch.fx.Node]] = {}
        self.fake = FakeTensorMode(allow_non_fake_inputs=True)
        self.n_const = 0

    def node_of(self, t: torch.Tensor) -> torch.fx.Node:
        entry = self.env.get(id(t))
        if entry is not None and entry[0] is t:
            return entry[1]
        name = f"_const{self.n_const}"
        self.n_const += 1
        self.root.register_buffer(name, t.detach().clone())
        node = self.graph.get_attr(name)
        node.meta["example_value"] = self.fake.from_tensor(t)
        self.env[id(t)] = (t, node)
        return node

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in self.decomps:
            with self:
                out = self.decomps[func](*args, **kwargs)
            if out is not NotImplemented:
                return out
        out = func(*args, **kwargs)
        nargs, nkwargs = pytree.tree_map_only(torch.Tensor, self.node_of, (args, kwargs))
        node = self.graph.call_function(func, tuple(nargs), dict(nkwargs))
        node.meta["example_value"] = pytree.tree_map_only(
            torch.Tensor, self.fake.from_tensor, out)
        if isinstance(out, torch.Tensor):
            self.env[id(out)] = (out, node)
        elif isinstance(out, (tuple, list)):
            import operator

            for i, o in enumerate(out):
                if isinstance(o, torch.Tensor):
                    item = self.graph.call_function(operator.getitem, (node, i))
                    item.meta["example_value"] = self.fake.from_tensor(o)
                    self.env[id(o)] = (o, item)
        return out


def trace_aten(fn: Callable[..., Any], inputs: Sequence[torch.Tensor],
               decompose: bool = True) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    root = torch.nn.Module()
    rec = _Recorder(graph, root, decomposition_table() if decompose else {})
    inputs = [i.detach() for i in inputs]
    for k, x in enumerate(inputs):
        node = graph.placeholder(f"arg{k}")
        node.meta["example_value"] = rec.fake.from_tensor(x)
        rec.env[id(x)] = (x, node)
    with torch.no_grad(), rec:
        out = fn(*inputs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    graph.output(tuple(rec.node_of(o) if isinstance(o, torch.Tensor) else o for o in outs))
    gm = torch.fx.GraphModule(root, graph)
    return gm
