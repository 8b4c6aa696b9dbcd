"""Torch references for every kernel in longdoc_kernels/: plain float32 math over gathered blocks.

They define what each kernel computes; tests compare the Triton kernels against them, and the
dispatch falls back to them where Triton cannot run.
"""

from __future__ import annotations

import torch


def gather_kv(
    k_cache: torch.Tensor,
    block_table: torch.Tensor,
    length: int,
    k_cache_int8: torch.Tensor | None = None,
    k_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Positions 0..length-1 of one sequence as float32 [length, kv_heads, head_dim]; positions in
    absent blocks (-1) are NaN so that any use of them shows."""
    bs = k_cache.shape[1]
    n = (length + bs - 1) // bs
    out = torch.full((n * bs, *k_cache.shape[2:]), float("nan"), dtype=torch.float32, device=k_cache.device)
    for j in range(n):
        e = int(block_table[j])
        if e >= 0:
            out[j * bs : (j + 1) * bs] = k_cache[e].float()
        elif e <= -2:
            w = -e - 2
            out[j * bs : (j + 1) * bs] = k_cache_int8[w].float() * k_scale[w][None, :, None]
    return out[:length]


def attention_rows(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, qpos: torch.Tensor, scale: float,
    window: int | None = None, softcap: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q [T, H, D] at positions qpos [T]; k, v [L, KVH, D] at positions 0..L-1. Causal (and window:
    key allowed iff q - window < k <= q). Returns out [T, H, D] float32 and lse [T, H] float32."""
    t, h, d = q.shape
    kvh = k.shape[1]
    g = h // kvh
    kpos = torch.arange(k.shape[0], device=q.device)
    allowed = kpos[None, :] <= qpos[:, None]
    if window is not None:
        allowed &= kpos[None, :] > qpos[:, None] - window
    kk = torch.where(allowed.any(0)[:, None, None], k.float(), 0.0).repeat_interleave(g, dim=1)
    vv = torch.where(allowed.any(0)[:, None, None], v.float(), 0.0).repeat_interleave(g, dim=1)
    s = torch.einsum("thd,lhd->htl", q.float(), kk) * scale
    if softcap is not None:
        s = torch.tanh(s / softcap) * softcap
    s = s.masked_fill(~allowed[None], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # [H, T]
    p = torch.exp(s - lse[..., None])
    out = torch.einsum("htl,lhd->thd", p, vv)
    return out, lse.transpose(0, 1).contiguous()


def paged_prefill(
    q, k_cache, v_cache, block_table, *, q_offset: int, kv_len: int, scale: float, window=None, softcap=None,
    k_cache_int8=None, v_cache_int8=None, k_scale=None, v_scale=None,
):
    k = gather_kv(k_cache, block_table, kv_len, k_cache_int8, k_scale)
    v = gather_kv(v_cache, block_table, kv_len, v_cache_int8, v_scale)
    qpos = torch.arange(q_offset, q_offset + q.shape[0], device=q.device)
    return attention_rows(q, k, v, qpos, scale, window, softcap)


def paged_prefill_varlen(
    q, k_cache, v_cache, tables, items, *, scale: float, window=None, softcap=None, out=None, lse=None, meta=None,
):
    """`paged_prefill` of each chunk (first row, rows, q_offset) of items over block table row i,
    written into the chunk's rows of out and lse (float32 here; out in q's dtype)."""
    out = torch.empty_like(q) if out is None else out
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device) if lse is None else lse
    for i, (start, n, off) in enumerate(items):
        if n == 0:
            continue
        o, l_ = paged_prefill(q[start : start + n], k_cache, v_cache, tables[i], q_offset=off, kv_len=off + n,
                              scale=scale, window=window, softcap=softcap)
        out[start : start + n] = o.to(out.dtype)
        lse[start : start + n] = l_
    return out, lse


def paged_decode(
    q, k_cache, v_cache, block_tables, kv_lens, *, scale: float, window=None, softcap=None,
    k_cache_int8=None, v_cache_int8=None, k_scale=None, v_scale=None,
):
    outs, lses = [], []
    for b in range(q.shape[0]):
        n = int(kv_lens[b])
        k = gather_kv(k_cache, block_tables[b], n, k_cache_int8, k_scale)
        v = gather_kv(v_cache, block_tables[b], n, v_cache_int8, v_scale)
        out, lse = attention_rows(q[b : b + 1], k, v, torch.tensor([n - 1], device=q.device), scale, window, softcap)
        outs.append(out[0])
        lses.append(lse[0])
    return torch.stack(outs), torch.stack(lses)


def quantize_blocks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [N, block_size, KVH, D] -> int8 values and float32 scales [N, KVH] (absmax / 127 over the
    block and head). Round to nearest: |x - q * scale| <= scale / 2 for every element."""
    xf = x.float()
    amax = xf.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    q = torch.round(xf / scale[:, None, :, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def dequantize_blocks(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (q.float() * scale[:, None, :, None]).to(dtype)


def gather_blocks_tiered(k_cache, v_cache, blocks, kq, vq, ks, vs):
    """kv_quant.gather_blocks_tiered in torch: every entry read both as a hot block and as a warm
    block (clamped ids), `where` keeps the one it names (no host wait either)."""
    warm_rows = (blocks <= -2)[:, None, None, None]
    w = (-blocks - 2).clamp(min=0).long()
    hot = blocks.clamp(min=0).long()
    return tuple(torch.where(warm_rows, dequantize_blocks(q.index_select(0, w), sc.index_select(0, w), pool.dtype),
                             pool.index_select(0, hot))
                 for pool, q, sc in ((k_cache, kq, ks), (v_cache, vq, vs)))


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Half-split RoPE (the HF "rotate_half" convention): x [T, heads, D], cos/sin [T, D/2]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    c, s = cos[:, None, :].float(), sin[:, None, :].float()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def rope_and_cache_write(q, k, v, cos, sin, k_cache, v_cache, slots, return_k=False):
    """Rotate q and k, write the rotated k and v into the caches at flat slots (block * bs + offset).
    Returns the rotated q (in q's dtype; with return_k also the rotated k in k's dtype); the caches
    are written in place."""
    bs = k_cache.shape[1]
    qr = rotate(q, cos, sin).to(q.dtype)
    kf = rotate(k, cos, sin)
    blocks, offs = slots // bs, slots % bs
    k_cache[blocks, offs] = kf.to(k_cache.dtype)
    v_cache[blocks, offs] = v.to(v_cache.dtype)
    return (qr, kf.to(k.dtype)) if return_k else qr


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, gemma: bool) -> torch.Tensor:
    """engine.model.layers.RMSNorm's arithmetic: Gemma's `weight` is the float32 multiplier 1 + w."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if gemma:
        return (xf * weight.float()).type_as(x)
    return weight * xf.to(x.dtype)


def add_rms_norm(x, h, w_post, w_next, eps: float, gemma: bool):
    """engine.model.layers.DecoderLayer's residual step: x + norm(h, w_post) (or x + h), then the next
    norm of the sum (None without w_next)."""
    if w_post is not None:
        h = rms_norm(h, w_post, eps, gemma)
    xs = x + h
    return xs, (rms_norm(xs, w_next, eps, gemma) if w_next is not None else None)


def act_mul(gu, gelu: bool):
    """engine.model.layers.MLP's act(gate) * up from the fused [gate | up] projection output."""
    g, u = gu.chunk(2, dim=-1)
    g = torch.nn.functional.gelu(g, approximate="tanh") if gelu else torch.nn.functional.silu(g)
    return g * u
