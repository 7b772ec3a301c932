"""The `memory_budget` partitioner: trade recomputation for activation memory.

Budget 1.0 saves what `min_cut` saves (expensive ops are never recomputed); budget 0.0 saves
what full recomputation saves (min_cut where only random ops must not run twice). In between,
the target is `B0 + budget * (B1 - B0)` saved bytes, or less where torch.compile's scale for
the same budget allows less (`BudgetPlanner.target_bytes`). Two relaxed cuts come first
(recompute the cheap values a matmul reads; then also reductions and every op but the
compute-intensive ones); if neither fits, the items of a 0-1 knapsack are the
compute-intensive activations (matmuls, convolutions, attention) the forward computes:
weight = their bytes, value = the estimated runtime of recomputing them (with their cheap
inputs). Kept items stay banned from recomputation; the rest may be recomputed, and min_cut
with that ban set gives the saved values. The real saved bytes are checked against the
target: items are dropped (worst value per byte first) until the target holds, then added
back while it does.
"""

from __future__ import annotations

import functools

from torch import fx

from aotgrad.partition.analysis import (
    JointInfo,
    analyze,
    bytes_of,
    example_value,
    is_cheap,
    is_compute_intensive,
    is_rerunnable,
    storage_root,
    value_bytes,
)
from aotgrad.partition.estimate import Estimator, get_estimator
from aotgrad.partition.knapsack import get_solver
from aotgrad.partition.mincut import (
    banned_for_min_cut,
    materialized_values,
    min_cut_saved_values,
)
from aotgrad.partition.options import PartitionConfig
from aotgrad.partition.pareto import write_pareto_svg
from aotgrad.partition.point import BudgetPoint
from aotgrad.partition.split import Partition, activation_bytes, split


