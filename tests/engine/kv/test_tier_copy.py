"""engine/kv/tier_copy.py: block copies between device pools and host memory. The CPU path is
synchronous; the CUDA path (side stream, events) is checked by the gpu-marked tests: a gather's
host copy holds the blocks as they were when it was issued even when the compute stream
overwrites them right after, and a write is visible to the compute stream's next kernel."""

from __future__ import annotations

import pytest
import torch

from engine.kv.tier_copy import TierCopier


def test_gather_scatter_write_roundtrip_on_cpu():
    gen = torch.Generator().manual_seed(0)
    k = torch.randn(2, 10, 4, 3, generator=gen)  # [layers, blocks, ...] as the pools are
    v = torch.randn(2, 10, 4, 3, generator=gen)
    c = TierCopier("cpu")
    assert not c.asynchronous
    hk, hv = c.gather([k, v], 1, [7, 2, 5])
    torch.testing.assert_close(hk, k[:, [7, 2, 5]], atol=0, rtol=0)
    torch.testing.assert_close(hv, v[:, [7, 2, 5]], atol=0, rtol=0)
    k[:, 7] = 0.0  # the host copy is a copy, not a view
    assert hk[:, 0].abs().sum() > 0
    k2, v2 = torch.zeros_like(k), torch.zeros_like(v)
    c.scatter([k2, v2], 1, [1, 3, 9], [hk, hv])
    torch.testing.assert_close(k2[:, [1, 3, 9]], hk, atol=0, rtol=0)
    assert k2[:, [0, 2, 4, 5, 6, 7, 8]].abs().sum() == 0
    c.write([(k2[:, 0], hv[:, 0]), (v2[:, 0], hk[:, 1])])
    torch.testing.assert_close(k2[:, 0], hv[:, 0], atol=0, rtol=0)
    torch.testing.assert_close(v2[:, 0], hk[:, 1], atol=0, rtol=0)
    c.synchronize()
    assert c.stats.gathers == 1 and c.stats.writes == 2
    assert c.stats.bytes_to_host == 2 * hk.numel() * 4
    assert c.stats.bytes_to_device == 2 * hk.numel() * 4 + 2 * hv[:, 0].numel() * 4


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gather_survives_an_immediate_overwrite_and_writes_are_seen_on_cuda():
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    pool = torch.randn(4, 4096, 16, 8, 128, generator=gen, device=dev, dtype=torch.bfloat16)  # ~1 GiB
    ids = list(range(0, 4096, 3))
    before = pool[:, ids].cpu()
    c = TierCopier(dev)
    assert c.asynchronous
    (host,) = c.gather([pool], 1, ids)
    pool.fill_(7.0)  # the compute stream overwrites every block at once
    c.synchronize()
    torch.testing.assert_close(host, before, atol=0, rtol=0)
    assert host.is_pinned()
    target = torch.zeros_like(pool)
    c.scatter([target], 1, ids, [host])
    got = target[:, ids].clone()  # a compute-stream kernel reads the blocks right after the write
    torch.testing.assert_close(got.cpu(), before, atol=0, rtol=0)
    c.write([(target[:, 1], host[:, 0])])
    torch.testing.assert_close(target[:, 1].cpu(), before[:, 0], atol=0, rtol=0)
