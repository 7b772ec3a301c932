"""Differential probes, issue 11 groups 1, 5 and 7 (session 13): aliasing through views,
slices, `.data` and `as_strided`; tensor facts the program reads (contiguity, dtype, leaf-ness,
`_version`, sizes in bytes); in-place ops on leaves and views with autograd; `out=` and
`resize_`; grad modes as decorators and leaking out of the function; RNG streams, generators
and seeds between calls; `retain_grad` and double backward.

Runs through `_probe_runner.py` (every backend, several calls); as a script it prints
OK/BAD per probe, and `--torch` gives torch.compile's answers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from _probe_runner import Probe, T, compare, grads, main, probe_test, registry

PROBES, probe = registry()


# ------------------------------------------------------------------ aliasing through views


@probe
def overlapping_slices_as_two_inputs() -> Probe:
    base = T(6)

    def f(a, b):
        a.add_(1.0)
        return b * 2

    return Probe(f, [lambda fn: fn(base[0:3], base[1:4]), lambda fn: fn(base[0:3], base[3:6]),
                     lambda fn: fn(base[2:5], base[0:3]), lambda fn: fn(T(3), base[0:3])],
                 lambda: base)


@probe
def data_attribute_mutated_inside() -> Probe:
    def f(x):
        d = x.data
        d.mul_(2.0)
        return x + 1, d is x, d.requires_grad

    w = T(3, grad=True)
    return Probe(f, [lambda fn: fn(w), lambda fn: fn(w), lambda fn: fn(T(3))], lambda: w)


@probe
def as_strided_read_of_inputs() -> Probe:
    def f(x):
        v = x.as_strided((2, 2), (1, 2))
        return v.sum(1)

    base = T(8)
    return Probe(f, [lambda fn: fn(base), lambda fn: fn(base[2:]), lambda fn: fn(base[1::2]),
                     lambda fn: fn(T(4, 2).t())])


@probe
def as_strided_written_inside() -> Probe:
    def f(x):
        x.as_strided((2,), (2,), 1).add_(10.0)
        return x * 1

    base = T(8)
    return Probe(f, [lambda fn: fn(base[0:4]), lambda fn: fn(base[2:6]), lambda fn: fn(T(5))],
                 lambda: base)


@probe
def input_and_its_transpose() -> Probe:
    x = T(3, 3)

    def f(a, b):
        c = a + b
        a.mul_(2.0)
        return c + b

    return Probe(f, [lambda fn: fn(x, x.t()), lambda fn: fn(x, T(3, 3, seed=1)),
                     lambda fn: fn(x, x.t())], lambda: x)


@probe
def unsqueezed_view_mutated() -> Probe:
    def f(x):
        v = x.unsqueeze(0)
        v.mul_(3.0)
        return x.sum(), v.shape

    x = T(4)
    return Probe(f, [lambda fn: fn(x), lambda fn: fn(x), lambda fn: fn(T(2, 2))], lambda: x)


@probe
def outputs_alias_each_other() -> Probe:
    def f(x):
        y = x * 2
        return y, y[0], y.view(-1)

    def step(fn):
        a, b, c = fn(T(2, 3))
        b.add_(100.0)
        return a, c, c.data_ptr() == a.data_ptr()

    return Probe(f, [step, step])


@probe
def input_returned_as_itself_and_view() -> Probe:
    def f(x):
        return x, x.view_as(x), x[1:]

    def step(fn):
        x = T(4)
        a, b, c = fn(x)
        c.fill_(7.0)
        return a is x, b is x, b.data_ptr() == x.data_ptr(), x

    return Probe(f, [step, step])


@probe
def detached_output_shares_memory() -> Probe:
    def f(x):
        return x.detach(), x * 2

    def step(fn):
        x = T(3, grad=True) * 1.0
        d, y = fn(x)
        d[0] = 50.0
        return d.requires_grad, y.requires_grad, x.detach().clone(), d._is_view()

    return Probe(f, [step, step])


@probe
def expanded_input_written_raises() -> Probe:
    def f(x):
        x.add_(1.0)
        return x

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(1).expand(3)),
                     lambda fn: fn(T(3, seed=2))])


@probe
def overlapping_copy_inside() -> Probe:
    def f(x):
        x[1:].copy_(x[:-1])
        return x

    return Probe(f, [lambda fn: fn(T(5)), lambda fn: fn(T(5, seed=1))])


@probe
def overlapping_slice_assignment_of_clone() -> Probe:
    def f(x):
        x[1:] = x[:-1].clone()
        return x * 1

    return Probe(f, [lambda fn: fn(T(5)), lambda fn: fn(T(5, seed=1))])


@probe
def view_chain_written_through_base_later() -> Probe:
    def f(x):
        v = x.view(2, 3)[:, 1]
        x.zero_()
        return v + 1

    return Probe(f, [lambda fn: fn(T(6)), lambda fn: fn(T(6, seed=1))])


# ------------------------------------------------------------------ tensor facts


@probe
def dtype_dispatch_in_python() -> Probe:
    def f(x):
        if x.dtype == torch.float64:
            return x * 2
        if x.is_floating_point():
            return x + 1
        return x - 1

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3).double()),
                     lambda fn: fn(torch.arange(3)), lambda fn: fn(T(3).half())])


@probe
def channels_last_facts() -> Probe:
    def f(x):
        return (x.is_contiguous(), x.is_contiguous(memory_format=torch.channels_last),
                x.stride(), x * 2)

    return Probe(f, [lambda fn: fn(T(2, 3, 4, 4)),
                     lambda fn: fn(T(2, 3, 4, 4).to(memory_format=torch.channels_last)),
                     lambda fn: fn(T(2, 3, 4, 4))])


@probe
def stride_branch() -> Probe:
    def f(x):
        if x.stride(0) == 1:
            return x.t().contiguous() * 2
        return x * 3

    return Probe(f, [lambda fn: fn(T(3, 4)), lambda fn: fn(T(4, 3).t()),
                     lambda fn: fn(T(3, 4, seed=2))])


@probe
def version_bumped_inside() -> Probe:
    def f(x):
        v0 = x._version
        x.add_(1.0)
        x.mul_(2.0)
        return x._version - v0, x * 1

    x = T(3)
    return Probe(f, [lambda fn: fn(x), lambda fn: fn(x), lambda fn: fn(T(3))])


@probe
def leaf_and_grad_fn_facts() -> Probe:
    def f(x):
        return x.is_leaf, x.grad_fn is None, x.requires_grad, (x * 2).is_leaf

    return Probe(f, [lambda fn: fn(T(3, grad=True)), lambda fn: fn(T(3, grad=True) * 2),
                     lambda fn: fn(T(3)), lambda fn: fn(T(3, grad=True)[1:])])


@probe
def byte_sizes_read() -> Probe:
    def f(x):
        return x.numel(), x.element_size(), x.nbytes, x.itemsize, x.dim(), x.ndim

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(2, 3).double()),
                     lambda fn: fn(torch.zeros(4, dtype=torch.int8))])


@probe
def device_and_layout_facts() -> Probe:
    def f(x):
        return x.device.type, x.is_cpu, x.layout == torch.strided, x.is_sparse, str(x.device)

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3).to_sparse())])


@probe
def storage_shared_check() -> Probe:
    def f(a, b):
        same = a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        return same, a + b

    x = T(6)
    return Probe(f, [lambda fn: fn(x[:3], x[3:]), lambda fn: fn(x[:3], T(3)),
                     lambda fn: fn(x[3:], x[:3])])


@probe
def contiguous_is_self() -> Probe:
    def f(x):
        c = x.contiguous()
        return c is x, c.data_ptr() == x.data_ptr(), c * 2

    return Probe(f, [lambda fn: fn(T(3, 4)), lambda fn: fn(T(4, 3).t()),
                     lambda fn: fn(T(3, 4, seed=1))])


# ------------------------------------------------------------------ out= and resize_


@probe
def out_into_empty_tensor() -> Probe:
    def f(a, b, o):
        torch.add(a, b, out=o)
        return o * 2

    def step(fn):
        o = torch.empty(0)
        r = fn(T(3), T(3, seed=1), o)
        return r, o

    return Probe(f, [step, step])


@probe
def out_into_a_view_of_an_input() -> Probe:
    def f(a, o):
        torch.mul(a, 2.0, out=o[1])
        return o.sum()

    o = torch.zeros(3, 4)
    return Probe(f, [lambda fn: fn(T(4), o), lambda fn: fn(T(4, seed=1), o)], lambda: o)


@probe
def resize_of_an_input() -> Probe:
    def f(x):
        x.resize_(2, 2)
        return x.shape, x[0] * 1

    return Probe(f, [lambda fn: fn(T(4)), lambda fn: fn(T(6)), lambda fn: fn(T(2, 2))])


@probe
def resize_of_a_local_then_filled() -> Probe:
    def f(x):
        y = torch.empty(0)
        y.resize_(x.shape[0])
        y.copy_(x)
        return y * 2

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(5))])


# ------------------------------------------------------------------ in-place with autograd


@probe
def in_place_on_leaf_raises() -> Probe:
    def f(x):
        x.add_(1.0)
        return x

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3, grad=True)),
                     lambda fn: fn(T(3, seed=1))])


@probe
def sigmoid_in_place_on_non_leaf() -> Probe:
    leaf = T(4, grad=True)

    def f(x):
        x.sigmoid_()
        return (x * x).sum()

    def step(fn):
        leaf.grad = None
        out = fn(leaf * 2.0)
        out.backward()
        return out, grads(leaf)

    return Probe(f, [step, step])


@probe
def weight_init_under_no_grad_inside() -> Probe:
    w = T(4, grad=True)

    def f(x):
        with torch.no_grad():
            w[0] = 0.0
            w.mul_(0.5)
        return (w * x).sum()

    def step(fn):
        w.grad = None
        out = fn(T(4, seed=1))
        out.backward()
        return out, grads(w)

    return Probe(f, [step, step], lambda: w)


@probe
def requires_grad_set_inside_on_input() -> Probe:
    def f(x):
        x.requires_grad_()
        return (x * x).sum()

    def step(fn):
        x = T(3)
        out = fn(x)
        out.backward()
        return out, x.grad

    return Probe(f, [step, step])


@probe
def new_leaf_with_backward_inside() -> Probe:
    def f(x):
        y = torch.zeros(3, requires_grad=True)
        z = ((y + 1) * x).sum()
        z.backward()
        return y.grad, z.detach()

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3, seed=1))])


@probe
def detach_in_place_of_an_input() -> Probe:
    def f(x):
        x.detach_()
        return x * 2

    def step(fn):
        x = T(3, grad=True) * 1.0
        out = fn(x)
        return out, x.requires_grad, x.grad_fn is None

    return Probe(f, [step, step])


@probe
def retain_grad_on_intermediate() -> Probe:
    def f(x):
        y = x * 2
        y.retain_grad()
        z = (y ** 2).sum()
        return z, y

    def step(fn):
        x = T(3, grad=True)
        z, y = fn(x)
        z.backward()
        return z, y.grad, x.grad

    return Probe(f, [step, step])


@probe
def double_backward_through_create_graph() -> Probe:
    def f(x):
        y = (x ** 3).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        return g.sum()

    def step(fn):
        x = T(3, grad=True)
        out = fn(x)
        out.backward()
        return out, x.grad

    return Probe(f, [step, step])


@probe
def in_place_on_a_view_of_a_leaf_clone() -> Probe:
    leaf = T(2, 3, grad=True)

    def f(x):
        y = x.clone()
        y[:, 0].mul_(4.0)
        y.t_()
        return y.sum(0)

    def step(fn):
        leaf.grad = None
        out = fn(leaf)
        out.sum().backward()
        return out, grads(leaf)

    return Probe(f, [step, step])


# ------------------------------------------------------------------ grad modes


@torch.no_grad()
def _f_no_grad_decorated(x):
    return x * 2, torch.is_grad_enabled()


@probe
def compiled_function_decorated_no_grad() -> Probe:
    return Probe(_f_no_grad_decorated, [lambda fn: fn(T(3, grad=True)),
                                        lambda fn: fn(T(3, seed=1, grad=True))])


@torch.enable_grad()
def _enable_grad_helper(x):
    return x * 3


@probe
def enable_grad_decorated_helper_under_no_grad() -> Probe:
    def f(x):
        y = _enable_grad_helper(x)
        return y, y.requires_grad, torch.is_grad_enabled()

    def no_grad(fn):
        with torch.no_grad():
            return fn(T(3, grad=True))

    return Probe(f, [no_grad, lambda fn: fn(T(3, grad=True)), no_grad])


@probe
def set_grad_enabled_leaks_across_a_break() -> Probe:
    def f(x):
        torch.set_grad_enabled(False)
        print("off")
        return x * 2

    def step(fn):
        torch.set_grad_enabled(True)
        return fn(T(3, grad=True))

    return Probe(f, [step, step])


@probe
def inference_mode_decorated_helper() -> Probe:
    @torch.inference_mode()
    def helper(x):
        return x + 1

    def f(x):
        y = helper(x)
        return y * 2, y.is_inference()

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3, seed=1))])


@probe
def inference_tensor_as_input() -> Probe:
    def f(x):
        return x * 2, x.is_inference()

    def inf(fn):
        with torch.inference_mode():
            x = T(3) + 0
        return fn(x)

    return Probe(f, [lambda fn: fn(T(3)), inf, lambda fn: fn(T(3, seed=1))])


# ------------------------------------------------------------------ RNG


@probe
def rand_with_manual_seed_between_calls() -> Probe:
    def f(x):
        return x + torch.rand(3)

    def seeded(fn):
        torch.manual_seed(5)
        return fn(T(3))

    return Probe(f, [seeded, seeded, lambda fn: fn(T(3))], lambda: torch.get_rng_state())


@probe
def manual_seed_inside() -> Probe:
    def f(x):
        torch.manual_seed(7)
        return x + torch.randn(3)

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3, seed=1))],
                 lambda: torch.rand(2))


@probe
def generator_argument() -> Probe:
    g = torch.Generator().manual_seed(3)

    def f(x, gen):
        return x + torch.rand(3, generator=gen)

    def other(fn):
        return fn(T(3), torch.Generator().manual_seed(9))

    return Probe(f, [lambda fn: fn(T(3), g), lambda fn: fn(T(3), g), other],
                 lambda: g.get_state())


@probe
def normal_in_place_on_input() -> Probe:
    def f(x):
        x.normal_()
        return x * 2

    def seeded(fn):
        torch.manual_seed(11)
        return fn(T(3))

    return Probe(f, [seeded, seeded, lambda fn: fn(T(3))], lambda: torch.get_rng_state())


@probe
def dropout_in_training_seeded() -> Probe:
    def f(x):
        return F.dropout(x, 0.5, training=True)

    def seeded(fn):
        torch.manual_seed(2)
        return fn(torch.ones(64))

    return Probe(f, [seeded, seeded], lambda: torch.get_rng_state())


@probe
def bernoulli_in_place_seeded() -> Probe:
    def f(x):
        return x.bernoulli_(0.3).sum()

    def seeded(fn):
        torch.manual_seed(4)
        return fn(torch.empty(32))

    return Probe(f, [seeded, seeded], lambda: torch.get_rng_state())


@probe
def randint_used_as_python_int() -> Probe:
    def f(x):
        k = int(torch.randint(0, 3, ()))
        return x[k] * 2, k

    def seeded(fn):
        torch.manual_seed(1)
        return fn(T(3))

    return Probe(f, [seeded, lambda fn: fn(T(3)), seeded])


#: Probes whose values come from the RNG stream: inductor's generated counter-based RNG
#: (its default, like torch.compile's) draws other numbers than eager's generator; with the
#: option fallback_random it runs random ops through ATen and agrees with eager.
RNG_STREAM = [rand_with_manual_seed_between_calls, manual_seed_inside,
              dropout_in_training_seeded, bernoulli_in_place_seeded]


def _known(make: Callable[[], Probe], backend: str) -> str | None:
    if backend == "inductor" and make in RNG_STREAM:
        return "inductor's counter-based RNG (default) is not eager's stream"
    return None


test_probe = probe_test(PROBES, _known)


@pytest.mark.parametrize("make", RNG_STREAM, ids=[p.__name__ for p in RNG_STREAM])
def test_rng_probe_with_fallback_random(make: Callable[[], Probe]) -> None:
    """With fallback_random, inductor's random ops draw eager's numbers from eager's stream."""
    import compiler

    compiler.reset()
    difference = compare(make, lambda fn: compiler.compile(
        fn, backend="inductor", options={"fallback_random": True}))
    assert difference is None, difference


if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:]))
