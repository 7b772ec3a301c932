"""Golden test: the generated guard function for a small tree, printed.

Update the expectation with `EXPECTTEST_ACCEPT=1 hatch run test tests/guards/test_guards_codegen.py`.
"""

from __future__ import annotations

import expecttest
import pytest
import torch
from guards import (
    EqualsMatch,
    GlobalStateMatch,
    GuardBuilder,
    LengthMatch,
    LocalSource,
    ParamSource,
    SizeSource,
    SubmoduleSource,
    TensorMatch,
    TypeMatch,
    compile_guard,
    parse_relation,
)
from guards.native import load_native, native_status


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(2)])


def small_tree() -> GuardBuilder:
    model = Block()
    me = LocalSource("self")
    x = LocalSource("x")
    b = GuardBuilder()
    b.add_global(GlobalStateMatch(grad_enabled=True, default_dtype=torch.float32,
                                  deterministic=False, autocast=(("cpu", False, torch.bfloat16),)))
    b.add(me, TypeMatch(Block))
    layers = SubmoduleSource(me, "layers")
    b.add(layers, LengthMatch(2))
    for i in range(2):
        weight = ParamSource(SubmoduleSource(layers, str(i)), "weight")
        b.add(weight, TensorMatch.from_tensor(model.layers[i].weight, dispatch_keys=False))
    b.add(x, TensorMatch.from_tensor(torch.randn(8, 4), dynamic_dims={0}, dispatch_keys=False))
    b.bind_symbol("s0", SizeSource(x, 0))
    b.add_relation(parse_relation("s0 % 8 == 0"))
    b.add(LocalSource("mode"), EqualsMatch(("train", 2, None)))
    return b


class TestGuardCodegen(expecttest.TestCase):
    def test_generated_source(self) -> None:
        tree = small_tree().build()
        self.assertExpectedInline(compile_guard(tree, native=False).source, """\
def make(grad_enabled0, default_dtype1, dtype2, deterministic3, autocast_enabled4, autocast_dtype5, any_autocast6, cls7, cls8, layout9, shape10, cls11):
    def guard(L, G):
        try:
            if not (
                (grad_enabled0() is True) and
                (default_dtype1() is dtype2) and
                (deterministic3() is False) and
                (any_autocast6() is False or (autocast_enabled4('cpu') is False))
            ):
                return False
            v0 = L['self']  # L['self']
            if not (type(v0) is cls7):
                return False
            v1 = v0._modules['layers']  # L['self'].layers
            if not (len(v1) == 2):
                return False
            v2 = v1._modules['0']  # L['self'].layers[0]
            v3 = v2._parameters['weight']  # L['self'].layers[0].weight
            if not (type(v3) is cls8 and v3.dtype is dtype2 and v3.is_cpu and v3.requires_grad is True and v3.layout is layout9 and v3.shape == shape10 and v3.is_contiguous()):
                return False
            v4 = v1._modules['1']  # L['self'].layers[1]
            v5 = v4._parameters['weight']  # L['self'].layers[1].weight
            if not (type(v5) is cls8 and v5.dtype is dtype2 and v5.is_cpu and v5.requires_grad is True and v5.layout is layout9 and v5.shape == shape10 and v5.is_contiguous()):
                return False
            v6 = L['x']  # L['x']
            sizes7 = v6.shape
            if not (type(v6) is cls11 and v6.dtype is dtype2 and v6.is_cpu and v6.requires_grad is False and v6.layout is layout9 and len(sizes7) == 2 and sizes7[1] == 4 and (0 in sizes7 or ((sizes7[0] == 1 or v6.stride(0) == 4) and v6.stride(1) == 1))):
                return False
            v8 = v6.shape[0]  # L['x'].shape[0]
            sym_s0 = v8
            if not (
                (type(sym_s0) is int) and
                ((sym_s0 % 8) == 0)
            ):
                return False
            v9 = L['mode']  # L['mode']
            if not ((type(v9) is tuple and len(v9) == 3 and (type(v9[0]) is str and v9[0] == 'train') and (type(v9[1]) is int and v9[1] == 2) and v9[2] is None)):
                return False
            return True
        except Exception:
            return False
    return guard
""")

    def test_generated_source_native(self) -> None:
        if load_native(wait=True) is None:
            pytest.skip(f"native checker not built here: {native_status()}")
        tree = small_tree().build()
        guard = compile_guard(tree, native=True)
        assert guard.native
        self.assertExpectedInline(guard.source, """\
def make(cls0, native1):
    def guard(L, G):
        try:
            v0 = L['self']  # L['self']
            if not (type(v0) is cls0):
                return False
            v1 = v0._modules['layers']  # L['self'].layers
            if not (len(v1) == 2):
                return False
            v2 = v1._modules['0']  # L['self'].layers[0]
            v3 = v2._parameters['weight']  # L['self'].layers[0].weight
            v4 = v1._modules['1']  # L['self'].layers[1]
            v5 = v4._parameters['weight']  # L['self'].layers[1].weight
            v6 = L['x']  # L['x']
            v7 = v6.shape[0]  # L['x'].shape[0]
            sym_s0 = v7
            if not (
                (type(sym_s0) is int) and
                ((sym_s0 % 8) == 0)
            ):
                return False
            v8 = L['mode']  # L['mode']
            if not ((type(v8) is tuple and len(v8) == 3 and (type(v8[0]) is str and v8[0] == 'train') and (type(v8[1]) is int and v8[1] == 2) and v8[2] is None)):
                return False
            # native: global state: grad_enabled=True default_dtype=torch.float32 deterministic=False autocast=cpu:off:torch.bfloat16
            # native: v3: tensor L['self'].layers[0].weight: torch.nn.parameter.Parameter torch.float32 cpu requires_grad=True shape=(4, 4) strides=(4, 1)
            # native: v5: tensor L['self'].layers[1].weight: torch.nn.parameter.Parameter torch.float32 cpu requires_grad=True shape=(4, 4) strides=(4, 1)
            # native: v6: tensor L['x']: torch.Tensor torch.float32 cpu requires_grad=False shape=(?, 4) strides=(4, 1)
            return native1(v3, v5, v6)
        except Exception:
            return False
    return guard
""")

    def test_tree_render(self) -> None:
        tree = small_tree().build()
        self.assertExpectedInline(tree.render(), """\
global state: grad_enabled=True default_dtype=torch.float32 deterministic=False autocast=cpu:off:torch.bfloat16
L['self']
  | type(L['self']) is test_guards_codegen.Block
  L['self'].layers
    | len(L['self'].layers) == 2
    L['self'].layers[0]
      L['self'].layers[0].weight
        | tensor L['self'].layers[0].weight: torch.nn.parameter.Parameter torch.float32 cpu requires_grad=True shape=(4, 4) strides=(4, 1)
    L['self'].layers[1]
      L['self'].layers[1].weight
        | tensor L['self'].layers[1].weight: torch.nn.parameter.Parameter torch.float32 cpu requires_grad=True shape=(4, 4) strides=(4, 1)
L['x']
  | tensor L['x']: torch.Tensor torch.float32 cpu requires_grad=False shape=(?, 4) strides=(4, 1)
  L['x'].shape[0]
    | s0 = L['x'].shape[0]
    | assert (s0 % 8) == 0
L['mode']
  | L['mode'] == ('train', 2, None)""")
