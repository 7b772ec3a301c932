"""Channels-last activations through convolutions, compared with eager over several calls:
a user's channels-last input with pointwise work before and after a convolution (the value
before the convolution was stored contiguous where eager keeps it channels-last, and the
kernels after it read the convolution's contiguous output with channels-last strides: wrong
numbers), and graphs rewritten by `inductor.layout_opt` (run on the CPU here by naming it
among the pass's devices)."""

from __future__ import annotations

import compiler
import inductor.layout_opt
import inductor.pipeline
import pytest
import torch
import torch.nn.functional as F
from torch import nn

TARGETS = ["cpp", "triton"]


def _user_program(x: torch.Tensor, w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    y = F.conv2d(torch.relu(x * 2), w, padding=1)
    return torch.relu(y * s.view(1, -1, 1, 1)).sum(1)


@pytest.mark.parametrize("target", TARGETS)
def test_channels_last_input_through_a_convolution(target: str) -> None:
    if target == "triton":
        pytest.importorskip("triton")
    compiled = compiler.compile(_user_program, backend="inductor",
                                options={"cpu_backend": target})
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.randn(2, 4, 8, 8)
        if seed != 1:  # NOTE: the middle call is contiguous (a recompile), then back
            x = x.to(memory_format=torch.channels_last)
        w, s = torch.randn(8, 4, 3, 3), torch.randn(8)
        torch.testing.assert_close(compiled(x, w, s), _user_program(x, w, s),
                                   atol=1e-4, rtol=1e-4)


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(16)
        self.c3 = nn.Conv2d(16, 32, 1, bias=False)
        self.c4 = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(torch.relu(self.b1(self.c1(x))))
        z = torch.relu(self.b2(self.c2(y)) + y)
        z = self.c4(torch.relu(self.c3(z)))  # 4 convolutions, 2 conversions (in, z out)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(z, 1), 1)), z


@pytest.mark.parametrize("target", TARGETS)
def test_layout_pass_end_to_end(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if target == "triton":
        pytest.importorskip("triton")
    rewritten: list[object] = []

    def on_cpu(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        out = inductor.layout_opt.channels_last_convolutions(gm, devices=("cpu",))
        rewritten.append(out is not gm)
        return out

    monkeypatch.setattr(inductor.pipeline, "channels_last_convolutions", on_cpu)
    torch.manual_seed(0)
    net = _Net().eval()
    compiled = compiler.compile(net, backend="inductor", options={"cpu_backend": target})
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(2, 3, 32, 32)
            got, want = compiled(x), net(x)
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
            assert got[1].stride() == want[1].stride()  # the returned activation's layout
    assert rewritten == [True]
