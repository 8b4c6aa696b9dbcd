"""RMSNorm's CPU float32 path (one `F.rms_norm`) equals the written-out arithmetic bit for bit, in
both conventions (Gemma: x_norm * (1 + w); Llama: w * x_norm), on decode rows, prefill chunks and
per-head q/k norms, on one and two threads."""

from __future__ import annotations

import pytest
import torch

from engine.model.layers import RMSNorm


def _written_out(norm: RMSNorm, x: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + norm.eps)
    if norm.gemma:
        return (xf * (1.0 + norm.weight.float())).type_as(x)
    return norm.weight * xf.to(x.dtype)


@pytest.mark.parametrize("gemma", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_fused_cpu_rms_norm_equals_the_written_out_arithmetic(gemma, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(3)
        for shape in [(1, 640), (7, 640), (300, 640), (1, 4, 256), (16, 1, 256)]:
            norm = RMSNorm(shape[-1], 1e-6, gemma)
            norm.weight.data = torch.randn(shape[-1], generator=gen) * 0.5 + (0.0 if gemma else 1.0)
            norm.prepare()
            x = torch.randn(*shape, generator=gen) * 4
            assert torch.equal(norm(x), _written_out(norm, x)), shape
    finally:
        torch.set_num_threads(before)
