"""A copy of an FX graph for a rewrite pass to edit (`bias_unfuse.py`, `mm_pad.py`): the
caller's graph module stays as it was, for callers that keep it."""

from __future__ import annotations

from torch import fx


def copy_graph(gm: fx.GraphModule) -> fx.Graph:
    """A new graph with `gm`'s nodes, each with a copy of its node's `meta`."""
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    out = graph.graph_copy(gm.graph, env)
    graph.output(out)
    for old, new in env.items():
        new.meta = dict(old.meta)
    return graph
