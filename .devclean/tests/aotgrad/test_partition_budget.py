"""memory_budget: budgets respected and monotone, extremes, solvers vs brute force, estimators,
the Pareto SVG, option validation."""

from __future__ import annotations

import itertools
import random
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from aotgrad.partition import PartitionConfig, estimate, get_partitioner, saved_bytes
from aotgrad.partition.analysis import analyze, storage_root
from aotgrad.partition.budget import BudgetPlanner
from aotgrad.partition.estimate import count_flops, get_estimator
from aotgrad.partition.knapsack import ilp_available, solve_dp, solve_greedy, solve_ilp
from aotgrad.partition.mincut import partition_min_cut
from test_partition_correctness import CASES
from test_partition_support import check_partition_matches_eager, trace_joint

BUDGETS = [i / 10 for i in range(11)]
SOLVERS = ["dp", "greedy"] + (["ilp"] if ilp_available() else [])


def _block(x: torch.Tensor, wqkv: torch.Tensor, wo: torch.Tensor, w1: torch.Tensor,
           w2: torch.Tensor) -> tuple[torch.Tensor]:
    """A small transformer block: plenty of matmuls and reductions to trade."""
    h = torch.nn.functional.layer_norm(x, (32,))
    q, k, v = (h @ wqkv).split(32, dim=-1)
    att = torch.softmax(q @ k.transpose(-2, -1) / 5.0, dim=-1) @ v
    x = x + att @ wo
    h = torch.nn.functional.layer_norm(x, (32,))
    x = x + torch.nn.functional.gelu(h @ w1) @ w2
    return (x.pow(2).mean(),)


def _block_inputs() -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [
        torch.randn(2, 12, 32, requires_grad=True),
        torch.randn(32, 96, requires_grad=True) / 6,
        torch.randn(32, 32, requires_grad=True) / 6,
        torch.randn(32, 128, requires_grad=True) / 6,
        torch.randn(128, 32, requires_grad=True) / 11,
    ]


@pytest.fixture(scope="module")
def block_planner() -> BudgetPlanner:
    joint, nfwd = trace_joint(_block, _block_inputs())
    return BudgetPlanner(analyze(joint, nfwd), get_estimator("flops"))


@pytest.mark.parametrize("solver", SOLVERS)
def test_budgets_are_respected_and_monotone(block_planner: BudgetPlanner, solver: str) -> None:
    planner = block_planner
    assert planner.max_bytes > planner.min_bytes
    previous = -1
    for budget in BUDGETS:
        _, point = planner.point(budget, solver)
        assert point.saved_bytes <= point.target_bytes + 1e-9, (budget, point)
        assert point.saved_bytes >= previous, f"saved bytes fell when the budget grew: {budget}"
        previous = point.saved_bytes
    # less memory costs more recompute
    low = planner.point(0.0, solver)[1].recompute_time
    high = planner.point(1.0, solver)[1].recompute_time
    assert low > high


def test_extremes(block_planner: BudgetPlanner) -> None:
    planner = block_planner
    min_cut = partition_min_cut(planner.info)
    one, _ = planner.point(1.0, "dp")
    assert set(one.saved) == set(min_cut.saved)
    zero, point = planner.point(0.0, "dp")
    # full recomputation: no random op here, so only primals (and views of them, such as a
    # weight's transpose, which live in the primal's storage) are saved
    assert point.saved_bytes == 0
    assert all(storage_root(n).op == "placeholder" for n in zero.saved)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("budget", [0.0, 0.4, 0.8])
def test_block_matches_eager_at_every_budget(solver: str, budget: float) -> None:
    config = PartitionConfig(activation_memory_budget=budget, solver=solver)
    check_partition_matches_eager("memory_budget", _block, _block_inputs(), config)


def test_partitioner_output_respects_budget_through_the_public_api() -> None:
    joint, nfwd = trace_joint(_block, _block_inputs())
    partition = get_partitioner("memory_budget")
    one = saved_bytes(partition(joint, num_fwd_outputs=nfwd,
                                config=PartitionConfig(activation_memory_budget=1.0))[0], nfwd)
    half = saved_bytes(partition(joint, num_fwd_outputs=nfwd,
                                 config=PartitionConfig(activation_memory_budget=0.5))[0], nfwd)
    mc = saved_bytes(get_partitioner("min_cut")(joint, num_fwd_outputs=nfwd,
                                                config=PartitionConfig())[0], nfwd)
    assert one == mc
    assert half <= 0.5 * one


