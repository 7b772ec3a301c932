"""Runtime estimates of one ATen node, used to price recomputation.

`flops`: FLOPs from torch.utils.flop_counter on meta tensors against a peak rate, or the bytes
the op moves against memory bandwidth, whichever is slower (a roofline; pointwise ops count
no FLOPs, so they cost their memory traffic). `profile`: the median of a few timed runs on
real random tensors of the node's shapes, cached per op and shapes. `testing`: 1 per op.
"""

from __future__ import annotations

import operator
import statistics
import time
from collections.abc import Callable

import torch
from torch import fx
from torch.utils.flop_counter import FlopCounterMode

from aotgrad.partition.analysis import bytes_of, example_value, is_view

Estimator = Callable[[fx.Node], float]

# NOTE: round numbers for one CPU socket and one datacenter GPU; only ratios between ops
# matter to the knapsack, so the absolute values need not be precise.
_PEAK_FLOPS = {"cpu": 1e11, "cuda": 5e13}
_BANDWIDTH = {"cpu": 2e10, "cuda": 2e12}


def _node_device(node: fx.Node) -> str:
    value = example_value(node)
    if isinstance(value, (tuple, list)) and value:
        value = value[0]
    if isinstance(value, torch.Tensor):
        return value.device.type
    return "cpu"


def _io_bytes(node: fx.Node) -> int:
    moved = bytes_of(example_value(node))
    for arg in node.all_input_nodes:
        moved += bytes_of(example_value(arg))
    return moved


def _map_nodes(value: object, fn: Callable[[fx.Node], object]) -> object:
    if isinstance(value, fx.Node):
        return fn(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_map_nodes(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map_nodes(v, fn) for k, v in value.items()}
    return value


def _materialize(
    node: fx.Node, make: Callable[[torch.Tensor], torch.Tensor]
) -> tuple[tuple[object, ...], dict[str, object]]:
    def convert(arg: fx.Node) -> object:
        value = example_value(arg)
        if isinstance(value, torch.Tensor):
            return make(value)
        return value

    args = tuple(_map_nodes(a, convert) for a in node.args)
    kwargs = {k: _map_nodes(v, convert) for k, v in node.kwargs.items()}
    return args, kwargs


def _meta_like(value: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(
        tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device="meta"
    )


def count_flops(node: fx.Node) -> int:
    """FLOPs of one call_function node, 0 where the flop counter has no formula."""
    if node.op != "call_function" or node.target is operator.getitem:
        return 0
    args, kwargs = _materialize(node, _meta_like)
    counter = FlopCounterMode(display=False)
    try:
        with counter:
            node.target(*args, **kwargs)  # type: ignore[operator]  # NOTE: an ATen OpOverload
    except Exception:  # noqa: BLE001  # NOTE: an op without a meta kernel simply counts 0
        return 0
    return int(counter.get_total_flops())


def flops_estimate(node: fx.Node) -> float:
    """Roofline seconds: max(FLOPs / peak, bytes moved / bandwidth); views are free."""
    if node.op != "call_function" or is_view(node):
        return 0.0
    device = _node_device(node)
    compute = count_flops(node) / _PEAK_FLOPS.get(device, _PEAK_FLOPS["cpu"])
    memory = _io_bytes(node) / _BANDWIDTH.get(device, _BANDWIDTH["cpu"])
    return max(compute, memory)


def testing_estimate(node: fx.Node) -> float:
    """Unit cost per op (getitem is not an op)."""
    if node.op != "call_function" or node.target is operator.getitem:
        return 0.0
    return 1.0


def _random_like(value: torch.Tensor) -> torch.Tensor:
    out = torch.empty_strided(
        tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device=value.device
    )
    if out.is_floating_point() or out.is_complex():
        out.normal_()
    else:
        # NOTE: zeros are valid indices for gather/embedding-like ops.
        out.zero_()
    return out


def _profile_key(node: fx.Node) -> str:
    def describe(arg: fx.Node) -> str:
        value = example_value(arg)
        if isinstance(value, torch.Tensor):
            return f"T({tuple(value.shape)},{tuple(value.stride())},{value.dtype},{value.device})"
        return repr(value)

    args = [_map_nodes(a, describe) for a in node.args]
    kwargs = {k: _map_nodes(v, describe) for k, v in node.kwargs.items()}
    return f"{node.target}|{args!r}|{kwargs!r}"


class ProfileEstimator:
    """Times each op on real tensors (median of `repeats` runs after one warm-up), cached."""

    def __init__(self, repeats: int = 3) -> None:
        self.repeats = repeats
        self.cache: dict[str, float] = {}

    def __call__(self, node: fx.Node) -> float:
        if node.op != "call_function" or is_view(node):
            return 0.0
        key = _profile_key(node)
        if key not in self.cache:
            self.cache[key] = self._measure(node)
        return self.cache[key]

    def _measure(self, node: fx.Node) -> float:
        try:
            args, kwargs = _materialize(node, _random_like)
        except Exception:  # noqa: BLE001  # NOTE: cannot build inputs: fall back to the model
            return flops_estimate(node)
        target: Callable[..., object] = node.target  # type: ignore[assignment]  # NOTE: an ATen OpOverload
        on_cuda = _node_device(node) == "cuda"

        def sync() -> None:
            if on_cuda:
                torch.cuda.synchronize()

        times: list[float] = []
        try:
            with torch.no_grad():
                target(*args, **kwargs)
                for _ in range(self.repeats):
                    sync()
                    start = time.perf_counter()
                    target(*args, **kwargs)
                    sync()
                    times.append(time.perf_counter() - start)
        except Exception:  # noqa: BLE001  # NOTE: e.g. an op rejecting random values
            return flops_estimate(node)
        return statistics.median(times)


_PROFILE = ProfileEstimator()


def get_estimator(name: str) -> Estimator:
    if name == "flops":
        return flops_estimate
    if name == "profile":
        return _PROFILE
    if name == "testing":
        return testing_estimate
    raise ValueError(f"unknown runtime estimator {name!r}; choose flops, profile or testing")
