"""A user's function with a plain `assert` (test_api_errors).

It lives outside the test module because pytest rewrites the asserts of test modules into
calls of its own reporting hooks; a user's code runs plain `assert` statements.
"""

from __future__ import annotations

import torch


def checked(x: torch.Tensor) -> torch.Tensor:
    """x.cos() of a 3-row tensor; AssertionError naming the row count otherwise."""
    assert x.shape[0] == 3, f"need 3 rows, got {x.shape[0]}"
    return x.cos()
