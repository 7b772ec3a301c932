"""`copy.copy` / `copy.deepcopy` in traced code: containers and objects made while tracing
are copied symbolically; existing plain objects (configs) are deep-copied at capture with
their whole state guarded. Results and the originals after the call equal eager's."""

from __future__ import annotations

import copy

import capture
import pytest
import torch
from _differential import CountingBackend, t


class Config:
    def __init__(self):
        self.scale = 2.0
        self.layers = [1, 2, 3]
        self.names = {"a": 1, "b": 2}
        self.sub = SubConfig()


class SubConfig:
    def __init__(self):
        self.depth = 4


def compile_counting(fn, fullgraph=True):
    capture.reset()
    backend = CountingBackend()
    return capture.optimize(fn, backend=backend, fullgraph=fullgraph), backend


def copy_and_edit(x, cfg):
    mine = copy.deepcopy(cfg)
    mine.scale = 3.0
    mine.layers.append(4)
    mine.sub.depth = 1
    del mine.names
    return x * mine.scale + len(mine.layers) + mine.sub.depth + cfg.sub.depth


def test_deepcopy_of_a_config_is_private_and_leaves_the_original_alone():
    compiled, backend = compile_counting(copy_and_edit)
    cfg_e, cfg_c = Config(), Config()
    for _ in range(3):
        torch.testing.assert_close(compiled(t(3), cfg_c), copy_and_edit(t(3), cfg_e))
    assert vars(cfg_c.sub) == vars(cfg_e.sub) == {"depth": 4}
    assert cfg_c.layers == [1, 2, 3] and cfg_c.scale == 2.0 and hasattr(cfg_c, "names")
    assert backend.frame_count == 1


def test_a_change_to_the_copied_state_recompiles():
    compiled, backend = compile_counting(copy_and_edit)
    cfg = Config()
    compiled(t(3), cfg)
    cfg.sub.depth = 7
    torch.testing.assert_close(compiled(t(3), cfg), copy_and_edit(t(3), Config()) + 3)
    cfg.layers.append(9)
    expected = copy_and_edit(t(3), cfg)
    torch.testing.assert_close(compiled(t(3), cfg), expected)
    assert backend.frame_count == 3


def deepcopy_containers(x, opts):
    mine = copy.deepcopy(opts)
    mine["sizes"].append(len(mine["sizes"]))
    shallow = copy.copy(mine["sizes"])
    shallow.append(0)
    return x.sum() * sum(mine["sizes"]) + len(shallow), mine


def test_deepcopy_and_copy_of_containers():
    compiled, _ = compile_counting(deepcopy_containers)
    opts_e, opts_c = {"sizes": [1, 2]}, {"sizes": [1, 2]}
    got, expected = compiled(t(2), opts_c), deepcopy_containers(t(2), opts_e)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] and got[1] is not opts_c
    assert opts_c == opts_e == {"sizes": [1, 2]}


def returns_the_copy(x, cfg):
    mine = copy.deepcopy(cfg)
    return x + mine.scale, mine


def test_a_copy_that_leaves_the_frame_is_a_new_object_each_call():
    with pytest.raises(capture.Unsupported, match="leaves the frame"):
        compile_counting(returns_the_copy)[0](t(2), Config())
    compiled, _ = compile_counting(returns_the_copy, fullgraph=False)
    cfg = Config()
    first, second = compiled(t(2), cfg)[1], compiled(t(2), cfg)[1]
    assert first is not second and first is not cfg and vars(first.sub) == {"depth": 4}


def copies_a_tensor(x):
    return copy.deepcopy([x])[0] + 1


def test_deepcopy_of_a_tensor_is_refused_and_runs_eagerly():
    compiled, _ = compile_counting(copies_a_tensor, fullgraph=False)
    torch.testing.assert_close(compiled(t(3)), t(3) + 1)
    with pytest.raises(capture.Unsupported, match="deepcopy of a tensor"):
        compile_counting(copies_a_tensor)[0](t(3))


def copies_after_a_write(x, cfg):
    cfg.sub.depth = 10
    mine = copy.deepcopy(cfg)
    return x * mine.sub.depth


def test_deepcopy_after_a_traced_write_to_its_state_keeps_eager_results():
    compiled, _ = compile_counting(copies_after_a_write, fullgraph=False)
    cfg_e, cfg_c = Config(), Config()
    torch.testing.assert_close(compiled(t(2), cfg_c), copies_after_a_write(t(2), cfg_e))
    assert cfg_c.sub.depth == cfg_e.sub.depth == 10
