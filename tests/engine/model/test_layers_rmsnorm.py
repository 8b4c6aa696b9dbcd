"""RMSNorm's CPU float32 path (one `F.rms_norm`) equals the written-out arithmetic bit for bit, in
both conventions (Gemma: x_norm * (1 + w); Llama: w * x_norm), on decode rows, prefill chunks and
per-head q/k norms, on one and two threads; where the C kernels are built (longdoc_kernels/cpu) a
decode step's norms are theirs, float32-close."""

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
def test_fused_cpu_rms_norm_equals_the_written_out_arithmetic(monkeypatch, gemma, threads):
    from engine.model import layers

    monkeypatch.setattr(layers, "_cpu_kernels", lambda: None)  # the torch path (the C kernel: below)
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


@pytest.mark.parametrize("gemma", [True, False])
def test_c_kernel_rms_norm_is_float32_close(monkeypatch, gemma):
    """Where longdoc_kernels/cpu is built, a decode step's norms are one C call: the same float32
    arithmetic up to the order of the sum of squares; a prefill chunk's (more than
    _KERNEL_NORM_MAX values) stays on torch's, bit for bit."""
    from engine.model import layers
    from longdoc_kernels import cpu

    if cpu.lib() is None:
        pytest.skip(f"C kernels not built here: {cpu.status()}")
    calls = []
    real = cpu.rms_norm
    monkeypatch.setattr(cpu, "rms_norm", lambda x, w, eps: calls.append(x.shape) or real(x, w, eps))
    gen = torch.Generator().manual_seed(4)
    for shape in [(1, 640), (7, 640), (1, 4, 256), (300, 640)]:
        norm = RMSNorm(shape[-1], 1e-6, gemma)
        norm.weight.data = torch.randn(shape[-1], generator=gen) * 0.5 + (0.0 if gemma else 1.0)
        norm.prepare()
        x = torch.randn(*shape, generator=gen) * 4
        calls.clear()
        if x.numel() > layers._KERNEL_NORM_MAX:
            assert torch.equal(norm(x), _written_out(norm, x)), shape
            assert not calls  # torch's path
        else:
            torch.testing.assert_close(norm(x), _written_out(norm, x), rtol=2e-6, atol=2e-6)
            assert calls == [x.shape]  # the C kernel's, not torch's
