"""`torch.utils.checkpoint` in compiled code: the region is recomputed in the backward, not
saved. Saved activation bytes are counted with `torch.autograd.graph.saved_tensors_hooks`
(each storage once, the inputs and parameters excluded) and compared with the same program
without checkpoint; values and gradients equal eager's; graphs are counted against
torch.compile in the same run."""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable, Iterator

import compiler
import pytest
import torch
import torch.utils.checkpoint
from torch._subclasses.fake_tensor import FakeTensor

BACKENDS = ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]


def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x @ w)
    h = torch.sin(h) * h
    return torch.relu(h @ w) + 1


def plain(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return block(block(x, w), w).sum()


def checkpointed(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.utils.checkpoint.checkpoint(block, x, w, use_reentrant=False)
    y = torch.utils.checkpoint.checkpoint(block, y, w, use_reentrant=False)
    return y.sum()


def reentrant(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.utils.checkpoint.checkpoint(block, x, w, use_reentrant=True)
    return torch.utils.checkpoint.checkpoint(block, y, w, use_reentrant=True).sum()


def reentrant_by_default(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.utils.checkpoint.checkpoint(block, x, w).sum()


def one_region_then_more(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.utils.checkpoint.checkpoint(block, x, w, use_reentrant=False)
    return block(y, w).sum()


@contextlib.contextmanager
def counting_saved(excluded: list[torch.Tensor]) -> Iterator[list[int]]:
    """Bytes of the distinct storages autograd saves while the block runs (fake tensors of
    a first call's tracing and the storages of `excluded` not counted)."""
    skip = {t.untyped_storage().data_ptr() for t in excluded}
    seen: dict[int, int] = {}
    total = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        if not isinstance(t, FakeTensor):
            storage = t.untyped_storage()
            if storage.data_ptr() not in skip:
                seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield total
    total[0] = sum(seen.values())


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(64, 128, requires_grad=True)
    w = (torch.randn(128, 128) * 0.1).requires_grad_()
    return x, w


def step(fn: Callable[..., torch.Tensor], x: torch.Tensor, w: torch.Tensor,
         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(loss, x's gradient, w's gradient, saved activation bytes) of one training step."""
    x.grad = w.grad = None
    with counting_saved([x, w]) as saved, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NOTE: torch's warning for a missing use_reentrant
        loss = fn(x, w)
    loss.backward()
    assert x.grad is not None and w.grad is not None
    return loss.detach(), x.grad.clone(), w.grad.clone(), saved[0]


class Counting:
    def __init__(self, inner: str) -> None:
        self.graphs: list[torch.fx.GraphModule] = []
        self.inner = compiler.lookup_backend(inner)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> object:
        self.graphs.append(gm)
        return self.inner(gm, example_inputs)


def compiled_step(fn: Callable[..., torch.Tensor], backend: str,
                  ) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor, int], int]:
    """A compiled program's second training step (the first compiles) and its graph count,
    after checking the step against eager's."""
    compiler.reset()
    counting = Counting(backend)
    compiled = compiler.compile(fn, backend=counting)
    x, w = inputs()
    want = step(fn, x, w)
    step(compiled, x, w)
    got = step(compiled, x, w)
    for a, b in zip(got[:3], want[:3]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    return got, len(counting.graphs)


def torch_compile_graphs(fn: Callable[..., torch.Tensor]) -> int:
    torch._dynamo.reset()
    graphs: list[torch.fx.GraphModule] = []

    def count(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> object:
        graphs.append(gm)
        return gm.forward

    x, w = inputs()
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(fn, backend=count)(x, w).backward()
    torch._dynamo.reset()
    return len(graphs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpointed_regions_are_recomputed_not_saved(backend):
    without, _ = compiled_step(plain, backend)
    got, graphs = compiled_step(checkpointed, backend)
    eager = step(checkpointed, *inputs())
    # Each region saves only its inputs: x and w are inputs of the program (not counted),
    # the first region's output is the second region's input (64 x 128 floats), as in eager.
    assert got[3] == eager[3] == 64 * 128 * 4
    assert got[3] * 4 < without[3]
    assert graphs == 1 == torch_compile_graphs(checkpointed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_code_after_a_region_still_saves_its_activations(backend):
    got, graphs = compiled_step(one_region_then_more, backend)
    without, _ = compiled_step(plain, backend)
    assert 0 < got[3] < without[3]
    assert graphs == 1


@pytest.mark.parametrize("fn", [reentrant, reentrant_by_default])
def test_use_reentrant_true_is_traced_and_recomputed(fn):
    got, graphs = compiled_step(fn, "aot_eager")
    without, _ = compiled_step(plain if fn is reentrant else one_block, "aot_eager")
    assert got[3] * 4 < without[3]
    assert graphs == 1 == torch_compile_graphs(fn)


def one_block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return block(x, w).sum()


def test_use_reentrant_true_without_an_input_that_requires_grad_runs_eagerly():
    # The reentrant variant's outputs do not require grad when no tensor argument does
    # (its autograd.Function sees none), although w is used inside: eager's result has no
    # grad_fn and w gets no gradient. Tracing the body would give w a gradient: it runs
    # eagerly instead.
    lin = torch.nn.Linear(8, 8)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(lin, x, use_reentrant=True) * 2

    x = torch.randn(3, 8)
    compiler.reset()
    counting = Counting("aot_eager")
    got = compiler.compile(fn, backend=counting)(x)
    want = fn(x)
    torch.testing.assert_close(got, want)
    assert got.requires_grad is want.requires_grad is False
    assert len(counting.graphs) <= 1


def test_a_random_op_in_a_region_is_saved_and_gradients_match_eager():
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        def body(t: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.dropout(torch.tanh(t @ w), 0.5) * 3

        return torch.utils.checkpoint.checkpoint(body, x, use_reentrant=False).sum()

    compiler.reset()
    compiled = compiler.compile(fn, backend="aot_eager")
    x, w = inputs()
    torch.manual_seed(1)
    want = step(fn, x, w)
    torch.manual_seed(1)
    got = step(compiled, x, w)
    for a, b in zip(got[:3], want[:3]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(64)
        self.up = torch.nn.Linear(64, 256)
        self.down = torch.nn.Linear(256, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Stack(torch.nn.Module):
    def __init__(self, checkpointed: bool) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(3))
        self.checkpointed = checkpointed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            if self.checkpointed:
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return x.pow(2).mean()


def module_step(fn: Callable[[torch.Tensor], torch.Tensor], model: torch.nn.Module,
                x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], int]:
    model.zero_grad()
    with counting_saved([*model.parameters(), x]) as saved:
        loss = fn(x)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()], saved[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpointed_module_blocks_save_what_eager_checkpoint_saves(backend):
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(3)).requires_grad_()
    saved = {}
    for checkpointed in (False, True):
        torch.manual_seed(0)
        model = Stack(checkpointed)
        want = module_step(model, model, x)
        compiler.reset()
        compiled = compiler.compile(model, backend=backend)
        module_step(compiled, model, x)
        got = module_step(compiled, model, x)
        torch.testing.assert_close(got[0], want[0])
        for a, b in zip(got[1], want[1]):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
        saved[checkpointed] = (got[2], want[2])
    # each block saves only its input (32 x 64 floats): 3 of them, as eager checkpoint does
    assert saved[True] == (3 * 32 * 64 * 4, 3 * 32 * 64 * 4)
    assert saved[True][0] * 8 < saved[False][0]
