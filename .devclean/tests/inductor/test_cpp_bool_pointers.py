"""The C++ target reads and writes bool buffers through uint8_t pointers: g++ leaves a loop
scalar that loads through a `bool*`, or stores through one beside a float store (a ReLU's
forward with its saved mask: one branch per element, 4.7x eager's time). Values are exact."""

from __future__ import annotations

import torch
from tests_inductor_support import run_and_compare


def test_relu_with_its_mask_uses_byte_pointers_and_matches_eager() -> None:
    x = torch.randn(64, 48)
    compiled = run_and_compare(lambda a: (a.relu(), a.relu() <= 0), [x])
    source = compiled.output_code()
    assert "bool* __restrict__" not in source
    assert "uint8_t* __restrict__" in source


def test_bool_inputs_and_outputs_through_byte_pointers() -> None:
    mask = torch.rand(33, 17) > 0.5
    other = torch.rand(33, 17) > 0.3
    x = torch.randn(33, 17)

    def fn(m: torch.Tensor, o: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.where(m, 0.0, a), m & ~o, (m ^ o).sum(1), m.any(0), a.masked_fill(o, 1.0))

    run_and_compare(fn, [mask, other, x])
