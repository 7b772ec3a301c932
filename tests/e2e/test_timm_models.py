"""timm models (resnet18, mobilenetv3_small_100, vit_tiny_patch16_224; random weights, no
downloads): inference and a training step compile with fullgraph=True and the eager backend
into exactly one graph, outputs and gradients equal to eager.

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