def test_random_values_are_saved_even_at_budget_zero() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor]:
        h = torch.nn.functional.dropout(torch.relu(x @ w), p=0.3, training=True)
        return ((h @ w).sum(),)

    joint, nfwd = trace_joint(fn, [torch.randn(8, 8, requires_grad=True),
                                   torch.randn(8, 8, requires_grad=True)])
    fw, bw = get_partitioner("memory_budget")(
        joint, num_fwd_outputs=nfwd, config=PartitionConfig(activation_memory_budget=0.0))
    assert saved_bytes(fw, nfwd) > 0  # the dropout mask (or the random values)
    for node in bw.graph.nodes:
        if node.op == "call_function":
            assert torch.Tag.nondeterministic_seeded not in node.target.tags


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_budget_never_exceeded_on_every_case(case_name: str) -> None:
    torch.manual_seed(0)
    fn, inputs = CASES[case_name]()
    joint, nfwd = trace_joint(fn, inputs)
    planner = BudgetPlanner(analyze(joint, nfwd), get_estimator("testing"))
    for budget in (0.0, 0.3, 0.7, 1.0):
        for solver in SOLVERS:
            partition, point = planner.point(budget, solver)
            assert saved_bytes(partition.fw, nfwd) == point.saved_bytes <= point.target_bytes


# ------------------------------------------------------------------------------ solvers


def _brute_force(weights: list[float], values: list[float], capacity: float) -> float:
    best = 0.0
    for r in range(len(weights) + 1):
        for subset in itertools.combinations(range(len(weights)), r):
            if sum(weights[i] for i in subset) <= capacity:
                best = max(best, sum(values[i] for i in subset))
    return best


def _random_problems(count: int, integral: bool) -> list[tuple[list[float], list[float], float]]:
    rng = random.Random(1234 if integral else 4321)
    problems = []
    for _ in range(count):
        n = rng.randint(0, 8)
        if integral:
            weights = [float(rng.randint(0, 30)) for _ in range(n)]
            capacity = float(rng.randint(0, 80))
        else:
            weights = [rng.uniform(1e5, 5e6) for _ in range(n)]
            capacity = rng.uniform(0, 1.2e7)
        values = [rng.uniform(0.0, 10.0) for _ in range(n)]
        problems.append((weights, values, capacity))
    return problems


@pytest.mark.parametrize("solver", [solve_dp, solve_ilp], ids=["dp", "ilp"])
def test_exact_solvers_match_brute_force(solver: object) -> None:
    if solver is solve_ilp and not ilp_available():
        pytest.skip("scipy is not installed")
    for weights, values, capacity in _random_problems(200, integral=True):
        chosen = solver(weights, values, capacity)  # type: ignore[operator]
        assert sum(weights[i] for i in chosen) <= capacity
        assert sum(values[i] for i in chosen) == pytest.approx(
            _brute_force(weights, values, capacity))


def test_dp_on_byte_sized_weights_is_feasible_and_near_optimal() -> None:
    for weights, values, capacity in _random_problems(100, integral=False):
        chosen = solve_dp(weights, values, capacity)
        assert sum(weights[i] for i in chosen) <= capacity
        best = _brute_force(weights, values, capacity)
        got = sum(values[i] for i in chosen)
        # discretization rounds weights up by at most capacity/4000 each
        assert got >= best - max(values, default=0.0) - 1e-9
        if ilp_available():
            assert sum(values[i] for i in solve_ilp(weights, values, capacity)) == (
                pytest.approx(best))


