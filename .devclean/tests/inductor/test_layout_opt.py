"""The channels-last pass (`inductor.layout_opt`) on ATen graphs from aotgrad: the rewritten
graph computes what the original computes, its activations between convolutions are
channels-last, its outputs keep their strides, and it declines where conversions would not
pay. Run on the CPU by naming the CPU among the pass's devices (on the GPU it is cuDNN's)."""

from __future__ import annotations

from typing import Any

import aotgrad
import pytest
import torch
import torch.nn.functional as F
from inductor.decompositions import decomposition_table
from inductor.layout_opt import channels_last_backward_inputs, channels_last_convolutions
from tests_inductor_support import needs_compiler
from torch import fx


def _graph(fn: Any, *args: torch.Tensor) -> fx.GraphModule:
    graphs: list[fx.GraphModule] = []

    def keep(gm: fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm

    with torch.no_grad():
        aotgrad.aot_function(fn, keep, decompositions=decomposition_table())(*args)
    return graphs[0]


def _net(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor,
         s: torch.Tensor) -> torch.Tensor:
    y = F.relu(F.conv2d(x, w1, padding=1) * s.view(1, -1, 1, 1))
    z = F.relu(F.conv2d(y, w2, padding=1) + y)
    z = F.conv2d(z, w3, padding=1)
    return z.mean((2, 3))


def _args() -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    return (torch.randn(2, 4, 8, 8), torch.randn(8, 4, 3, 3), torch.randn(8, 8, 3, 3),
            torch.randn(8, 8, 3, 3), torch.randn(8))


def test_rewrite_matches_original_and_is_channels_last() -> None:
    args = _args()
    gm = _graph(_net, *args)
    new = channels_last_convolutions(gm, devices=("cpu",))
    assert new is not gm
    convs = [n for n in new.graph.nodes if n.target is torch.ops.aten.convolution.default]
    assert len(convs) == 3
    for conv in convs:
        assert conv.meta["example_value"].is_contiguous(memory_format=torch.channels_last)
    clones = [n for n in new.graph.nodes if n.target is torch.ops.aten.clone.default]
    assert len(clones) == 1  # into the first convolution only
    want, got = gm(*args), new(*args)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_outputs_keep_their_strides() -> None:
    def two(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor,
            s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = F.relu(F.conv2d(x, w1, padding=1))
        z = F.conv2d(F.conv2d(F.conv2d(y, w2, padding=1), w3, padding=1), w3, padding=1)
        return z, z.sum()  # 4 convolutions, 2 conversions (in, and z back)

    args = _args()
    gm = _graph(two, *args)
    new = channels_last_convolutions(gm, devices=("cpu",))
    assert new is not gm
    got, want = new(*args), gm(*args)
    assert got[0].stride() == want[0].stride()
    assert got[0].is_contiguous()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_declines_off_its_devices_and_when_conversions_do_not_pay() -> None:
    args = _args()
    gm = _graph(_net, *args)
    assert channels_last_convolutions(gm) is gm  # CPU tensors, CUDA-only by default

    def many_outputs(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                     w3: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = F.conv2d(x, w1, padding=1)
        b = F.conv2d(a, w2, padding=1)
        return a, b, F.conv2d(b, w3, padding=1)

    gm2 = _graph(many_outputs, *args)
    assert channels_last_convolutions(gm2, devices=("cpu",)) is gm2


# --------------------------------------------------------------------------- CPU training


def _train_net(x: torch.Tensor, w1: torch.Tensor, g1: torch.Tensor, b1: torch.Tensor,
               w2: torch.Tensor, g2: torch.Tensor, b2: torch.Tensor,
               wf: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = F.relu(F.batch_norm(F.conv2d(x, w1, padding=1), None, None, g1, b1, training=True))
    z = F.relu(F.batch_norm(F.conv2d(y, w2, stride=2, padding=1), None, None, g2, b2,
                            training=True))
    return F.linear(z.mean((2, 3)), wf).square().sum(), z  # z: a user-visible activation


def _train_args() -> list[torch.Tensor]:
    torch.manual_seed(0)
    shapes = [(2, 3, 16, 16), (16, 3, 3, 3), (16,), (16,), (16, 16, 3, 3), (16,), (16,),
              (4, 16)]
    return [torch.randn(s, requires_grad=True) for s in shapes]


def _saved_activations(fn: Any, args: list[torch.Tensor]) -> tuple[list[torch.Tensor], Any]:
    saved: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t,
                                                  lambda t: t):
        out = fn(*args)
    ids = {id(a) for a in args}
    return [t for t in saved if t.dim() == 4 and t.shape[0] == 2 and id(t) not in ids], out


def _copies_in_conv_backward(loss: torch.Tensor) -> list[list[int]]:
    """Shapes of the batch-sized tensors a convolution backward copied (oneDNN converting
    an activation whose layout disagrees with the others) during `loss.backward()`."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        loss.backward()
    shapes = []
    for event in prof.events():
        if event.name != "aten::copy_" or not event.input_shapes[0]:
            continue
        parent = event.cpu_parent
        while parent is not None and parent.name != "aten::convolution_backward":
            parent = parent.cpu_parent
        if parent is not None and event.input_shapes[0][0] == 2:
            shapes.append(event.input_shapes[0])
    return shapes


@pytest.mark.parametrize("target", ["cpp", "triton"])
def test_cpu_training_step_runs_channels_last(target: str) -> None:
    # A training forward aotgrad compiles (its saved values marked): on the CPU its
    # activations go channels-last, the saved ones stay so, the backward is compiled for
    # them and its convolutions copy no activation; outputs and gradients equal eager's.
    if target == "triton":
        pytest.importorskip("triton")
    from inductor.backend import make_compiler

    compile_graph = make_compiler({"cpu_backend": target})
    graphs: list[fx.GraphModule] = []

    def keep(gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        graphs.append(gm)
        return compile_graph(gm, example_inputs)

    compiled = aotgrad.aot_function(_train_net, keep, decompositions=decomposition_table())
    args = _train_args()
    want_loss, want_z = _train_net(*args)
    want_loss.backward()
    want = [a.grad.clone() for a in args]  # type: ignore[union-attr]
    compiled(*args)[0].backward()  # NOTE: compiles both graphs
    for a in args:
        a.grad = None
    saved, (loss, z) = _saved_activations(compiled, args)
    assert saved and all(t.is_contiguous(memory_format=torch.channels_last) for t in saved
                         if t.shape[1] == 16)
    assert z.stride() == want_z.stride()  # user-visible: eager's strides
    torch.testing.assert_close(loss, want_loss, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(z, want_z, atol=1e-4, rtol=1e-4)
    assert _copies_in_conv_backward(loss) == []
    for a, g in zip(args, want):
        assert a.grad is not None and a.grad.stride() == g.stride()
        torch.testing.assert_close(a.grad, g, atol=1e-4, rtol=1e-4)
    _fw_gm, bw_gm = graphs
    saved_inputs = [n.meta["example_value"] for n in bw_gm.graph.nodes
                    if n.op == "placeholder"]
    assert any(v.dim() == 4 and v.is_contiguous(memory_format=torch.channels_last)
               and not v.is_contiguous() for v in saved_inputs)


def test_training_forward_leaves_saved_outputs_channels_last() -> None:
    from aotgrad.saved_layout import SAVED_OUTPUTS_START

    def fwd(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> Any:
        y = F.relu(F.conv2d(x, w1, padding=1))
        z = F.relu(F.conv2d(y, w2, stride=2, padding=1))
        return z.sum(), y, z  # as a partitioned forward: a loss, then two saved values

    torch.manual_seed(0)
    args = (torch.randn(2, 3, 16, 16), torch.randn(16, 3, 3, 3), torch.randn(16, 16, 3, 3))
    gm = _graph(fwd, *args)
    assert channels_last_convolutions(gm) is gm  # inference on the CPU keeps its layout
    gm.meta[SAVED_OUTPUTS_START] = 1
    new = channels_last_convolutions(gm)
    assert new is not gm
    loss, y, z = new(*args)
    assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
    assert z.is_contiguous(memory_format=torch.channels_last)
    want = gm(*args)
    torch.testing.assert_close((loss, y, z), tuple(want), atol=1e-4, rtol=1e-4)
    gm.meta[SAVED_OUTPUTS_START] = 3  # all user-visible: restoring them would not pay
    assert channels_last_convolutions(gm) is gm


def test_a_training_forward_on_the_pass_devices_keeps_its_saved_values_channels_last() -> None:
    """As on the GPU (cuDNN): the saved values stay channels-last for the backward; restoring
    them to NCHW would be a conversion per saved value, and the pass would decline."""
    from aotgrad.saved_layout import SAVED_OUTPUTS_START

    def fwd(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor) -> Any:
        y = F.relu(F.conv2d(x, w1, padding=1))
        z = F.relu(F.conv2d(y, w2, padding=1))
        u = F.relu(F.conv2d(z, w3, padding=1))
        return u.sum(), y, z, u

    torch.manual_seed(0)
    args = (torch.randn(2, 3, 16, 16), torch.randn(16, 3, 3, 3), torch.randn(16, 16, 3, 3),
            torch.randn(16, 16, 3, 3))
    gm = _graph(fwd, *args)
    gm.meta[SAVED_OUTPUTS_START] = 1
    with torch.backends.mkldnn.flags(enabled=False):  # NOTE: not the CPU's oneDNN rule
        new = channels_last_convolutions(gm, devices=("cpu",))
    assert new is not gm
    loss, *saved = new(*args)
    assert all(v.is_contiguous(memory_format=torch.channels_last) and not v.is_contiguous()
               for v in saved)
    torch.testing.assert_close((loss, *saved), tuple(gm(*args)), atol=1e-4, rtol=1e-4)


def test_rewritten_training_forward_is_written_to_disk_and_read_back() -> None:
    # NOTE: the plan cache keys the graph the passes rewrote, not the one compiled: the
    # on-disk form is found by the compiled graph's own key.
    from aotgrad.saved_layout import SAVED_OUTPUTS_START
    from inductor.backend import make_compiler

    def fwd(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> Any:
        y = F.relu(F.conv2d(x, w1, padding=1))
        return F.conv2d(y, w2, stride=2, padding=1).sum(), y

    torch.manual_seed(0)
    args = (torch.randn(2, 3, 16, 16), torch.randn(16, 3, 3, 3), torch.randn(16, 16, 3, 3))
    gm = _graph(fwd, *args)
    gm.meta[SAVED_OUTPUTS_START] = 1
    compile_graph: Any = make_compiler({})
    compiled = compile_graph(gm, [n.meta["example_value"] for n in gm.graph.nodes
                                  if n.op == "placeholder"])
    assert compiled.output_strides is not None
    loaded = compile_graph.load_compiled(compile_graph.save_compiled(compiled, gm))
    got, want = loaded(*args), gm(*args)
    assert got[1].is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(tuple(got), tuple(want), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("budget", [0.5, 0.0])
def test_recomputed_convolutions_in_the_backward_run_channels_last(budget: float) -> None:
    # NOTE: at budget 0.5 the backward recomputes the first convolution from the NCHW input
    # while its convolution backwards get channels-last gradients (the saved activations
    # are); the recomputed one is made channels-last too, so no convolution backward copies
    # an activation (before: the recomputed activation and a gradient were copied). At
    # budget 0.0 nothing is saved and the backward recomputes every convolution: they run
    # channels-last too (before: all NCHW, oneDNN copying around each one).
    from inductor.backend import make_compiler

    compile_graph = make_compiler({})
    graphs: list[fx.GraphModule] = []

    def keep(gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        graphs.append(gm)
        return compile_graph(gm, example_inputs)

    args = _train_args()
    want_loss, _ = _train_net(*args)
    want_loss.backward()
    want = [a.grad.clone() for a in args]  # type: ignore[union-attr]
    for a in args:
        a.grad = None
    with aotgrad.config.patch(activation_memory_budget=budget, graph_cache=False):
        compiled = aotgrad.aot_function(_train_net, keep,
                                        decompositions=decomposition_table())
        compiled(*args)[0].backward()  # NOTE: compiles the backward (not profiled)
        for a in args:
            a.grad = None
        loss, _ = compiled(*args)
        copies = _copies_in_conv_backward(loss)
    # NOTE: the activations and gradients (16 channels); torch 2.11's oneDNN (3.10) also
    # copies the 3-channel graph input inside, whichever layout it has
    assert [shape for shape in copies if shape[1] == 16] == [], copies
    _fw_gm, bw_gm = graphs
    assert any(n.target is torch.ops.aten.convolution.default for n in bw_gm.graph.nodes)
    torch.testing.assert_close(loss, want_loss, atol=1e-4, rtol=1e-4)
    for a, g in zip(args, want):
        assert a.grad is not None and a.grad.stride() == g.stride()
        torch.testing.assert_close(a.grad, g, atol=1e-4, rtol=1e-4)


class _ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.b1 = torch.nn.BatchNorm2d(16)
        self.c2 = torch.nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.b2 = torch.nn.BatchNorm2d(16)
        self.c3 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        z = F.relu(self.b2(self.c2(y)))
        z = F.relu(self.c3(z) + z.repeat(1, 2, 1, 1))
        return self.fc(z.mean((2, 3)))


@needs_compiler
@pytest.mark.parametrize("target", ["cpp", "triton"])
@pytest.mark.parametrize("train_mode", [True, False], ids=["bn-train", "bn-eval"])
def test_training_steps_under_the_gpu_rule_match_eager(target: str, train_mode: bool,
                                                       monkeypatch: Any, caplog: Any) -> None:
    """The GPU's rule (saved values and weights channels-last) on the CPU: the pass told the
    CPU is its device, oneDNN's own rule off. Steps of a conv/batch-norm/max-pool net give eager's
    losses, gradients and running statistics."""
    import copy

    import compiler
    from inductor import pipeline

    if target == "triton":
        pytest.importorskip("triton")
    monkeypatch.setattr(pipeline, "channels_last_convolutions",
                        lambda gm: channels_last_convolutions(gm, devices=("cpu",),
                                                              weight_devices=("cpu",)))
    monkeypatch.setattr(pipeline, "channels_last_backward_inputs",
                        lambda gm: channels_last_backward_inputs(gm, devices=("cpu",)))
    torch.manual_seed(0)
    model = _ConvNet().train(train_mode)
    ref = copy.deepcopy(model)
    compiler.reset()
    compiled = compiler.compile(model, backend="inductor",
                                options={"cpu_backend": target} if target == "triton" else None)
    caplog.set_level("INFO", logger="inductor")
    with torch.backends.mkldnn.flags(enabled=False):
        for _ in range(2):
            x = torch.randn(4, 3, 16, 16)
            losses = []
            for m in (compiled, ref):
                for p in m.parameters():
                    p.grad = None
                loss = m(x).square().mean()
                loss.backward()
                losses.append(loss.detach())
            torch.testing.assert_close(losses[0], losses[1], atol=1e-4, rtol=1e-4)
            for p, q in zip(model.parameters(), ref.parameters()):
                torch.testing.assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-3)
            for b, c in zip(model.buffers(), ref.buffers()):
                torch.testing.assert_close(b, c)
    # NOTE: all three weights are 3x3 ones: converted once, saved so for the backward
    assert "channels-last activations around 3 convolutions (1 conversions, 3 weights)" \
        in caplog.text
    # NOTE: the first convolution's saved input is the NCHW image, its gradient channels-last
    assert "channels-last inputs for 1 convolution backwards" in caplog.text
    compiler.reset()


def test_weights_converted_once_and_saved_converted_for_the_backward() -> None:
    # NOTE: the GPU rule (cuDNN converts an NCHW weight inside each convolution given a
    # channels-last activation, forward and backward), run on the CPU by naming it: a 3x3
    # weight is converted in the graph, a 1x1 weight (channels-last already) is not, and a
    # training forward saves the converted weight in place of the parameter.
    from aotgrad.saved_layout import SAVED_OUTPUTS_START

    def fwd(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor) -> Any:
        y = F.relu(F.conv2d(x, w1, padding=1))
        z = F.relu(F.conv2d(y, w2, padding=1))
        u = F.conv2d(z, w3)
        return u.sum(), y, z  # a loss, then saved values

    torch.manual_seed(0)
    args = (torch.randn(2, 3, 16, 16), torch.randn(16, 3, 3, 3), torch.randn(16, 16, 3, 3),
            torch.randn(8, 16, 1, 1))
    gm = _graph(fwd, *args)
    # NOTE: as a partitioned forward saves them: the weights among the saved values
    output = next(n for n in gm.graph.nodes if n.op == "output")
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    loss_, y_, z_ = output.args[0]
    output.args = ((loss_, y_, ph[2], z_, ph[3]),)
    gm.recompile()
    gm.meta[SAVED_OUTPUTS_START] = 1
    with torch.backends.mkldnn.flags(enabled=False):  # NOTE: not the CPU's oneDNN rule
        plain = channels_last_convolutions(gm, devices=("cpu",))
        new = channels_last_convolutions(gm, devices=("cpu",), weight_devices=("cpu",))
    placeholders = [n for n in new.graph.nodes if n.op == "placeholder"]
    converted = [n.args[0] for n in new.graph.nodes if n.target is torch.ops.aten.clone.default
                 and n.args[0] in placeholders[1:]]
    assert converted == placeholders[1:3]  # the 3x3 weights, not the 1x1
    for conv in (n for n in new.graph.nodes if n.target is torch.ops.aten.convolution.default):
        assert conv.args[1].meta["example_value"].is_contiguous(memory_format=torch.channels_last)
    loss, y, w2, z, w3 = new(*args)
    assert w2.is_contiguous(memory_format=torch.channels_last) and not w2.is_contiguous()
    assert w3.is_contiguous()  # NOTE: 1x1: both layouts at once, kept as the parameter
    torch.testing.assert_close((loss, y, w2, z, w3), tuple(gm(*args)), atol=1e-4, rtol=1e-4)
    assert sum(n.target is torch.ops.aten.clone.default for n in plain.graph.nodes) == 1
