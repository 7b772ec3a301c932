"""Golden prints of functionalized ATen graphs (update with EXPECTTEST_ACCEPT=1)."""

from __future__ import annotations

import expecttest
import torch
from _aotgrad_checks import check_functionalized


def _code(gm: torch.fx.GraphModule) -> str:
    return "\n".join(line.rstrip() for line in gm.code.strip().splitlines() if line.strip())


class TestGoldenGraphs(expecttest.TestCase):
    def test_write_through_transposed_view(self) -> None:
        def fn(x: torch.Tensor) -> torch.Tensor:
            x.transpose(0, 1).add_(1)
            return x.sum()

        functional = check_functionalized(fn, torch.randn(2, 3))
        self.assertExpectedInline(_code(functional.gm), """\
def forward(self, arg0):
    transpose_int = torch.ops.aten.transpose.int(arg0, 0, 1);  arg0 = None
    add_tensor = torch.ops.aten.add.Tensor(transpose_int, 1);  transpose_int = None
    transpose_int_1 = torch.ops.aten.transpose.int(add_tensor, 0, 1);  add_tensor = None
    sum_default = torch.ops.aten.sum.default(transpose_int_1)
    return (transpose_int_1, sum_default)""")

    def test_setitem_on_column(self) -> None:
        def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            x[:, 0] = y
            return x * 2

        functional = check_functionalized(fn, torch.randn(3, 4), torch.randn(3))
        self.assertExpectedInline(_code(functional.gm), """\
def forward(self, arg0, arg1):
    select_int = torch.ops.aten.select.int(arg0, 1, 0)
    copy_default = torch.ops.aten.copy.default(select_int, arg1);  select_int = arg1 = None
    select_scatter_default = torch.ops.aten.select_scatter.default(arg0, copy_default, 1, 0);  arg0 = copy_default = None
    mul_tensor = torch.ops.aten.mul.Tensor(select_scatter_default, 2)
    return (select_scatter_default, mul_tensor)""")
