"""The fake value an FX node carries, read the same way by the graph walk and the rules.

Below every other lowering module: `context`, `common` and `extern` all read it.
"""

from __future__ import annotations

from typing import Any

import torch.fx


def example_value(node: torch.fx.Node) -> Any:
    """The node's fake value: capture's `example_value`, else the tracer's `val`."""
    if "example_value" in node.meta:
        return node.meta["example_value"]
    return node.meta.get("val")
