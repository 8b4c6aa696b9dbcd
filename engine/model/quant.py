"""Weight-only INT8 on the CPU: every linear weight, the output layer and the embedding table kept
as int8 with one float scale per output row, multiplied by torch's CPU kernel
`torch._weight_int8pack_mm` (activations cast to bfloat16 for the call, the result back to the
activations' dtype).

Why: a CPU decode step reads every weight once per token, so it is bound by the bytes read. Gemma 3
270M in float32 reads about 1.07 GB per token, 0.67 GB of it the 262,144-row output layer; in int8
about a quarter of that. Measured on the 2-core AMD EPYC (AVX-512) host, one thread, one token
(`[1, 640] x [262144, 640]^T`): float32 77 ms, int8 28 ms, int4 (group 32) 18.5 ms; the layers'
small matrices (qkv 1536x640, o 640x1024, gate/up 4096x640, down 640x2048) are 0.04-0.2 ms either
way. `_weight_int8pack_mm` with float32 activations is 10-30x slower than with bfloat16 ones on
this torch (2.13), hence the cast. Held-text perplexity (Gemma 3 270M, 2,047 tokens of
data/samples/contracts/en-github-tos-2017-10-to-2018-05/v2.txt): int8 10.602, float32 10.559
(+0.41%). An int4 output layer (requantised from the int8 one; 2,048 tokens of the same text)
reads in 9.7 ms instead of 24 ms but costs perplexity: symmetric groups of 32 +9.2%, of 64 +14.5%,
asymmetric groups of 32 +5.3% (argmax agreement 81-88%), so the output layer stays int8. For greedy
steps `GreedyHead` uses the int4 copy (or, where the CPU lacks AVX-512, the int8 layer through
fbgemm with integer activations: `Int8Filter`) only to rule rows out, and the argmax stays exactly
int8's.

Prefill is the other way round: many rows per weight, compute-bound, and `_weight_int8pack_mm` is
built for a few rows. Where the CPU multiplies bfloat16 natively (AMX, AVX512-BF16) the layers'
products of GEMM_ROWS rows or more go through a bfloat16 copy of each weight (made on first use;
200 MB for Gemma 3 270M's layers) and oneDNN's GEMM, and the prefill attention runs in bfloat16 too
(engine/attention/backend.py: `sdpa_dtype`). Intel Xeon with AMX, the packaged model, 2,048-token
prompt: 233 -> 849 tokens/s on one thread, 441 -> 1,417 on two; decode unchanged; held-text
perplexity 10.6455 -> 10.6307 against float32's 10.6036 (BENCHMARKS.md, "CPU prefill: bfloat16
GEMMs"). Where it does not (AVX2 only: a bfloat16 GEMM there is ~8x slower than float32), the
products of FP32_GEMM_ROWS rows or more multiply the int8 weights dequantised to float32 on the
fly, no copy kept: AMD EPYC with AVX2, two threads, 1,024-token prompts 271 -> 407 tokens/s
(BENCHMARKS.md, "CPU on an AVX2-only host").

`LoadConfig.weights` picks it: "int8", "float" (the dtype as loaded: the reference), or None: int8
for the packaged default model (`LLM(model=None)`) on the CPU when no dtype was named, float
everywhere else (HF folders and other GGUFs keep matching transformers exactly; `dtype="float32"`
means float32 weights). int8 results depend slightly on the batch (bfloat16 activations), so a
request batched with others may pick a different token than alone; float32 does not.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn

from longdoc_kernels.cpu import available as cpu_kernels  # the C kernels, or None

WEIGHT_MODES = ("float", "int8")


# Products of at least GEMM_ROWS rows (prefill chunks, large batches) go through a bfloat16 copy of
# the weight and oneDNN's GEMM where the CPU multiplies bfloat16 natively (AMX tiles or AVX512-BF16):
# `_weight_int8pack_mm` is built for a few rows. Intel Xeon with AMX (this project's CI class of
# machine, 2026-12-05), one thread, [1024, 640] x [4096, 640]: 77 ms int8pack against 4.8 ms; at 16
# rows 1.57 against 0.63 ms; a single row stays int8 (0.067 against 0.2 ms for [1, 640] x [1536, 640]:
# a decode step reads every weight once, and int8 reads half the bytes). LONGDOC_CPU_BF16_GEMM=0
# turns it off, =1 forces it.
GEMM_ROWS = 16
_BF16_GEMM: bool | None = None


# Where the CPU has no bfloat16 GEMM (AVX2: no bfloat16 instructions, a bfloat16 GEMM 8x float32's time), products
# of at least FP32_GEMM_ROWS rows multiply the weight dequantised to float32 on the fly (the int8
# kernel's weights exactly: q x the bfloat16 scale), no copy kept: `_weight_int8pack_mm` is built for
# a few rows. AMD EPYC (AVX2 only), one thread, [rows, 640] x [4096, 640]: 1,024 rows 156 ms int8pack
# against 77 ms float32, 256 rows 39.5 against 18.9, 64 rows 8.1 against 5.7, 16 rows 3.1 against 3.9
# (before the dequantisation, ~1-2 ms a product). LONGDOC_CPU_FP32_GEMM=0 turns it off, =1 forces it.
FP32_GEMM_ROWS = 64
_FP32_GEMM: bool | None = None


# A layer's products under the GEMM thresholds (decode steps, speculative drafts, short chunks) go
# through the C kernel of longdoc_kernels/cpu where it is built (float32 activations, no bfloat16
# casts around the call), every row computed alike whatever the row count, so a sequence's tokens do
# not depend on its batch; the output layer (GreedyHead's exactness rests on its one kernel) and
# machines without the kernels keep `_weight_int8pack_mm`. LONGDOC_CPU_KERNELS=0 turns it off.


def fp32_gemm() -> bool:
    """Whether row-heavy int8 products run as float32 GEMMs on this CPU (see FP32_GEMM_ROWS): where
    bf16_gemm() does not hold."""
    global _FP32_GEMM
    if _FP32_GEMM is None:
        import os

        env = os.environ.get("LONGDOC_CPU_FP32_GEMM")
        _FP32_GEMM = env == "1" if env in ("0", "1") else not bf16_gemm()
    return _FP32_GEMM


def bf16_gemm() -> bool:
    """Whether row-heavy int8 products run as bfloat16 GEMMs on this CPU (see GEMM_ROWS)."""
    global _BF16_GEMM
    if _BF16_GEMM is None:
        import os

        env = os.environ.get("LONGDOC_CPU_BF16_GEMM")
        if env in ("0", "1"):
            _BF16_GEMM = env == "1"
        else:
            cpu = getattr(torch, "cpu", None)
            _BF16_GEMM = bool(cpu is not None and (getattr(cpu, "_is_amx_tile_supported", lambda: False)()
                                                   or getattr(cpu, "_is_avx512_bf16_supported", lambda: False)()))
    return _BF16_GEMM


def _c_rows() -> int | float:
    """Row counts below this take the C kernel in `Int8Weight.matmul` (the GEMM paths above it)."""
    return GEMM_ROWS if bf16_gemm() else FP32_GEMM_ROWS if fp32_gemm() else float("inf")


class Int8Weight:
    """A [out, in] weight as int8 rows `q` and float32 per-row scales (`w ~= q * scale[:, None]`).
    gemm: products of many rows may use a bfloat16 copy (`bf16_gemm`), made on first use: the
    layers' weights (prefill is their many-row product), not the output layer or the embedding
    table (their many-row products are rare: a full-prompt scoring, and a copy of 262,144 rows
    would cost 335 MB)."""

    def __init__(self, w: torch.Tensor, gemm: bool = False) -> None:
        w = w.detach().float()
        amax = w.abs().amax(dim=1).clamp(min=1e-12)
        self.scale = (amax / 127.0).contiguous()
        self.q = torch.round(w / self.scale[:, None]).clamp_(-127, 127).to(torch.int8).contiguous()
        self.scale_bf16 = self.scale.to(torch.bfloat16)
        self.scale_k = self.scale_bf16.float() if gemm else None  # the same scales as the C kernel takes them
        self.shape = tuple(w.shape)
        self.gemm = gemm
        self.w16: torch.Tensor | None = None  # bfloat16 q x scale_bf16 (one rounding of the exact product)

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] @ w.T -> [..., out] in x's dtype."""
        if (kernels := self.c_kernels(x)) is not None:
            return kernels.int8_matmul(x, self.q, self.scale_k)  # a decode step's rows: the branch below, sooner
        flat = x.dim() == 2  # the engine's activations [T, in]: no reshapes (a decode step makes 72 of these calls)
        x2 = x if flat else x.reshape(-1, x.shape[-1])
        if self.gemm and x2.shape[0] >= GEMM_ROWS and bf16_gemm():
            if self.w16 is None:
                self.w16 = (self.q.float() * self.scale_bf16.float()[:, None]).to(torch.bfloat16)
            y = F.linear(x2.to(torch.bfloat16), self.w16)
        elif self.gemm and x2.shape[0] >= FP32_GEMM_ROWS and fp32_gemm():
            y = F.linear(x2.float(), self.q * self.scale_bf16.float()[:, None])  # float32 activations, not rounded
        elif self.gemm and not x2.is_cuda and (kernels := cpu_kernels()) is not None:
            y = kernels.int8_matmul(x2.float(), self.q, self.scale_k)  # float32 activations, no casts
        else:
            y = torch._weight_int8pack_mm(x2.to(torch.bfloat16), self.q, self.scale_bf16)
        y = y.to(x.dtype)
        return y if flat else y.reshape(*x.shape[:-1], self.shape[0])

    def c_kernels(self, x: torch.Tensor):
        """longdoc_kernels.cpu where its C kernel takes this product of x (a layer weight, float32
        rows on the CPU, fewer than the GEMM paths take), else None."""
        if self.scale_k is None or x.dtype is not torch.float32 or x.dim() != 2 or x.is_cuda \
                or x.shape[0] >= _c_rows():
            return None
        return cpu_kernels()

    def rows(self, ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Dequantised rows `ids` (the embedding lookup)."""
        return (self.q[ids].to(torch.float32) * self.scale[ids].unsqueeze(-1)).to(dtype)

    def dequantize(self) -> torch.Tensor:
        return self.q.float() * self.scale[:, None]

    @property
    def nbytes(self) -> int:
        extra = (4 * self.scale_k.numel() if self.scale_k is not None else 0) + \
            (2 * self.w16.numel() if self.w16 is not None else 0)
        return self.q.numel() + 6 * self.scale.numel() + extra


class Int4Weight:
    """A [out, in] weight as asymmetric int4 in groups of `group` inputs (a bfloat16 scale and zero
    per row and group, `w ~= (q - 8) * scale + zero`, q in 0..15), packed for torch's CPU kernel
    `torch._weight_int4pack_mm_for_cpu` (bfloat16 activations; torchao's tinygemm layout). Half the
    bytes of Int8Weight, but too coarse to replace it (below): GreedyHead uses it as a filter.
    `w`: float rows, or an Int8Weight (its weights as its kernel multiplies by them: q x the
    bfloat16 scale). Quantised in runs of `chunk` rows, so no float copy of the whole layer is
    made. `err_norm[r]`: ||w_r - the int4 row r the kernel multiplies by||."""

    def __init__(self, w: torch.Tensor | Int8Weight, group: int = 32, chunk: int = 16384) -> None:
        n, k = w.shape
        if k % group:
            raise ValueError(f"int4 groups of {group} do not divide {k} inputs")
        packed, scale_zeros, err = [], [], []
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            if isinstance(w, Int8Weight):
                rows = w.q[a:b].float() * w.scale_bf16[a:b].float()[:, None]
            else:
                rows = w[a:b].detach().float()
            wg = rows.reshape(b - a, k // group, group)
            lo, hi = wg.amin(-1), wg.amax(-1)
            scale = ((hi - lo) / 15.0).clamp(min=1e-12)  # [rows, groups]
            q = torch.round((wg - lo[..., None]) / scale[..., None]).clamp_(0, 15)
            scale_b, zero_b = scale.to(torch.bfloat16), (lo + 8 * scale).to(torch.bfloat16)
            # the weights the kernel multiplies by (its scales and zeros are bfloat16)
            deq = (q - 8) * scale_b.float()[..., None] + zero_b.float()[..., None]
            err.append((wg - deq).reshape(b - a, k).norm(dim=1))
            packed.append(torch._convert_weight_to_int4pack_for_cpu(q.reshape(b - a, k).to(torch.int32).contiguous(), 1))
            scale_zeros.append(torch.stack([scale_b, zero_b], -1))  # [rows, groups, 2]
        self.packed = torch.cat(packed)
        self.scale_zeros = torch.cat(scale_zeros).transpose(0, 1).contiguous()  # [groups, out, 2]
        self.err_norm = torch.cat(err)
        self.group = group
        self.shape = (n, k)

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] @ w.T -> [..., out] in float32 (the kernel's bfloat16 result)."""
        lead = x.shape[:-1]
        y = torch._weight_int4pack_mm_for_cpu(x.reshape(-1, x.shape[-1]).to(torch.bfloat16), self.packed, self.group,
                                              self.scale_zeros)
        return y.float().reshape(*lead, self.shape[0])


class Int8Filter:
    """The GreedyHead's other filter: the int8 output layer itself, multiplied by fbgemm's int8 x
    int8 kernel (`quantized::linear_with_input_q_dq_qweight_dq_output_fp32`, the x86 engine), whose
    weights are exactly the ones `_weight_int8pack_mm` multiplies by (the int8 rows, each row's
    bfloat16 scale). Only the activations are approximated, in two integer rows: x / s = q1 + q2 /
    126, s = max|x| / 63, q1 and q2 in -63..63 (fbgemm's activations are 7-bit: u8 x s8 products
    summed in pairs must not saturate 16 bits). The error e = x - s (q1 + q2 / 126) is known
    exactly, so |x.w_j - approx_j| <= ||e|| ||w_j|| (Cauchy-Schwarz), with ||e|| <= ~max|x| / 15,876.

    Why a second filter: torch's int4 CPU kernel is compute-bound where the CPU lacks AVX-512
    (AVX2 only, Gemma 3 270M's 262,144 x 640 layer, one thread: the int4 pass 25 ms a decode step,
    this filter 14 ms reading twice the bytes). With AVX-512 the int4 pass read at ~13.5 GB/s, and
    fbgemm's layer products at ~16.7 over twice the bytes (the head through fbgemm was not measured
    there), so GreedyHead times both at build on such CPUs and keeps the faster. Both give the int8
    product's exact argmax: the choice changes only the time."""

    def __init__(self, head: Int8Weight) -> None:
        w = head.q
        scales = head.scale_bf16.to(torch.float64)
        prev = torch.backends.quantized.engine
        torch.backends.quantized.engine = "x86"
        try:
            with warnings.catch_warnings():  # torch's quantized tensors are deprecated: only the packing uses one
                warnings.simplefilter("ignore", UserWarning)
                qw = torch._make_per_channel_quantized_tensor(w, scales, torch.zeros(w.shape[0], dtype=torch.long), 0)
            self.packed = torch.ops.quantized.linear_prepack(qw, None)
        finally:
            torch.backends.quantized.engine = prev
        # ||w_j|| = |scale_j| ||q_j|| [out], in runs of rows (no float copy of the whole layer)
        self.norm = torch.cat([w[a:a + 16384].float().norm(dim=1) for a in range(0, w.shape[0], 16384)])
        self.norm *= head.scale_bf16.float().abs()
        self.nbytes = w.numel() + 4 * self.norm.numel()  # fbgemm's packed copy of the int8 rows, the norms

    def coarse(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [B, in] float32 (the bfloat16 activations the int8 kernel reads) -> (approx [B, out],
        bound [B, out]): |x.w_j - approx[b, j]| <= bound[b, j], fbgemm's float rounding included."""
        b = x.shape[0]
        s = (x.abs().amax(dim=1, keepdim=True) / 63).clamp_(min=1e-30)  # [B, 1]
        u = x / s
        q1 = torch.round(u)
        q2 = torch.round((u - q1) * 126)
        y = torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(torch.cat((q1, q2)), 1.0, 64,
                                                                              self.packed)
        y0, y1 = y[:b], y[b:] * (1 / 126)
        approx = (y0 + y1) * s
        err = (x - (q1 + q2 * (1 / 126)) * s).norm(dim=1, keepdim=True)  # [B, 1]
        # fbgemm sums integers exactly and rounds a few times per float multiply: a few float32 ulps
        # of each term (which may cancel), and ||e|| itself computed in float32
        return approx, err * (1 + 2.0**-10) * self.norm + (y0.abs() + y1.abs()) * s * 2.0**-20


class Int4Filter:
    """GreedyHead's int4 filter through the C kernels (longdoc_kernels/cpu `int4_filter`, AVX-512):
    the int8 layer's weights (q x its bfloat16 scale) as unsigned int4 u in groups of 32 inputs with
    a float16 scale s and offset m a row and group (w4 = u s + m), packed for the kernel, which reads
    them in one prefetched stream (the packed bytes and the scales, 5 bits a weight) and sums each
    group's products exactly in int32 over int16 activations. Per row j the bound of the gap to the
    int8 logit: ||x|| err[j] + ||x - x16|| wnorm[j] + |x16|_1 tol[j] (Cauchy-Schwarz on the weights'
    gap err = ||w8_j - w4_j||, then on the activations' int16 rounding with wnorm = ||w4_j||, then
    the kernel's float32 accumulation: 2 roundings a group, of terms at most max_g(15 |s| + |m|)
    times the activations). The same bytes as torch's int4 kernel reads (its scales and zeros
    bfloat16), at the memory's speed (BENCHMARKS.md, "CPU decode: int16 activations, an int4 filter
    of its own")."""

    def __init__(self, head: Int8Weight, chunk: int = 16384) -> None:
        from longdoc_kernels.cpu import INT4_BLOCK

        n, k = head.shape
        if k % 32:
            raise ValueError(f"Int4Filter: groups of 32 do not divide {k} inputs")
        g = k // 32
        nb = (n + 15) // 16
        self.packed = torch.empty(nb, g, INT4_BLOCK, dtype=torch.uint8)
        err, wnorm, tol = [], [], []
        for a in range(0, nb * 16, chunk):  # chunk: a multiple of 16
            b = min(n, a + chunk)
            rows = head.q[a:b].float() * head.scale_bf16[a:b].float()[:, None]
            r = -(-(b - a) // 16) * 16  # rows padded to whole blocks (zeros: their logits are not read)
            rows = F.pad(rows, (0, 0, 0, r - (b - a)))
            wg = rows.view(r, g, 32)
            lo, hi = torch.aminmax(wg, dim=-1)
            s16, m16 = ((hi - lo) / 15.0).to(torch.float16), lo.to(torch.float16)
            sf, mf = s16.float(), m16.float()
            u = wg.sub(mf[..., None]).mul_((1.0 / sf.clamp(min=1e-30))[..., None]).round_().clamp_(0, 15)
            deq = torch.addcmul(mf[..., None], u, sf[..., None])  # what the kernel multiplies by
            wnorm.append(deq.view(r, k).norm(dim=1)[: b - a])
            err.append(deq.sub_(wg).view(r, k).norm(dim=1)[: b - a])
            tol.append((15 * sf.abs() + mf.abs()).amax(-1)[: b - a] * ((2 * g + 4) * 2.0**-24))
            # nibbles: per block and group, pair p = 4j + 2h + c of the group's 16 input pairs into byte
            # 32c + (2 row + e) of load j, the low nibble (h = 0) or the high one (h = 1)
            uq = u.to(torch.uint8).view(r // 16, 16, g, 4, 2, 2, 2)  # [blocks, row, g, j, h, c, e]
            nib = uq[:, :, :, :, 0] | (uq[:, :, :, :, 1] << 4)  # [blocks, row, g, j, c, e]
            nib = nib.permute(0, 2, 3, 4, 1, 5).reshape(r // 16, g, 256)
            sc = s16.view(r // 16, 16, g).transpose(1, 2).contiguous().view(torch.uint8)  # [blocks, g, 32]
            mn = m16.view(r // 16, 16, g).transpose(1, 2).contiguous().view(torch.uint8)
            self.packed[a // 16: a // 16 + r // 16] = torch.cat([nib, sc, mn], -1)
        up = 1 + max(2.0**-10, 4 * k * 2.0**-24)  # room for the float32 norms' own rounding (~k 2^-24 of them)
        self.err, self.wnorm, self.tol = (torch.cat(v) * up for v in (err, wnorm, tol))
        self.shape = (n, k)

    @property
    def nbytes(self) -> int:
        return self.packed.numel() + 12 * self.shape[0]


# bfloat16 keeps 8 significant bits: a kernel's bfloat16 result is within 2^-8 of its float value
_BF16_REL = 2.0**-7  # both kernels' roundings, with room for the float32 accumulation
_SLACK = 1e-3
# GreedyHead computes every row in int8 at once when more than 1 / FULL_HEAD_SHARE of them are candidates
# (one thread, Gemma 3 270M: gathering a candidate row costs ~0.86 us, the whole product ~29 ms)
FULL_HEAD_SHARE = 8


class GreedyHead:
    """The argmax of an Int8Weight output layer for greedy decoding, exactly, without the whole
    int8 product: a filter gives every row's logit within a bound, and only the rows whose bound
    reaches the best row's exact logit are computed with the int8 weights.

    Three filters, each with a per-row bound:
    - "int4c": `Int4Filter`, an int4 copy packed for the C kernel of longdoc_kernels/cpu (AVX-512),
      its bound in its docstring; where it runs it stands in for "int4" (the same bytes read, at the
      memory's speed: the filter's pass 5.5 against ~7 ms for torch's kernel on the 2-core Xeon of
      2026-12-07, two threads).
    - "int4": an int4 copy of the layer (half the bytes). For a row j, |x.w8_j - x.w4_j| <= ||x|| *
      ||w8_j - w4_j|| (Cauchy-Schwarz; the per-row norms of the weight gap are computed once, against
      the weights each kernel really multiplies by), plus both kernels' bfloat16 rounding.
    - "int8": the same int8 layer through fbgemm with the activations in two 7-bit integer rows
      (`Int8Filter`): the same bytes as the int8 product, but a faster kernel where the CPU lacks
      AVX-512.
    `filter=None`: int4c where its kernel runs, else int8 where the CPU has no AVX-512 (torch's
    capability "AVX2"); where an int4 filter and fbgemm's both exist they are built, timed on the
    layer, and the faster kept; int4 where fbgemm is missing. LONGDOC_GREEDY_FILTER=int4|int4c|int8
    picks one. The int8 logit of j is at most its filter
    logit plus the bound; a row whose ceiling is below the int8 logit of the filter's argmax cannot
    be the argmax and is skipped. The candidates' int8 logits come from the same kernel on the
    gathered rows, which on this torch computes each row exactly as the whole product does
    (tests/engine/model/test_greedy_head.py checks it), and ties go to the lowest index as
    torch.argmax's do. With the C kernels (longdoc_kernels/cpu) the int4 filter's argmax and the
    candidate rows are found in one vectorised pass each over its bfloat16 logits, the same rows as
    the torch expression (~0.2 ms against ~2 ms for its passes over [B, V] float32 tensors on the
    2-core Xeon of 2026-12-07, two threads). Gemma 3 270M on a 2-core AVX-512 host, one token: 11
    ms for the int4 pass and ~3 ms for a median of 341 candidates (at most 8,433) against 25-31 ms
    for the int8 product; the argmax was the int8 product's at every one of 147 positions of a
    contract (BENCHMARKS.md, "CPU decode: the output layer")."""

    def __init__(self, head: Int8Weight, group: int = 32, filter: str | None = None) -> None:
        import os

        self.head = head
        self.last_candidates = 0
        filter = filter or os.environ.get("LONGDOC_GREEDY_FILTER") or None
        if filter not in (None, "int4", "int4c", "int8"):
            raise ValueError(f"GreedyHead filter must be int4, int4c or int8, not {filter!r}")
        self.int8: Int8Filter | None = None
        self.int4c: Int4Filter | None = None
        if filter in (None, "int4c") and head.shape[1] % 32 == 0 and (kernels := cpu_kernels()) is not None \
                and kernels.int4_filter_fast():
            self.int4c = Int4Filter(head)
        elif filter == "int4c":
            raise ValueError("GreedyHead filter int4c needs inputs in groups of 32 and the C kernels with AVX-512 "
                             "(longdoc_kernels.cpu)")
        if filter in (None, "int8"):
            try:
                self.int8 = Int8Filter(head)
            except (RuntimeError, AttributeError, NotImplementedError):  # a torch built without fbgemm
                if filter == "int8":
                    raise
        # the int4 kernel is compute-bound without AVX-512 (see Int8Filter): not built there unless asked
        wide = torch.backends.cpu.get_cpu_capability() not in ("DEFAULT", "AVX2", "NO AVX")
        self.int4 = Int4Weight(head, group) if filter == "int4" or (
            filter is None and self.int4c is None and (wide or self.int8 is None)) else None
        if self.int4c is not None and self.int8 is not None:
            self.timings = {"int4c": self._time(self._int4c_pass), "int8": self._time(self.int8.coarse)}
            if self.timings["int8"] < self.timings["int4c"]:
                self.int4c = None
            else:
                self.int8 = None
        if self.int4 is not None and self.int8 is not None:
            self.timings = {"int4": self._time(self._int4), "int8": self._time(self.int8.coarse)}
            if self.timings["int8"] < self.timings["int4"]:
                self.int4 = None
            else:
                self.int8 = None
        self.filter = "int4c" if self.int4c is not None else "int4" if self.int4 is not None else "int8"

    def _int4c_pass(self, x: torch.Tensor):
        return cpu_kernels().int4_filter(self.int4c.packed, self.int4c.shape[0], x)

    def _int4(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The int4 filter: (approx [B, out], bound [B, out]) for x [B, in] (bfloat16 values)."""
        coarse = self.int4.matmul(x)
        gap = x.float().norm(dim=1, keepdim=True) * self.int4.err_norm * (1 + _BF16_REL)  # the int8 result's rounding too
        return coarse, coarse.abs() * _BF16_REL + gap

    def _time(self, fn) -> float:
        """Seconds per call of a filter on one row (the best of three, after one)."""
        import time

        x = torch.randn(1, self.head.shape[1], generator=torch.Generator().manual_seed(0))
        x = x.to(torch.bfloat16).float()
        fn(x)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            fn(x)
            best = min(best, time.perf_counter() - t)
        return best

    @property
    def nbytes(self) -> int:
        if self.int4c is not None:
            return self.int4c.nbytes
        if self.int8 is not None:
            return self.int8.nbytes
        return self.int4.packed.numel() + 4 * self.int4.scale_zeros.shape[0] * self.int4.scale_zeros.shape[1] + \
            4 * self.int4.err_norm.numel()

    def argmax(self, x: torch.Tensor) -> list[int]:
        """The int8 output layer's argmax for every row of x [B, in] (the final hidden states)."""
        xb = x.to(torch.bfloat16)
        if self.int4c is not None:
            if (kernels := cpu_kernels()) is None:  # the kernels switched off since (tests): the whole product
                return torch._weight_int8pack_mm(xb, self.head.q, self.head.scale_bf16).float().argmax(-1).tolist()
            return [j for a in range(0, xb.shape[0], 64) for j in self._argmax_int4c(xb[a:a + 64], kernels)]
        if self.int4 is not None and (kernels := cpu_kernels()) is not None and xb.shape[0] <= 64:
            return self._argmax_c(xb, kernels)
        q, sc = self.head.q, self.head.scale_bf16
        coarse, bound = self._int4(xb) if self.int4 is not None else self.int8.coarse(xb.float())  # [B, V] each
        best = coarse.argmax(-1)  # [B]
        # index_select, not advanced indexing: on the CPU q[rows] of a few hundred rows takes ~150 us,
        # index_select ~7 (one thread, 341 rows of 640)
        floor = torch._weight_int8pack_mm(xb, q.index_select(0, best), sc.index_select(0, best)).float()
        floor = floor.diagonal()  # each row's exact logit at its filter argmax
        ceiling = coarse + bound + _SLACK
        keep = ceiling >= (floor - floor.abs() * _BF16_REL - _SLACK)[:, None]  # [B, V]
        rows = torch.nonzero(keep.any(0)).flatten()  # union over the batch, ascending
        self.last_candidates = int(rows.numel())
        if rows.numel() * FULL_HEAD_SHARE > coarse.shape[1]:
            # a flat distribution leaves too many candidates: gathering their rows costs more than
            # reading every row once (Gemma 3 270M, one thread: 237 ms for ~all 262,144 rows
            # gathered, against ~30 ms for the whole int8 product)
            exact = torch._weight_int8pack_mm(xb, self.head.q, self.head.scale_bf16)
            return exact.float().masked_fill(~keep, float("-inf")).argmax(-1).tolist()
        exact = torch._weight_int8pack_mm(xb, q.index_select(0, rows), sc.index_select(0, rows))
        exact = exact.float().masked_fill(~keep.index_select(1, rows), float("-inf"))
        return rows[exact.argmax(-1)].tolist()

    def _among(self, xb: torch.Tensor, rows: torch.Tensor, keep: torch.Tensor | None) -> list[int]:
        """Each row's argmax among the candidate rows `rows` by their int8 logits (keep [B, rows]: the
        candidates each row's own bound kept; None for one row): the rows gathered, or the whole
        product where they are more than 1 / FULL_HEAD_SHARE of the layer."""
        q, sc = self.head.q, self.head.scale_bf16
        if rows.numel() * FULL_HEAD_SHARE > q.shape[0]:
            exact = torch._weight_int8pack_mm(xb, q, sc).float().index_select(1, rows)
        else:
            exact = torch._weight_int8pack_mm(xb, q.index_select(0, rows), sc.index_select(0, rows)).float()
        if keep is not None:
            exact = exact.masked_fill(~keep, float("-inf"))
        return rows[exact.argmax(-1)].tolist()

    def _argmax_int4c(self, xb: torch.Tensor, kernels) -> list[int]:
        """`argmax` through Int4Filter (the C kernels, at most 64 rows): the filter's logits and
        argmax in one pass, the candidate rows in a second, then the candidates' int8 logits."""
        q, sc = self.head.q, self.head.scale_bf16
        f = self.int4c
        x = xb.float()
        coarse, best, stats = kernels.int4_filter(f.packed, f.shape[0], x)
        floor = torch._weight_int8pack_mm(xb, q.index_select(0, best), sc.index_select(0, best)).float().diagonal()
        xnorm, dnorm, l1 = x.norm(dim=1), stats[:, 0].contiguous(), stats[:, 1].contiguous()
        rows = kernels.int4_filter_candidates(coarse, f.err, f.wnorm, f.tol, xnorm, dnorm, l1, floor.contiguous(),
                                              _BF16_REL, _SLACK)
        self.last_candidates = int(rows.numel())
        b = xb.shape[0]
        if b > 1:  # the rows kept for some row of the batch: each row's own among them (the kernel's expression)
            c = coarse.index_select(1, rows)
            t1 = xnorm[:, None] * f.err[rows] + dnorm[:, None] * f.wnorm[rows]
            gap = (t1 + l1[:, None] * f.tol[rows]) * (1 + _BF16_REL)
            ceiling = c + (c.abs() * _BF16_REL + gap) + _SLACK
            keep = ceiling >= (floor - floor.abs() * _BF16_REL - _SLACK)[:, None]
        return self._among(xb, rows, keep if b > 1 else None)

    def _argmax_c(self, xb: torch.Tensor, kernels) -> list[int]:
        """`argmax` with the int4 filter, its argmax and its candidate rows through the C kernels
        (longdoc_kernels/cpu): the same rows as the torch expression (the same float32 operations in
        the same order), without its ten passes over [B, V] float32 tensors."""
        q, sc = self.head.q, self.head.scale_bf16
        w4 = self.int4
        coarse = torch._weight_int4pack_mm_for_cpu(xb, w4.packed, w4.group, w4.scale_zeros)  # [B, V] bfloat16
        best = kernels.bf16_argmax(coarse)
        floor = torch._weight_int8pack_mm(xb, q.index_select(0, best), sc.index_select(0, best)).float().diagonal()
        xnorm = xb.float().norm(dim=1)
        rows = kernels.int4_candidates(coarse, w4.err_norm, xnorm, floor.contiguous(), _BF16_REL, _SLACK)
        self.last_candidates = int(rows.numel())
        b = xb.shape[0]
        if b > 1:  # the rows kept for some row of the batch: each row's own among them, as `argmax` masks
            c = coarse.index_select(1, rows).float()
            ceiling = c + (c.abs() * _BF16_REL + xnorm[:, None] * w4.err_norm[rows] * (1 + _BF16_REL)) + _SLACK
            keep = ceiling >= (floor - floor.abs() * _BF16_REL - _SLACK)[:, None]
        return self._among(xb, rows, keep if b > 1 else None)


def linear(x: torch.Tensor, w: torch.Tensor | Int8Weight, b: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear for a float weight or an Int8Weight."""
    if isinstance(w, Int8Weight):
        y = w.matmul(x)
        return y + b if b is not None else y
    return F.linear(x, w, b)


def mlp_int8(x: torch.Tensor, gate_up: Int8Weight, down: Int8Weight, gelu: bool) -> torch.Tensor | None:
    """An MLP's decode-step rows through one C call (longdoc_kernels/cpu: the gate/up product, the
    activation times up, the down product), where the C kernels take these rows as
    `Int8Weight.matmul` would (float32, fewer rows than the GEMM paths take); else None."""
    if down.scale_k is None or (kernels := gate_up.c_kernels(x)) is None:
        return None
    return kernels.mlp_int8(x, gate_up.q, gate_up.scale_k, down.q, down.scale_k, gelu)


class Int8Linear(nn.Module):
    """Stands in for an nn.Linear whose weight is an Int8Weight."""

    def __init__(self, lin: nn.Linear) -> None:
        super().__init__()
        self.qweight = Int8Weight(lin.weight, gemm=True)
        self.bias = lin.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.qweight, self.bias)


def default_weights(mode: str | None, device: torch.device, default_model: bool, dtype_given: bool = False) -> str:
    """Resolve `LoadConfig.weights` (see the module docstring); default_model: the LLM was given
    no model (the packaged Gemma 3 270M GGUF); dtype_given: the caller named a dtype, which then
    holds for every weight (int8 would compute in bfloat16 whatever it asked for)."""
    if mode is not None:
        if mode not in WEIGHT_MODES:
            raise ValueError(f"weights must be one of {WEIGHT_MODES} or None, not {mode!r}")
        return mode
    return "int8" if device.type == "cpu" and default_model and not dtype_given else "float"


def quantize_model(model: nn.Module) -> None:
    """Replace the model's float weights by Int8Weights in place (CPU only): fused q/k/v and
    gate/up, o_proj and down_proj, the output layer and the (tied) embedding table."""
    from engine.model.layers import MLP, Attention

    for m in list(model.modules()):
        if isinstance(m, Attention):
            if m.qkv is not None:
                w, b = m.qkv
                m.qkv = (Int8Weight(w, gemm=True), b)
                for p in (m.q_proj, m.k_proj, m.v_proj):
                    p.weight = None  # the fused weight is the one read; its slices go with it
            else:
                m.q_proj, m.k_proj, m.v_proj = Int8Linear(m.q_proj), Int8Linear(m.k_proj), Int8Linear(m.v_proj)
            m.o_proj = Int8Linear(m.o_proj)
        elif isinstance(m, MLP):
            if m.gate_up is not None:
                m.gate_up = Int8Weight(m.gate_up, gemm=True)
                m.gate_proj.weight = m.up_proj.weight = None
            else:
                m.gate_proj, m.up_proj = Int8Linear(m.gate_proj), Int8Linear(m.up_proj)
            m.down_proj = Int8Linear(m.down_proj)
    model.quantize_embeddings()