def test_greedy_is_feasible_and_optimal_when_density_order_is() -> None:
    for weights, values, capacity in _random_problems(200, integral=True):
        chosen = solve_greedy(weights, values, capacity)
        assert sum(weights[i] for i in chosen) <= capacity
        assert sum(values[i] for i in chosen) <= _brute_force(weights, values, capacity) + 1e-9
    # equal weights: taking the most valuable first is optimal
    rng = random.Random(7)
    for _ in range(50):
        values = [rng.uniform(0, 5) for _ in range(6)]
        weights = [3.0] * 6
        capacity = float(rng.randint(0, 20))
        chosen = solve_greedy(weights, values, capacity)
        assert sum(values[i] for i in chosen) == pytest.approx(
            _brute_force(weights, values, capacity))


def test_solvers_agree_on_a_tiny_problem() -> None:
    weights, values, capacity = [4.0, 3.0, 2.0, 1.0], [5.0, 4.0, 3.0, 1.0], 6.0
    assert solve_dp(weights, values, capacity) == [1, 2, 3] or solve_dp(
        weights, values, capacity) == [0, 2]
    best = _brute_force(weights, values, capacity)
    for solver in [solve_dp, solve_greedy] + ([solve_ilp] if ilp_available() else []):
        assert sum(values[i] for i in solver(weights, values, capacity)) == best


def test_ilp_without_scipy_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    with pytest.raises(RuntimeError, match="needs scipy"):
        solve_ilp([1.0], [1.0], 1.0)


# --------------------------------------------------------------------------- estimators


def _mm_joint() -> torch.fx.GraphModule:
    joint, _ = trace_joint(lambda a, b: ((a @ b).relu(),),
                           [torch.randn(8, 16, requires_grad=True), torch.randn(16, 4)])
    return joint


def test_flop_counts_and_estimators() -> None:
    joint = _mm_joint()
    mm = next(n for n in joint.graph.nodes if n.target == torch.ops.aten.mm.default)
    relu = next(n for n in joint.graph.nodes if n.target == torch.ops.aten.relu.default)
    assert count_flops(mm) == 2 * 8 * 16 * 4
    assert count_flops(relu) == 0
    flops = get_estimator("flops")
    assert flops(mm) > 0 and flops(relu) > 0  # relu pays its memory traffic
    assert estimate.testing_estimate(mm) == estimate.testing_estimate(relu) == 1.0
    profile = get_estimator("profile")
    first = profile(mm)
    assert first > 0
    assert profile(mm) == first  # cached per op and shapes
    with pytest.raises(ValueError, match="unknown runtime estimator"):
        get_estimator("oracle")


# ---------------------------------------------------------------------------------- svg


def test_pareto_svg_is_written_and_parses(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "pareto.svg"
    joint, nfwd = trace_joint(_block, _block_inputs())
    config = PartitionConfig(activation_memory_budget=0.5, pareto_svg=str(path))
    get_partitioner("memory_budget")(joint, num_fwd_outputs=nfwd, config=config)
    root = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    circles = [c for c in root.findall(f"{ns}circle") if c.get("id") != "chosen"]
    assert len(circles) == 21  # budgets 0, 0.05, ..., 1
    titles = [c.find(f"{ns}title").text for c in circles]  # type: ignore[union-attr]
    assert titles[0].startswith("budget 0.00") and titles[-1].startswith("budget 1.00")
    assert root.find(f"{ns}polyline") is not None
    # the chosen budget is marked, with the saved bytes of the forward graph returned
    chosen = root.find(f"{ns}circle[@id='chosen']")
    assert chosen is not None and float(chosen.get("data-budget", "nan")) == 0.5
    fw, _ = get_partitioner("memory_budget")(
        joint, num_fwd_outputs=nfwd, config=PartitionConfig(activation_memory_budget=0.5))
    assert int(chosen.get("data-saved-bytes", "-1")) == saved_bytes(fw, nfwd)
    assert "chosen: budget 0.50" in "".join(t.text or "" for t in root.findall(f"{ns}text"))


# ------------------------------------------------------------------------------ options


def test_options_are_validated() -> None:
    with pytest.raises(ValueError, match="activation_memory_budget"):
        PartitionConfig(activation_memory_budget=1.5)
    with pytest.raises(ValueError, match="solver"):
        PartitionConfig(solver="simplex")
    with pytest.raises(ValueError, match="estimator"):
        PartitionConfig(estimator="guess")
    with pytest.raises(ValueError, match="unknown partitioner"):
        get_partitioner("magic")
