"""The decode kernel reads no block-table entry past a sequence's row, on the CPU through the
Triton interpreter.

The tables tensor is laid at the very end of a memory page whose next page is unreadable
(mprotect PROT_NONE), so a read past the last row faults. The interpreter reads memory through
the tensors' own addresses, as a GPU does: a kernel that strays past the tables kills the process
(SIGSEGV here, an illegal memory access on a GPU; that is how the warm-tier graph test failed on
the H100 and H200, 2026-12-05: splits of a short sequence past its last block ran an inverted
block range). Each case runs in a child process, so a fault fails the test instead of the run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

pytestmark = pytest.mark.skipif(torch.cuda.is_available() or not sys.platform.startswith("linux"),
                                reason="interpreter test of a Linux page guard")

CHILD = textwrap.dedent("""
    import ctypes, mmap, os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from longdoc_kernels import reference as ref
    from longdoc_kernels.paged_attention import paged_decode

    int8, splits, max_kv_len = sys.argv[1] == "1", int(sys.argv[2]), int(sys.argv[3])
    PAGE = mmap.PAGESIZE
    BS, KVH, D, H, WIDTH = 4, 1, 32, 4, 40
    g = torch.Generator().manual_seed(0)
    k, v = torch.randn(64, BS, KVH, D, generator=g), torch.randn(64, BS, KVH, D, generator=g)
    lens = [WIDTH * BS - 1, 6 * BS]  # the last row is short: most splits lie past its end
    rows = []
    for i, n in enumerate(lens):
        nb = (n + BS - 1) // BS
        r = [(i * 20 + j) % 64 for j in range(nb)]
        if int8:  # first and last two blocks hot, the middle warm (as the cache lays them out)
            r = r[:1] + [-(x % 64) - 2 for x in r[1:-2]] + r[-2:]
        rows.append(r + [-1] * (WIDTH - nb))
    values = torch.tensor(sum(rows, []), dtype=torch.int32)
    mm = mmap.mmap(-1, 2 * PAGE)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    tables = torch.frombuffer(mm, dtype=torch.int32, count=values.numel(), offset=PAGE - 4 * values.numel())
    tables.copy_(values)
    assert ctypes.CDLL(None).mprotect(ctypes.c_void_p(addr + PAGE), PAGE, 0) == 0  # PROT_NONE
    tables = tables.view(2, WIDTH)
    kw = {}
    if int8:
        kq = torch.randint(-127, 128, (64, BS, KVH, D), generator=g, dtype=torch.int8)
        kw = dict(k_cache_int8=kq, v_cache_int8=kq.flip(0).clone(), k_scale=torch.rand(64, KVH, generator=g) / 64,
                  v_scale=torch.rand(64, KVH, generator=g) / 64)
    q = torch.randn(2, H, D, generator=g)
    kv_lens = torch.tensor(lens, dtype=torch.int32)
    out, lse = paged_decode(q, k, v, tables, kv_lens, scale=0.2, num_splits=splits, max_kv_len=max_kv_len,
                            block_n=16, **kw)
    r_out, r_lse = ref.paged_decode(q, k, v, tables.clone(), kv_lens, scale=0.2, **kw)
    torch.testing.assert_close(out, r_out, atol=2e-4, rtol=0)
    torch.testing.assert_close(lse, r_lse, atol=2e-4, rtol=0)
    print("ok")
""")


@pytest.mark.parametrize("int8", [True, False])
@pytest.mark.parametrize("splits, max_kv_len", [(8, 4096), (3, 160)])
def test_decode_reads_nothing_past_the_tables(int8, splits, max_kv_len):
    r = subprocess.run([sys.executable, "-c", CHILD, "1" if int8 else "0", str(splits), str(max_kv_len)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (
        f"child exited {r.returncode} (-11: a read past the tables' page)\n{r.stderr[-3000:]}")
