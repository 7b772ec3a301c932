"""timm models (resnet18, mobilenetv3_small_100, vit_tiny_patch16_224; random weights, no
downloads): inference and a training step compile with fullgraph=True and the eager backend
into exactly one graph, outputs and gradients equal to eager, with no more graphs than
torch.compile and at least 90% of its ops (counted in the same run).

timm needs torchvision, which only the `models` hatch env has: `hatch run models:test -m models`.
"""

from __future__ import annotations

import pytest
import torch

timm = pytest.importorskip("timm")

from _harness import check_inference, check_training_step

pytestmark = pytest.mark.models

MODELS = {
    "resnet18": 64,
    "mobilenetv3_small_100": 64,
    "vit_tiny_patch16_224": 224,
}
TOL = {"rtol": 1e-4, "atol": 1e-4}


def _model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False, num_classes=10)


def _images(size: int) -> torch.Tensor:
    return torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(2))


def _loss(out):
    return torch.nn.functional.cross_entropy(out, torch.tensor([1, 7]))


@pytest.mark.parametrize("via", ["capture", "compiler"])
@pytest.mark.parametrize("name", list(MODELS))
def test_timm_inference(name, via):
    check_inference(_model(name), {"x": _images(MODELS[name])}, via, **TOL)


@pytest.mark.parametrize("via", ["capture", "compiler"])
@pytest.mark.parametrize("name", list(MODELS))
def test_timm_training_step(name, via):
    check_training_step(_model(name), {"x": _images(MODELS[name])}, _loss, via, **TOL)


def _ops(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def _torch_compile_graphs(model: torch.nn.Module, images: torch.Tensor, training: bool,
                          ) -> list[torch.fx.GraphModule]:
    theirs: list[torch.fx.GraphModule] = []

    def count(gm, example_inputs):
        theirs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        compiled = torch.compile(model, backend=count)
        if training:
            model.train()
            _loss(compiled(images)).backward()
        else:
            model.eval()
            with torch.no_grad():
                compiled(images)
    finally:
        torch._dynamo.reset()
    return theirs


@pytest.mark.parametrize("mode", ["inference", "training"])
@pytest.mark.parametrize("name", list(MODELS))
def test_timm_captures_what_torch_compile_captures(name, mode):
    """No more graphs than torch.compile and at least 90% of its ops, counted in this run;
    outputs (and gradients, training) equal to eager."""
    images = _images(MODELS[name])
    if mode == "inference":
        ours = check_inference(_model(name), {"x": images}, "capture", calls=1, **TOL)
    else:
        ours = check_training_step(_model(name), {"x": images}, _loss, "capture", steps=1,
                                   **TOL)
    theirs = _torch_compile_graphs(_model(name), images, mode == "training")
    mine, total = sum(map(_ops, ours.graphs)), sum(map(_ops, theirs))
    print(f"{name} {mode}: capture {len(ours.graphs)} graph(s), {mine} ops; "
          f"torch.compile {len(theirs)} graph(s), {total} ops")
    assert len(ours.graphs) <= len(theirs)
    assert mine >= 0.9 * total, f"{mine} ops captured, torch.compile {total}"
