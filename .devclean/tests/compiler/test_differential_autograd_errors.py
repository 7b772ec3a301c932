"""Differential probes, issue 11 groups 5-8: autograd and global state, errors eager raises,
errors at the API edge.

Runs through `_probe_runner.py` (every backend, several calls); as a script it prints
OK/BAD per probe, and `--torch` gives torch.compile's answers.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F
from _probe_runner import Probe, T, grads, main, probe_test, registry
from torch import nn

PROBES, probe = registry()


# ------------------------------------------------------------ 5. autograd and global state


@probe
def default_dtype_changed_between_calls() -> Probe:
    saved = torch.get_default_dtype()

    def f(x):
        return torch.ones(3) * 2 + x.sum(), torch.zeros(2).dtype

    def double(fn):
        torch.set_default_dtype(torch.float64)
        return fn(T(3))

    def back(fn):
        torch.set_default_dtype(torch.float32)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), double, back],
                 cleanup=lambda: torch.set_default_dtype(saved))


@torch.no_grad()
def _no_grad_helper(x):
    return x * 2


@probe
def no_grad_decorated_helper() -> Probe:
    w = T(3, grad=True)

    def f(x):
        return _no_grad_helper(x * w) + w

    def step(fn):
        out = fn(T(3, seed=1))
        out.sum().backward()
        return out, grads(w)

    return Probe(f, [step, step], lambda: grads(w))


@probe
def inference_mode_inside() -> Probe:
    def f(x):
        with torch.inference_mode():
            y = x * 2
        return y, y.is_inference(), torch.is_inference_mode_enabled()

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3, seed=1))])


@probe
def requires_grad_false_on_leaf_input() -> Probe:
    w = T(3, grad=True)

    def f(x):
        x.requires_grad_(False)
        return x * 2

    def again(fn):
        w.requires_grad_(True)
        return fn(w)

    return Probe(f, [lambda fn: fn(w), again], lambda: w.requires_grad)


@probe
def data_mutation_on_leaf() -> Probe:
    w = T(3, grad=True)

    def f(x):
        w.data.mul_(2.0)
        return (x * w).sum()

    def step(fn):
        out = fn(T(3, seed=1))
        out.backward()
        return out, grads(w)

    return Probe(f, [step, step, step], lambda: (w, grads(w)))


@probe
def autograd_grad_inside() -> Probe:
    def f(x):
        y = (x ** 3).sum()
        (g,) = torch.autograd.grad(y, x)
        return g * 2

    return Probe(f, [lambda fn: fn(T(3, grad=True)), lambda fn: fn(T(3, seed=1, grad=True))])


@probe
def in_place_on_view_of_non_leaf_input() -> Probe:
    leaf = T(4, grad=True)

    def f(x):
        x[1:3].mul_(5.0)
        return x * 2

    def step(fn):
        leaf.grad = None
        x = leaf * 1.0
        out = fn(x)
        out.sum().backward()
        return out, x, grads(leaf)

    return Probe(f, [step, step])


@probe
def grad_mode_read_with_caller_toggling() -> Probe:
    def f(x):
        return x * 2, torch.is_grad_enabled()

    def no_grad(fn):
        with torch.no_grad():
            return fn(T(3, grad=True))

    return Probe(f, [lambda fn: fn(T(3, grad=True)), no_grad, lambda fn: fn(T(3, grad=True))])


@probe
def deterministic_flag_toggled() -> Probe:
    saved = torch.are_deterministic_algorithms_enabled()

    def f(x):
        return x + 1 if torch.are_deterministic_algorithms_enabled() else x - 1

    def on(fn):
        torch.use_deterministic_algorithms(True)
        return fn(T(3))

    def off(fn):
        torch.use_deterministic_algorithms(False)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), on, off],
                 cleanup=lambda: torch.use_deterministic_algorithms(saved))


@probe
def autocast_by_the_caller() -> Probe:
    w = T(4, 4, seed=3)

    def f(x):
        return x @ w

    def cast(fn):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return fn(T(2, 4))

    return Probe(f, [lambda fn: fn(T(2, 4)), cast, lambda fn: fn(T(2, 4))])


@probe
def autocast_inside_switched_by_argument() -> Probe:
    w = T(4, 4, seed=3)

    def f(x, on):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=on):
            y = x @ w
        return y, y.dtype

    return Probe(f, [lambda fn: fn(T(2, 4), False), lambda fn: fn(T(2, 4), True),
                     lambda fn: fn(T(2, 4), False)])


@probe
def backward_inside_the_function() -> Probe:
    w = T(3, grad=True)

    def f(x):
        loss = (x * w).sum()
        loss.backward()
        return loss.detach()

    return Probe(f, [lambda fn: fn(T(3, seed=1)), lambda fn: fn(T(3, seed=2))],
                 lambda: grads(w))


@probe
def grad_reset_inside_the_function() -> Probe:
    w = T(3, grad=True)

    def f(x):
        if w.grad is not None:
            w.grad.zero_()
        return (x * w).sum()

    def step(fn):
        out = fn(T(3, seed=1))
        out.backward()
        return out

    return Probe(f, [step, step, step], lambda: grads(w))


@probe
def parameter_requires_grad_toggled() -> Probe:
    torch.manual_seed(0)
    m = nn.Linear(3, 2)

    def f(x):
        return m(x)

    def freeze(fn):
        m.weight.requires_grad_(False)
        m.bias.requires_grad_(False)
        return fn(T(1, 3))

    def unfreeze(fn):
        m.weight.requires_grad_(True)
        return fn(T(1, 3))

    return Probe(f, [lambda fn: fn(T(1, 3)), freeze, unfreeze])


@probe
def nested_grad_modes() -> Probe:
    def f(x):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
            c = x * 4
        return a.requires_grad, b.requires_grad, c.requires_grad, a + b + c

    return Probe(f, [lambda fn: fn(T(3, grad=True)), lambda fn: fn(T(3)),
                     lambda fn: fn(T(3, grad=True))])


@probe
def set_grad_enabled_by_argument() -> Probe:
    def f(x, mode):
        with torch.set_grad_enabled(mode):
            y = x * 2
        return y, y.requires_grad

    return Probe(f, [lambda fn: fn(T(3, grad=True), True), lambda fn: fn(T(3, grad=True), False),
                     lambda fn: fn(T(3, grad=True), True)])


@probe
def detached_new_leaf_returned() -> Probe:
    def f(x):
        y = (x * 2).detach().requires_grad_()
        return y, y.is_leaf, y.grad_fn is None

    return Probe(f, [lambda fn: fn(T(3, grad=True)), lambda fn: fn(T(3))])


@probe
def in_place_on_leaf_under_no_grad_caller() -> Probe:
    w = T(3, grad=True)

    def f(x):
        w.add_(x)
        return w * 2

    def step(fn):
        with torch.no_grad():
            return fn(T(3, seed=1))

    return Probe(f, [step, step], lambda: w)


@probe
def output_view_mutated_by_the_caller() -> Probe:
    x = T(2, 3)

    def f(t):
        return t.unsqueeze(0), t.view(-1)

    def step(fn):
        a, b = fn(x)
        a.mul_(2.0)
        b[0] = 100.0
        return x.clone(), a.data_ptr() == x.data_ptr()

    return Probe(f, [step, step])


@probe
def clone_and_in_place_gradient() -> Probe:
    def f(x):
        y = x.clone()
        y.mul_(2.0)
        y[0] = 0.0
        return y.sum() * x.sum()

    def step(fn):
        x = T(3, grad=True)
        out = fn(x)
        out.backward()
        return out, x.grad

    return Probe(f, [step, step])


@probe
def tensor_hook_inside() -> Probe:
    def f(x):
        y = x * 2
        y.register_hook(lambda g: g * 10)
        return y.sum()

    def step(fn):
        x = T(3, grad=True)
        fn(x).backward()
        return x.grad

    return Probe(f, [step, step])


@probe
def grad_fn_of_intermediate_by_caller_mode() -> Probe:
    def f(x):
        y = x * 2
        return y, y.grad_fn is None

    def no_grad(fn):
        with torch.no_grad():
            return fn(T(3, grad=True))

    return Probe(f, [lambda fn: fn(T(3, grad=True)), no_grad, lambda fn: fn(T(3, grad=True))])


@probe
def out_argument_into_an_input() -> Probe:
    buf = torch.zeros(3)

    def f(a, b, out):
        torch.add(a, b, out=out)
        return out * 2

    return Probe(f, [lambda fn: fn(T(3), T(3, seed=1), buf),
                     lambda fn: fn(T(3, seed=2), T(3, seed=3), buf)], lambda: buf)


@probe
def rng_state_restored_inside() -> Probe:
    def f(x):
        state = torch.get_rng_state()
        torch.randn(5)
        torch.set_rng_state(state)
        return x + 1

    def step(fn):
        out = fn(T(3))
        return out, torch.randn(3)

    return Probe(f, [step, step])


# ------------------------------------------------------------------ 6. errors eager raises


@probe
def int_remainder_by_zero() -> Probe:
    def f(a, b):
        return a % b

    one = torch.tensor([5, 7])
    return Probe(f, [lambda fn: fn(one, torch.tensor([2, 3])),
                     lambda fn: fn(one, torch.tensor([2, 0])),
                     lambda fn: fn(one, torch.tensor([4, 3]))])


@probe
def int_floor_division_by_zero() -> Probe:
    def f(a, b):
        return a // b + 1

    return Probe(f, [lambda fn: fn(torch.tensor([6, 9]), torch.tensor([2, 3])),
                     lambda fn: fn(torch.tensor([6, 9]), torch.tensor([0, 3]))])


@probe
def gather_index_out_of_range() -> Probe:
    def f(x, idx):
        return torch.gather(x, 1, idx) * 2

    x = T(2, 3)
    return Probe(f, [lambda fn: fn(x, torch.tensor([[0], [2]])),
                     lambda fn: fn(x, torch.tensor([[0], [3]])),
                     lambda fn: fn(x, torch.tensor([[1], [1]]))])


@probe
def embedding_index_out_of_range() -> Probe:
    w = T(4, 2)

    def f(idx):
        return F.embedding(idx, w) + 1

    return Probe(f, [lambda fn: fn(torch.tensor([0, 3])), lambda fn: fn(torch.tensor([4])),
                     lambda fn: fn(torch.tensor([1]))])


@probe
def negative_index_out_of_range() -> Probe:
    def f(x, idx):
        return x[idx] * 2

    x = T(4)
    return Probe(f, [lambda fn: fn(x, torch.tensor([-1, 0])),
                     lambda fn: fn(x, torch.tensor([-5])),
                     lambda fn: fn(x, torch.tensor([-4]))])


@probe
def scatter_add_index_out_of_range() -> Probe:
    def f(x, idx):
        return torch.zeros(3).scatter_add(0, idx, x)

    return Probe(f, [lambda fn: fn(T(2), torch.tensor([0, 2])),
                     lambda fn: fn(T(2), torch.tensor([0, 3]))])


@probe
def argmax_of_empty() -> Probe:
    def f(x):
        return x.argmax() + 1

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(torch.empty(0)), lambda fn: fn(T(4))])


@probe
def cat_shape_mismatch() -> Probe:
    def f(a, b):
        return torch.cat([a, b], dim=0) * 2

    return Probe(f, [lambda fn: fn(T(2, 3), T(1, 3)), lambda fn: fn(T(2, 3), T(1, 4)),
                     lambda fn: fn(T(2, 3), T(2, 3))])


@probe
def int_negative_power() -> Probe:
    def f(x, p):
        return x ** p

    return Probe(f, [lambda fn: fn(torch.tensor([2, 3]), 2), lambda fn: fn(torch.tensor([2, 3]), -2),
                     lambda fn: fn(torch.tensor([2, 3]), 3)])


@probe
def cross_entropy_target_out_of_range() -> Probe:
    def f(logits, target):
        return F.cross_entropy(logits, target)

    return Probe(f, [lambda fn: fn(T(2, 3), torch.tensor([0, 2])),
                     lambda fn: fn(T(2, 3), torch.tensor([0, 3])),
                     lambda fn: fn(T(2, 3), torch.tensor([1, 1]))])


@probe
def one_hot_too_few_classes() -> Probe:
    def f(idx):
        return F.one_hot(idx, 3).float() * 2

    return Probe(f, [lambda fn: fn(torch.tensor([0, 2])), lambda fn: fn(torch.tensor([3])),
                     lambda fn: fn(torch.tensor([1]))])


@probe
def item_of_many_elements() -> Probe:
    def f(x):
        return x * x.item()

    return Probe(f, [lambda fn: fn(T(1)), lambda fn: fn(T(2)), lambda fn: fn(T(1, seed=2))])


@probe
def view_of_incompatible_size() -> Probe:
    def f(x, n):
        return x.view(n, -1) + 1

    return Probe(f, [lambda fn: fn(T(6), 2), lambda fn: fn(T(6), 4), lambda fn: fn(T(6), 3)])


@probe
def index_put_out_of_range() -> Probe:
    def f(x, idx):
        y = x.clone()
        y[idx] = 0.0
        return y

    return Probe(f, [lambda fn: fn(T(4), torch.tensor([1])), lambda fn: fn(T(4), torch.tensor([9])),
                     lambda fn: fn(T(4), torch.tensor([3]))])


@probe
def arange_with_negative_length() -> Probe:
    def f(x, n):
        return x.sum() + torch.arange(0, n).sum()

    return Probe(f, [lambda fn: fn(T(3), 4), lambda fn: fn(T(3), -2), lambda fn: fn(T(3), 5)])


# ------------------------------------------------------------------ 7, 8. messages, API edge


@probe
def wrong_number_of_arguments() -> Probe:
    def f(x, y):
        return x + y

    return Probe(f, [lambda fn: fn(T(3), T(3)), lambda fn: fn(T(3)),
                     lambda fn: fn(T(3), T(3), T(3)), lambda fn: fn(T(3), T(3))])


@probe
def unexpected_keyword() -> Probe:
    def f(x, *, scale=1.0):
        return x * scale

    return Probe(f, [lambda fn: fn(T(3), scale=2.0), lambda fn: fn(T(3), scal=2.0),
                     lambda fn: fn(T(3))])


@probe
def positional_only_by_keyword() -> Probe:
    def f(x, /, y):
        return x - y

    return Probe(f, [lambda fn: fn(T(3), T(3)), lambda fn: fn(x=T(3), y=T(3)),
                     lambda fn: fn(T(3), y=T(3))])


@probe
def matmul_shape_mismatch() -> Probe:
    def f(a, b):
        return a @ b + 1

    return Probe(f, [lambda fn: fn(T(2, 3), T(3, 2)), lambda fn: fn(T(2, 3), T(2, 3)),
                     lambda fn: fn(T(2, 3), T(3, 4))])


@probe
def user_exception_with_state_before() -> Probe:
    log: list[int] = []

    def f(x, n):
        log.append(n)
        if n > 1:
            raise ValueError(f"n={n}")
        return x * n

    return Probe(f, [lambda fn: fn(T(3), 1), lambda fn: fn(T(3), 2), lambda fn: fn(T(3), 0)],
                 lambda: list(log))


@probe
def assert_on_tensor_value() -> Probe:
    def f(x):
        assert (x > -10).all(), "too small"
        return x * 2

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3) - 100), lambda fn: fn(T(3))])


@probe
def dropout_eval_and_p_zero() -> Probe:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))

    def f(x):
        return m(x), F.dropout(x, 0.0, training=True)

    def evaluate(fn):
        m.eval()
        return fn(T(2, 3))

    return Probe(f, [evaluate, evaluate])


@probe
def detach_in_place_on_intermediate() -> Probe:
    def f(x):
        y = x * 2
        y.detach_()
        return y, y.requires_grad, y.is_leaf

    return Probe(f, [lambda fn: fn(T(3, grad=True)), lambda fn: fn(T(3, grad=True))])


test_probe = probe_test(PROBES)


if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:]))
