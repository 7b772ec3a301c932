"""The dispatch-key memo: correct answers, memoized from the second sighting, forgotten when
the tensor dies."""

from __future__ import annotations

import gc

import torch
from guards.dispatch_keys import keys_match, memo_for, raw_keys


def test_keys_match_and_memo_lifetime() -> None:
    t = torch.randn(3)
    expected = raw_keys(t)
    memo = memo_for(expected)
    assert keys_match(t, expected)
    assert id(t) not in memo  # one-shot tensors are not memoized
    assert keys_match(t, expected)
    assert id(t) in memo
    assert keys_match(t, expected)
    key = id(t)
    del t
    gc.collect()
    assert key not in memo
    with torch.inference_mode():
        inference = torch.randn(3)
    assert not keys_match(inference, expected)
    assert not keys_match(torch.randn(3, dtype=torch.complex64).conj(), expected)
