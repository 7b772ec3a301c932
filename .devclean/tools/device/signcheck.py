"""sign/sgn of a bfloat16 CUDA tensor through our inductor: mismatches against eager and the
generated kernel (the CUDA OpInfo run found 223 of 400 elements wrong by 2)."""

from __future__ import annotations

import logging
import sys

import compiler
import torch

logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(message)s")
logging.getLogger("inductor.output_code").setLevel(logging.DEBUG)
torch.manual_seed(0)
for dtype in (torch.bfloat16, torch.float16, torch.float32):
    x = torch.randn(20, 20, device="cuda").to(dtype)
    x[0, :3] = 0
    compiler.reset()
    y = compiler.compile(lambda t: torch.sign(t), backend="inductor")(x)
    bad = (y != torch.sign(x)).sum().item()
    print(f"{dtype}: {bad} of 400 differ; eager {torch.sign(x)[0, :6].tolist()} "
          f"ours {y[0, :6].tolist()} x {x[0, :6].tolist()}")
