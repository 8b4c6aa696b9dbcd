"""Quest-style sparse decode: pick the warm blocks a decode query is likely to attend to.

Each warm block keeps the elementwise min and max of its keys per kv head (`WarmPages.kmin/kmax`,
INT8 in units of the block's key scale). For a query q the largest score any key of the block can
reach is bounded by  sum_d max(q_d * kmin_d, q_d * kmax_d)  (Quest, Tang et al. 2024). With
q+ = max(q, 0) and q- = min(q, 0) that is  q+ . kmax + q- . kmin, one bound per query head.

Selection (one choice, measured): the block table is shared by all heads of a layer (the kernels
read one table per sequence), so a block's score is the largest of its per-query-head bounds (over
all heads of the layer), and exactly `top_k` warm blocks are kept per
sequence and layer (fewer when it has fewer). Every hot block (the sinks, the recent window and any
block the warm pool had no room for) and the last block (the one holding the query) are always kept.

The kept blocks are compacted into a new block table in their original order (so the hot tail stays
last and only the last block may be partial) with an adjusted kv length, and the ordinary dense
decode runs on it unchanged: for a global layer (no window) decode attends to every key of the
table, and positions no longer matter once RoPE is in the keys. Decode only; prefill stays dense.

Why the max over heads: one head that retrieves (a "retrieval head") must get its block even when
the other heads of its group look elsewhere. Summing the heads' bounds instead (the first version)
found 5/20 and 11/20 pass keys at top-k 16 and 32 on Gemma 3 270M at 2K-4K tokens, the max 13/20
and 15/20, full attention 20/20 (BENCHMARKS.md, "KV cache quality").
"""

from __future__ import annotations

import torch

from engine.kv.warm_tier import WarmPages


def block_scores(q: torch.Tensor, block_tables: torch.Tensor, warm: WarmPages) -> torch.Tensor:
    """Upper bound of q.k over each block's keys, float32 [B, max_blocks, kv_heads]: for each kv
    head, the largest of its query heads' bounds. Entries that are not warm blocks score -inf.
    q [B, H, D]; block_tables [B, max_blocks]."""
    b, h, d = q.shape
    kvh = warm.kmin.shape[1]
    qg = q.float().view(b, kvh, h // kvh, d)
    is_warm = block_tables <= -2
    w = torch.where(is_warm, -block_tables - 2, torch.zeros_like(block_tables)).reshape(-1)
    kmax = warm.kmax.index_select(0, w).view(b, -1, kvh, d).float()  # [B, W, KVH, D]
    kmin = warm.kmin.index_select(0, w).view(b, -1, kvh, d).float()
    ks = warm.ks.index_select(0, w).view(b, -1, kvh)
    per_head = (torch.einsum("bhrd,bwhd->bwhr", qg.clamp(min=0), kmax)
                + torch.einsum("bhrd,bwhd->bwhr", qg.clamp(max=0), kmin))  # [B, W, KVH, group]
    bound = per_head.amax(dim=3) * ks
    return bound.masked_fill(~is_warm[..., None], float("-inf"))


def select_blocks(
    q: torch.Tensor, block_tables: torch.Tensor, kv_lens: torch.Tensor, warm: WarmPages, top_k: int, block_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Compacted decode block tables and kv lengths keeping, per sequence, the `top_k` warm blocks with
    the highest bound plus every hot block. Returns (tables [B, kept_max] -1 padded, kv_lens [B]).
    A sequence with at most `top_k` warm blocks keeps its table as is."""
    b, width = block_tables.shape
    dev = block_tables.device
    n_blk = (kv_lens + block_size - 1) // block_size  # [B]
    cols = torch.arange(width, device=dev)[None, :]
    in_len = cols < n_blk[:, None]
    is_warm = (block_tables <= -2) & in_len
    if width <= top_k:
        return block_tables, kv_lens
    scores = block_scores(q, block_tables, warm).amax(dim=2)  # [B, W]
    scores = scores.masked_fill(~is_warm, float("-inf"))
    top = torch.topk(scores, top_k, dim=1)
    chosen = torch.zeros_like(is_warm)
    chosen.scatter_(1, top.indices, top.values > float("-inf"))
    keep = (in_len & (block_tables >= 0)) | chosen | (cols == n_blk[:, None] - 1)
    order = torch.sort((~keep).to(torch.uint8), dim=1, stable=True).indices  # kept columns first, in order
    counts = keep.sum(1)
    kept = int(counts.max())
    tables = block_tables.gather(1, order[:, :kept])
    tables = torch.where(cols[:, :kept] < counts[:, None], tables, torch.full_like(tables, -1))
    # every kept block is full except the last (it holds the query), so the new length is
    # (kept blocks - 1) full blocks plus the tokens of the last one
    tail = kv_lens - (n_blk - 1) * block_size
    return tables, (counts - 1) * block_size + tail
