"""Diagnostic: compile the decode kernel for bf16 pages (MODE 0) and INT8 pages (mode 4 -> MODE 1,
conv 0 / 1 / 2) at the 8B shape and write each compiled variant's TTGIR and PTX with its register
and spill counts under the output folder, to see whether the INT8 loop's loads are pipelined
(async copies into shared memory) like the bf16 loop's.

    python3 benchmarks/dump_decode_ir.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from longdoc_kernels import paged_attention as pa  # noqa: E402
from longdoc_kernels.kv_quant import quantize_blocks  # noqa: E402


def compiled_kernels(fn):
    caches = getattr(fn, "device_caches", None)
    if caches:
        for dev_cache in caches.values():
            yield from dev_cache[0].values()
    else:
        yield from getattr(fn, "cache", {}).get(0, {}).values()


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    bs, h, kvh, d, ctx = 16, 32, 8, 128, 8192
    nb = ctx // bs
    k = torch.randn(nb, bs, kvh, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    table = torch.arange(nb, device="cuda", dtype=torch.int32)[None]
    kq, ks = quantize_blocks(k)
    vq, vs = quantize_blocks(v)
    lens = torch.tensor([ctx], device="cuda", dtype=torch.int32)
    q = torch.randn(1, h, d, device="cuda", dtype=torch.bfloat16)
    common = dict(scale=d**-0.5, max_kv_len=ctx, num_splits=32, block_n=64)
    pa.paged_decode(q, k, v, table, lens, **common)
    for conv in (0, 1, 2):
        pa.paged_decode(q, k, v, -table - 2, lens, int8_mode=4, int8_conv=conv, k_cache_int8=kq, v_cache_int8=vq,
                        k_scale=ks, v_scale=vs, **common)
    torch.cuda.synchronize()
    lines = []
    for i, ck in enumerate(compiled_kernels(pa._decode_split_kernel)):
        try:
            ck._init_handles()
        except Exception:
            pass
        meta = getattr(ck, "src", None)
        consts = getattr(meta, "constants", None) if meta is not None else None
        name = f"decode_{i}"
        for kind in ("ttgir", "ptx"):
            text = ck.asm.get(kind)
            if text:
                (out / f"{name}.{kind}").write_text(text if isinstance(text, str) else text.decode())
        ttgir = ck.asm.get("ttgir", "")
        lines.append(f"{name}: regs {getattr(ck, 'n_regs', '?')} spills {getattr(ck, 'n_spills', '?')} "
                     f"async_copy {ttgir.count('async_copy_global_to_local')} local_alloc {ttgir.count('local_alloc')} "
                     f"convert_layout {ttgir.count('convert_layout')} dot {ttgir.count('tt.dot') + ttgir.count('warp_group_dot')} "
                     f"consts {consts}")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