class BudgetPlanner:
    """Solves the memory-budget problem for one joint graph, any number of budgets."""

    def __init__(self, info: JointInfo, estimator: Estimator, *,
                 fused_recompute: bool = False) -> None:
        self.info = info
        self.estimator = estimator
        self.fused_recompute = fused_recompute  # NOTE: see PartitionConfig
        self._runtime: dict[fx.Node, float] = {}
        self._cuts: dict[frozenset[fx.Node], frozenset[fx.Node]] = {}
        self.candidates = self._find_candidates()
        self.max_saved = self.saved_with_kept(frozenset(self.candidates))
        self.max_bytes = activation_bytes(self.max_saved)

    @functools.cached_property
    def min_saved(self) -> frozenset[fx.Node]:
        """The saved values of full recomputation (budget 0.0)."""
        return self.saved_with_kept(frozenset())

    @functools.cached_property
    def min_bytes(self) -> int:
        # NOTE: computed lazily: budget 1.0 (the default) needs one cut only.
        return min(activation_bytes(self.min_saved), self.max_bytes)

    def runtime(self, node: fx.Node) -> float:
        if node not in self._runtime:
            self._runtime[node] = self.estimator(node)
        return self._runtime[node]

    def _find_candidates(self) -> list[fx.Node]:
        """Expensive, deterministic forward values the backward reads (transitively), and the
        cheap ones min_cut saves because an expensive forward op materializes them."""
        info = self.info
        materialized = materialized_values(info, fused_recompute=self.fused_recompute)
        frontier = [
            arg
            for node in info.tangent_dependent
            for arg in node.all_input_nodes
            if info.is_forward_computable(arg)
        ]
        seen: set[fx.Node] = set()
        while frontier:
            node = frontier.pop()
            if node in seen:
                continue
            seen.add(node)
            frontier.extend(node.all_input_nodes)
        found = [
            n
            for n in seen
            if n in materialized
            or (n.op == "call_function" and not is_cheap(n) and is_rerunnable(n))
        ]
        return sorted(found, key=info.order.__getitem__)

    def saved_with_kept(self, kept: frozenset[fx.Node]) -> frozenset[fx.Node]:
        """min_cut saved values when only `kept` of the candidates stay banned."""
        if kept not in self._cuts:
            candidates = set(self.candidates)

            def banned(node: fx.Node) -> bool:
                if node in candidates:
                    return node in kept
                return banned_for_min_cut(node)

            self._cuts[kept] = frozenset(min_cut_saved_values(
                self.info, banned, fused_recompute=self.fused_recompute))
        return self._cuts[kept]

    def item_cost(self, node: fx.Node) -> float:
        """Recompute runtime of `node` plus the cheap ops feeding it that are not saved."""
        cost = self.runtime(node)
        stack = list(node.all_input_nodes)
        seen: set[fx.Node] = set()
        while stack:
            arg = stack.pop()
            if arg in seen or arg in self.max_saved or arg.op != "call_function":
                continue
            seen.add(arg)
            if is_cheap(arg):
                cost += self.runtime(arg)
                stack.extend(arg.all_input_nodes)
        return cost

    def unsaved_input_bytes(self, saved: frozenset[fx.Node]) -> int:
        """Bytes of the graph inputs (parameters, user inputs) `saved` does not keep."""
        kept = {storage_root(n) for n in saved}
        return sum(value_bytes(p) for p in self.info.primals if p not in kept)

    @functools.cached_property
    def torch_range(self) -> int:
        """The bytes between budget 0.0 and 1.0 on torch.compile's scale (`target_bytes`)."""
        return self.max_bytes - self.unsaved_input_bytes(self.max_saved)

    def fits(self, saved: frozenset[fx.Node], budget: float) -> bool:
        """Whether a relaxed cut's saved values fit the budget: at most `budget` of the way
        from full recomputation's bytes to budget 1.0's, and under torch.compile's test of
        the same cut (its saved bytes above the graph inputs' it does not save)."""
        if activation_bytes(saved) > self.limit_bytes(budget):
            return False
        return self.torch_accepts(saved, budget)

    def torch_accepts(self, saved: frozenset[fx.Node], budget: float) -> bool:
        """torch.compile's test of a relaxed cut: its saved bytes above the graph inputs'
        it does not save are at most `budget` of torch's range (`target_bytes`)."""
        return (self.torch_range <= 0 or activation_bytes(saved)
                - self.unsaved_input_bytes(saved) <= budget * self.torch_range)

    def limit_bytes(self, budget: float) -> float:
        """`budget` of the way from full recomputation's bytes to budget 1.0's: no budget
        saves more."""
        return self.min_bytes + budget * (self.max_bytes - self.min_bytes)

    def target_bytes(self, budget: float) -> float:
        """The activation bytes the knapsack may keep: `limit_bytes`, and never more than
        torch.compile's `activation_memory_budget` allows at the same value.

        NOTE: torch measures a budget on a scale that starts at the bytes of every graph
        input and ends at budget 1.0's saved values (inputs included), so graph inputs that
        budget 1.0 does not save (the first layer's weight, whose gradient needs only the
        input) narrow its range: the benchmark's MLP saves 11.0 MB at 1.0, its first
        layer's 4.2 MB weight is not saved, so torch's range is 6.8 MB and 0.25 keeps at
        most 1.7 MB there, not 2.75 MB. Where torch's test accepts a relaxed cut at this
        budget (torch then saves that cut), the knapsack may keep as much as that cut: the
        MLP at 0.5, whose relaxed cut (6.8 MB) is over 0.5 x 11.0 MB, kept 2.6 MB under
        torch's 3.4 MB where torch saves 6.8 MB, and recomputed a matmul more.
        """
        ours = self.limit_bytes(budget)
        # NOTE: an empty torch range makes torch save budget 1.0's values at any budget
        if self.torch_range <= 0:
            return ours
        torch_bytes = budget * self.torch_range
        for cut in self.relaxed_cuts:
            if self.torch_accepts(cut, budget):
                torch_bytes = max(torch_bytes, activation_bytes(cut))
                break
        return min(ours, torch_bytes)

    @functools.cached_property
    def relaxed_cuts(self) -> list[frozenset[fx.Node]]:
        """Cuts between budget 1.0 and the knapsack, fewest bans last: recompute cheap ops
        even where an expensive op reads them, then also reductions and every other op but
        the compute-intensive ones (matmuls, convolutions, attention)."""
        cheap_only = frozenset(n for n in self.candidates if not is_cheap(n))
        return [self.saved_with_kept(cheap_only),
                self.saved_with_kept(frozenset(self.knapsack_items))]

    @functools.cached_property
    def knapsack_items(self) -> list[fx.Node]:
        """The candidates the last relaxed cut still keeps: the compute-intensive ones.

        NOTE: below that cut every other value is recomputed freely, as in torch's
        partitioner (its knapsack weighs only what its most aggressive cut bans): a cheap
        value a convolution reads (a batch norm's ReLU) is worth little per byte but fills
        the room the knapsack leaves, and kept the CNN of tools/bench/memory_budget at
        12.6 MB on inductor at 0.5 where torch.compile keeps 9.4 MB.
        """
        return [n for n in self.candidates if not is_cheap(n) and is_compute_intensive(n)]

    def solve(self, budget: float, solver: str) -> frozenset[fx.Node]:
        """Saved values for this budget: the first relaxed cut that `fits` if one does
        (as torch's partitioner does: they recompute only ops cheap next to a matmul), else
        the knapsack over the candidates, repaired exactly against the target."""
        if budget >= 1.0:
            return self.max_saved
        if budget <= 0.0 or not self.candidates:
            return self.min_saved
        target = self.target_bytes(budget)
        for cut in self.relaxed_cuts:
            if self.fits(cut, budget):
                return cut
        if not self.knapsack_items:
            return self.min_saved
        items = self.knapsack_items
        weights = [float(bytes_of(example_value(n))) for n in items]
        values = [self.item_cost(n) for n in items]
        chosen = get_solver(solver)(weights, values, target - self.min_bytes)
        kept = {items[i] for i in chosen}

        def density(node: fx.Node) -> float:
            i = items.index(node)
            return values[i] / max(weights[i], 1.0)

        # NOTE: item weights only approximate what a kept item adds to the cut, so check the
        # real saved bytes: drop the least valuable per byte until the target holds...
        while kept and activation_bytes(self.saved_with_kept(frozenset(kept))) > target:
            kept.remove(min(kept, key=density))
        # ...then add back what still fits, most valuable per byte first. NOTE: only items
        # no heavier than the room left are tried (each try is a min cut: trying them all
        # made a GPT-2 compile with a Pareto plot take minutes).
        room = target - activation_bytes(self.saved_with_kept(frozenset(kept)))
        for node in sorted(set(items) - kept, key=density, reverse=True):
            if weights[items.index(node)] > room:
                continue
            trial = frozenset(kept | {node})
            trial_bytes = activation_bytes(self.saved_with_kept(trial))
            if trial_bytes <= target:
                kept.add(node)
                room = target - trial_bytes
        saved = self.saved_with_kept(frozenset(kept))
        if activation_bytes(saved) > target:
            return self.min_saved
        return saved

    def recompute_time(self, partition: Partition) -> float:
        return sum(self.runtime(n) for n in partition.recomputed)

    def point(self, budget: float, solver: str) -> tuple[Partition, BudgetPoint]:
        partition = split(self.info, self.solve(budget, solver))
        point = BudgetPoint(
            budget=budget,
            target_bytes=self.limit_bytes(budget),
            saved_bytes=activation_bytes(partition.saved),
            recompute_time=self.recompute_time(partition),
        )
        return partition, point

    def pareto(self, solver: str, steps: int = 20) -> list[BudgetPoint]:
        """Every budget from 0 to 1 in steps of 1/steps (0.05 by default)."""
        return [self.point(i / steps, solver)[1] for i in range(steps + 1)]


def memory_budget_partition(
    joint: fx.GraphModule, *, num_fwd_outputs: int, config: PartitionConfig
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Minimize estimated recompute runtime with saved activation bytes under the budget."""
    info = analyze(joint, num_fwd_outputs)
    planner = BudgetPlanner(info, get_estimator(config.estimator),
                            fused_recompute=config.fused_recompute)
    partition, chosen = planner.point(config.activation_memory_budget, config.solver)
    if config.pareto_svg is not None:
        write_pareto_svg(config.pareto_svg, planner.pareto(config.solver), chosen=chosen)
    return partition.fw, partition.bw
