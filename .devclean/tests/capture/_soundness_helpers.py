"""Another module for tests/capture/test_soundness_state.py: globals, objects and functions
that the tested programs read from outside their own module."""

from __future__ import annotations

import torch.nn.functional as F

SCALE = 2.0
LIMIT = 3


class Config:
    def __init__(self) -> None:
        self.scale = 3.0


cfg = Config()


class Mode:
    factor = 2.0


def scaled(x):
    return x * SCALE


def uses_cfg(x):
    return x * cfg.scale


def uses_mode(x):
    return x * Mode.factor


def activation(x):
    return F.gelu(x)


def clipped(x):
    return x.clamp(max=LIMIT)


def two_step(x):
    return scaled(x) + 1
