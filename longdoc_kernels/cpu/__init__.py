"""C kernels for the CPU's decode step (decode.c), built by the system C compiler when a CPU model
loads (engine/model/loader; else at first use) and loaded with ctypes; where they cannot be built
(no compiler, a failed build, `LONGDOC_CPU_KERNELS=0`) the engine keeps its torch path and
`status()` says why.

Why C: a CPU decode step of a small model is bound by the count of small operations as much as by
the bytes of weights: in torch every operation costs a dispatch of several microseconds whatever
its size (one RMSNorm of 640 values, six ATen ops on this torch, 19-50 us on the 2-core Xeon of
2026-12-06; a decode step of Gemma 3 270M runs 91 of them). A C call through ctypes costs ~2 us,
~8 us with its Python wrapper.

The build is `cc -O3 -march=native -fopenmp -shared -fPIC` into the engine's cache folder
(`$LONGDOC_CACHE`, else ~/.cache/longdoc; read from the environment, since kernels do not import
the engine), keyed by the source, the compiler's version, this CPU's flags and torch's version, so
a new machine or compiler rebuilds it (~1 s). It links the OpenMP runtime that torch has already
loaded (libgomp), so the kernels and torch share one thread pool.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import torch

_SOURCE = Path(__file__).with_name("decode.c")
_FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=gnu11", "-Wno-psabi"]
_LIB: ctypes.CDLL | None = None
_STATUS: str | None = None  # "ok: <path>" or why the kernels are off


def _cpu_id() -> str:
    """This CPU's model and instruction-set flags (what -march=native compiles for)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    keep = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))]
    return "\n".join(dict.fromkeys(keep))  # the first core's lines (all cores alike)


def _cache_dir() -> Path:
    root = os.environ.get("LONGDOC_CACHE")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "longdoc") / "cpu_kernels"


def _build() -> tuple[ctypes.CDLL | None, str]:
    if os.environ.get("LONGDOC_CPU_KERNELS") == "0":
        return None, "off (LONGDOC_CPU_KERNELS=0)"
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None, f"off (no kernels for {platform.machine()})"
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        return None, "off (no C compiler found: cc, gcc or clang; set CC)"
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"off ({cc} --version failed: {exc})"
    source = _SOURCE.read_bytes()
    key = hashlib.sha256(b"\0".join([source, version.encode(), " ".join(_FLAGS).encode(), _cpu_id().encode(),
                                     torch.__version__.encode()])).hexdigest()[:16]
    path = _cache_dir() / f"decode-{key}.so"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}.so")
        try:
            done = subprocess.run([cc, *_FLAGS, str(_SOURCE), "-o", str(tmp)], capture_output=True, text=True,
                                  timeout=120)
            if done.returncode != 0:
                msg = (done.stderr.strip().splitlines() or ["no output"])[-1]
                return None, f"off (building {_SOURCE.name} with {cc} failed: {msg})"
            os.replace(tmp, path)
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"off (building {_SOURCE.name} with {cc} failed: {exc})"
        finally:
            tmp.unlink(missing_ok=True)
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        return None, f"off (loading {path} failed: {exc})"
    f32, i64, ptr = ctypes.c_float, ctypes.c_int64, ctypes.c_void_p
    lib.ld_rms_norm.restype = None
    lib.ld_rms_norm.argtypes = [ptr, i64, ptr, i64, ptr, i64, i64, f32]
    lib.ld_add_rms_norm.restype = None
    lib.ld_add_rms_norm.argtypes = [ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, f32]
    lib.ld_int8_matmul.restype = ctypes.c_int
    lib.ld_int8_matmul.argtypes = [ptr, ptr, ptr, ptr, i64, i64, i64, ctypes.c_int]
    lib.ld_qk_rope_write.restype = ctypes.c_int
    lib.ld_qk_rope_write.argtypes = [ptr, i64, ptr, f32, ptr, ptr, i64, i64, i64, i64, ptr, ptr, ptr, ptr, i64]
    lib.ld_qk_rope_write_f16.restype = ctypes.c_int
    lib.ld_qk_rope_write_f16.argtypes = lib.ld_qk_rope_write.argtypes
    lib.ld_kv_f16_ok.restype = ctypes.c_int
    lib.ld_kv_f16_ok.argtypes = []
    lib.ld_bf16_argmax.restype = None
    lib.ld_bf16_argmax.argtypes = [ptr, i64, i64, ptr]
    lib.ld_int4_candidates.restype = i64
    lib.ld_int4_candidates.argtypes = [ptr, i64, i64, ptr, ptr, ptr, f32, f32, ptr, i64]
    lib.ld_mlp_int8.restype = ctypes.c_int
    lib.ld_mlp_int8.argtypes = [ptr, i64, i64, ptr, ptr, i64, ptr, ptr, i64, ctypes.c_int, ptr, ctypes.c_int]
    lib.ld_int4_filter_fast.restype = ctypes.c_int
    lib.ld_int4_filter_fast.argtypes = []
    if lib.ld_int4_filter_fast():
        lib.ld_int4_filter.restype = ctypes.c_int
        lib.ld_int4_filter.argtypes = [ptr, i64, i64, ptr, i64, ptr, ptr, ptr, ctypes.c_int]
        lib.ld_int4_filter_candidates.restype = i64
        lib.ld_int4_filter_candidates.argtypes = [ptr, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, f32, f32, ptr, i64]
    lib.ld_int16_activations.restype = ctypes.c_int
    lib.ld_int16_activations.argtypes = []
    lib.ld_decode_attention.restype = ctypes.c_int
    lib.ld_decode_attention.argtypes = [ptr, ptr, ptr, i64, ptr, i64, i64, ptr, i64, i64, i64, i64, i64, i64, f32,
                                        f32, ptr, ctypes.c_int]
    lib.ld_decode_attention_f16.restype = ctypes.c_int
    lib.ld_decode_attention_f16.argtypes = lib.ld_decode_attention.argtypes
    return lib, f"ok: {path}"


def lib() -> ctypes.CDLL | None:
    """The built kernels, or None (see status()). Built once per process (and once per machine)."""
    global _LIB, _STATUS
    if _STATUS is None:
        _LIB, _STATUS = _build()
        if _LIB is None and os.environ.get("LONGDOC_CPU_KERNELS") != "0":
            warnings.warn(f"longdoc CPU kernels {_STATUS}; the CPU decode step keeps its slower torch path",
                          stacklevel=2)
    return _LIB


def available():
    """This module where its kernels are built here, else None (the callers' torch paths run)."""
    return sys.modules[__name__] if lib() is not None else None


def status() -> str:
    lib()
    return _STATUS or ""


def reset() -> None:
    """Forget the loaded state, so the next lib() decides again (tests)."""
    global _LIB, _STATUS
    _LIB, _STATUS = None, None


_F32 = torch.float32


def _ok(*ts: torch.Tensor) -> bool:
    return all(t.dtype == torch.float32 and t.device.type == "cpu" for t in ts)


def kv_f16() -> bool:
    """Whether the kernels read and write 16-bit (IEEE half) K/V pools here: decode_attention and
    qk_rope_write take float16 pools (converted exactly to float32 as read; rounded to nearest even
    as written), on CPUs with the F16C conversions (AVX-512 has them)."""
    return lib() is not None and bool(lib().ld_kv_f16_ok())


def _pools_ok(k_cache: torch.Tensor, v_cache: torch.Tensor) -> bool:
    """Pools the kernels take: float32, or float16 where kv_f16(), both alike, on the CPU."""
    if k_cache.dtype != v_cache.dtype or k_cache.device.type != "cpu" or v_cache.device.type != "cpu":
        return False
    return k_cache.dtype == torch.float32 or (k_cache.dtype == torch.float16 and kv_f16())


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dimension of x [..., n, d]: each row times w [d], or row j of every
    [n, d] slice times w[j] for w [n, d] (a weight per head); w contiguous. The float32 arithmetic
    of `F.rms_norm(x, (d,), None, eps) * w`, up to the order of the sum of squares. x float32 on
    the CPU; its rows may lie at one stride (q/k heads as a view of the fused projection), else
    they are copied together first."""
    d = x.shape[-1]
    if x.dtype is _F32 and w.dtype is _F32 and w.dim() == 1 and w.shape[0] == d and x.is_contiguous() \
            and w.is_contiguous() and not x.is_cuda:  # a decode step's rows: the fewest checks (~5 us a call)
        out = torch.empty_like(x)
        lib().ld_rms_norm(x.data_ptr(), d, w.data_ptr(), 1, out.data_ptr(), x.numel() // d, d, eps)
        return out
    if x.dtype != torch.float32 or w.dtype != torch.float32 or x.device.type != "cpu":
        raise ValueError(f"rms_norm takes float32 CPU tensors, not {x.dtype} and {w.dtype}")
    w_rows = w.numel() // d
    if w.shape[-1] != d or not w.is_contiguous() or (w_rows != 1 and (x.dim() < 2 or x.shape[-2] != w_rows)):
        raise ValueError(f"rms_norm: weight {tuple(w.shape)} does not fit x {tuple(x.shape)}")
    try:
        rows = x.view(-1, d)  # the rows at one stride, without a copy
    except RuntimeError:
        rows = x.reshape(-1, d)  # a copy, contiguous
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    out = torch.empty(x.shape, dtype=torch.float32)
    lib().ld_rms_norm(rows.data_ptr(), rows.stride(0), w.data_ptr(), w_rows, out.data_ptr(), rows.shape[0], d, eps)
    return out


def add_rms_norm(x: torch.Tensor, a: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor | None,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(x + rms_norm(a) * w1, rms_norm(that) * w2): the residual add between two norms in one call;
    the second is None when w2 is. x, a [rows, d] float32 contiguous; w1, w2 [d]."""
    if not (x.dtype is _F32 and a.dtype is _F32 and w1.dtype is _F32 and (w2 is None or w2.dtype is _F32)
            and not x.is_cuda and not a.is_cuda and x.shape == a.shape and x.dim() == 2):
        raise ValueError("add_rms_norm takes float32 CPU tensors x, a [rows, d] of one shape")
    x, a = x.contiguous(), a.contiguous()
    x_out = torch.empty_like(x)
    h_out = torch.empty_like(x) if w2 is not None else None
    lib().ld_add_rms_norm(x.data_ptr(), a.data_ptr(), w1.data_ptr(),
                                    w2.data_ptr() if w2 is not None else None, x_out.data_ptr(),
                                    h_out.data_ptr() if h_out is not None else None, x.shape[0], x.shape[1], eps)
    return x_out, h_out


def qk_rope_write(qkv: torch.Tensor, heads: int, kv_heads: int, w: torch.Tensor | None, eps: float,
                  cos: torch.Tensor, sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slots: torch.Tensor) -> torch.Tensor | None:
    """The attention's small operations between the q/k/v product and the attention, in one call:
    from qkv [T, (heads + 2 kv_heads) d] (the fused projection's output), q and k normed per head
    (w [heads + kv_heads, d]: each head's norm weight; None: no q/k norm), rotated by RoPE (cos/sin
    [T, d], rotate-half), and the rotated k and the v heads written to the pools k_cache / v_cache
    ([blocks, block_size, kv_heads, d], float32, or float16 where kv_f16(): rounded to nearest even)
    at slots [T]. Returns the rotated q and k, [T, heads + kv_heads, d]; None where the kernel does
    not apply (dtypes, layouts, a slot outside the pool: nothing written, the caller's torch path
    runs). The same float32 arithmetic as `rms_norm`, then `engine.model.rope.apply_rope_rolled`,
    then `index_copy_` (of the values in the pools' dtype)."""
    t = qkv.shape[0]
    nb, bs, kvh, d = k_cache.shape
    if not _ok(qkv, cos, sin) or not _pools_ok(k_cache, v_cache) or (w is not None and not _ok(w)) or kvh != kv_heads \
            or qkv.dim() != 2 or qkv.stride(1) != 1 or qkv.shape[1] != (heads + 2 * kvh) * d \
            or cos.shape != (t, d) or sin.shape != (t, d) or not (cos.is_contiguous() and sin.is_contiguous()) \
            or not (k_cache.is_contiguous() and v_cache.is_contiguous()) or v_cache.shape != k_cache.shape \
            or (w is not None and (w.shape != (heads + kvh, d) or not w.is_contiguous())) \
            or slots.dtype != torch.int64 or slots.shape != (t,) or not slots.is_contiguous() or d % 2:
        return None
    out = torch.empty(t, heads + kvh, d, dtype=torch.float32)
    fn = lib().ld_qk_rope_write_f16 if k_cache.dtype == torch.float16 else lib().ld_qk_rope_write
    rc = fn(qkv.data_ptr(), qkv.stride(0), w.data_ptr() if w is not None else None, eps, cos.data_ptr(), sin.data_ptr(),
            t, heads, kvh, d, out.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), slots.data_ptr(), nb * bs)
    return out if rc == 0 else None


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, tables: torch.Tensor,
                     kv_lens: torch.Tensor, scale: float, window: int | None = None,
                     softcap: float | None = None) -> torch.Tensor | None:
    """One query row per sequence over its paged keys: q [n, heads, d] float32, k/v pools [blocks,
    block_size, kv_heads, d] float32, or float16 where kv_f16() (each value widened exactly as read:
    the float32 arithmetic of float32 pools holding the same values), tables [n, max_blocks] int64
    block ids (a row may be repeated with stride 0: the rows of one sequence's speculative drafts),
    kv_lens [n] (query i sits at position kv_lens[i] - 1 and reads keys from max(0, kv_lens[i] -
    window) on). Returns [n, heads, d] float32, or None where the kernel does not apply (a block id
    outside the hot pool, such as a warm-tier entry, or other dtypes): the caller's torch path then
    runs."""
    if not _ok(q) or not _pools_ok(k_cache, v_cache) or not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        return None
    n, h, d = q.shape
    nb, bs, kvh, dk = k_cache.shape
    if dk != d or tables.dtype != torch.int64 or tables.dim() != 2 or tables.stride(1) != 1:
        return None
    q = q.contiguous()
    lens = kv_lens.to(torch.int64).contiguous()
    out = torch.empty_like(q)
    if tables.shape[0] != n or lens.numel() != n:
        raise ValueError(f"decode_attention: {n} queries, {tables.shape[0]} table rows, {lens.numel()} lengths")
    fn = lib().ld_decode_attention_f16 if k_cache.dtype == torch.float16 else lib().ld_decode_attention
    rc = fn(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), nb, tables.data_ptr(), tables.stride(0),
            tables.shape[1], lens.data_ptr(), n, h, kvh, d, bs, window or 0, scale, softcap or 0.0, out.data_ptr(),
            torch.get_num_threads())
    return out if rc == 0 else None


def int16_activations() -> bool:
    """Whether the int8 products (int8_matmul, mlp_int8) round each activation row to int16 (with
    AVX2 and above: `round(x * (1 / s))`, s = max|x| / 32767 a row, the products exact in int32) rather
    than multiply float32 activations."""
    return bool(lib().ld_int16_activations())


def int16_rows(x: torch.Tensor) -> torch.Tensor:
    """x [T, k] float32 as the int8 products see it where int16_activations(): each row rounded to
    int16 steps of its max|x| / 32767 (the kernel's float32 operations), as float32 again."""
    m = x.abs().amax(-1, keepdim=True)
    s = torch.where(m > 0, m / 32767.0, torch.ones_like(m))
    return torch.round(x * (1.0 / s)) * s


def int8_matmul(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [T, k] float32 @ (q [n, k] int8 rows times scale [n] float32).T -> [T, n] float32, the
    layers' products of a decode step: with AVX2 and above the activations rounded to int16 a row
    (`int16_rows`; ~250 times finer than the int8 weights) and the products summed exactly in
    int32, else int8 weights widened in registers times float32 activations. Either way not the
    bfloat16 rounding `torch._weight_int8pack_mm` needs. For a few rows: each weight row is read
    once for all T rows, but its products are not blocked for many."""
    if x.dtype is not _F32 or q.dtype is not torch.int8 or scale.dtype is not _F32 or x.is_cuda:
        raise ValueError(f"int8_matmul takes float32 x, int8 q, float32 scale on the CPU, not {x.dtype}, {q.dtype}, "
                         f"{scale.dtype}")
    if x.dim() != 2 or x.shape[1] != q.shape[1] or scale.shape[0] != q.shape[0]:
        raise ValueError(f"int8_matmul: x {tuple(x.shape)} does not fit q {tuple(q.shape)}, scale {tuple(scale.shape)}")
    x = x.contiguous()
    out = torch.empty(x.shape[0], q.shape[0], dtype=torch.float32)
    if lib().ld_int8_matmul(q.data_ptr(), scale.data_ptr(), x.data_ptr(), out.data_ptr(), q.shape[0], q.shape[1],
                            x.shape[0], torch.get_num_threads()) != 0:
        raise MemoryError(f"int8_matmul: no buffer for {x.shape[0]} x {x.shape[1]} activations")
    return out


def mlp_int8(x: torch.Tensor, q_gu: torch.Tensor, s_gu: torch.Tensor, q_dn: torch.Tensor, s_dn: torch.Tensor,
             gelu: bool) -> torch.Tensor | None:
    """A decode step's MLP in one call: (act(x @ gate^T) * (x @ up^T)) @ down^T with int8 weights,
    q_gu [2f, k] (gate rows, then up rows) and q_dn [n, f] int8 with float32 scales s_gu [2f], s_dn
    [n]; act: gelu in its tanh form (gelu=True) or silu, through a vectorised exp (~1e-7 relative
    to torch's, not bit for bit). x [T, k] float32. Returns [T, n] float32, or None where its
    buffers cannot be had."""
    t, k = x.shape
    f = q_gu.shape[0] // 2
    if not (x.dtype is _F32 and q_gu.dtype is torch.int8 and q_dn.dtype is torch.int8 and s_gu.dtype is _F32
            and s_dn.dtype is _F32 and not x.is_cuda and q_gu.shape == (2 * f, k) and q_dn.shape[1] == f
            and s_gu.shape == (2 * f,) and s_dn.shape == (q_dn.shape[0],)):
        raise ValueError(f"mlp_int8: x {tuple(x.shape)} float32, q_gu {tuple(q_gu.shape)}, q_dn {tuple(q_dn.shape)} "
                         "int8 and their float32 scales")
    x = x.contiguous()
    out = torch.empty(t, q_dn.shape[0], dtype=torch.float32)
    rc = lib().ld_mlp_int8(x.data_ptr(), t, k, q_gu.data_ptr(), s_gu.data_ptr(), f, q_dn.data_ptr(),
                                     s_dn.data_ptr(), q_dn.shape[0], int(gelu), out.data_ptr(), torch.get_num_threads())
    return out if rc == 0 else None


def bf16_argmax(x: torch.Tensor) -> torch.Tensor:
    """torch.argmax(x, -1) of a [B, V] bfloat16 CPU matrix (the first index among ties), int64 [B]."""
    if x.dtype != torch.bfloat16 or x.dim() != 2 or x.device.type != "cpu":
        raise ValueError(f"bf16_argmax takes a [B, V] bfloat16 CPU tensor, not {x.dtype} {tuple(x.shape)}")
    x = x.contiguous()
    best = torch.empty(x.shape[0], dtype=torch.int64)
    lib().ld_bf16_argmax(x.data_ptr(), x.shape[0], x.shape[1], best.data_ptr())
    return best


def int4_candidates(coarse: torch.Tensor, err: torch.Tensor, xnorm: torch.Tensor, floor: torch.Tensor, rel: float,
                    slack: float) -> torch.Tensor | None:
    """The rows GreedyHead keeps after its int4 filter (engine/model/quant.py), in one pass: the
    ascending ids j where, for some row b, coarse[b, j] + |coarse[b, j]| rel + xnorm[b] err[j]
    (1 + rel) + slack >= floor[b] - |floor[b]| rel - slack, computed in float32 in that order, as
    the torch expression does. coarse [B, V] bfloat16, err [V], xnorm [B], floor [B] float32.
    None for more than 64 rows."""
    b, v = coarse.shape
    if coarse.dtype != torch.bfloat16 or not _ok(err, xnorm, floor) or err.shape != (v,) or xnorm.shape != (b,) \
            or floor.shape != (b,):
        raise ValueError("int4_candidates: coarse [B, V] bfloat16, err [V], xnorm [B], floor [B] float32")
    if b > 64:
        return None
    coarse, err, xnorm, floor = coarse.contiguous(), err.contiguous(), xnorm.contiguous(), floor.contiguous()
    cap = 4096
    while True:
        out = torch.empty(cap, dtype=torch.int64)
        n = lib().ld_int4_candidates(coarse.data_ptr(), b, v, err.data_ptr(), xnorm.data_ptr(), floor.data_ptr(), rel,
                                     slack, out.data_ptr(), cap)
        if n <= cap:
            return out[:n]
        cap = n


INT4_BLOCK = 320  # bytes a block of 16 rows and one group of 32 inputs in int4_filter's layout


def int4_filter_fast() -> bool:
    """Whether int4_filter runs here (AVX-512: its kernel is written for 16 rows a vector)."""
    return bool(lib().ld_int4_filter_fast())


def int4_filter(packed: torch.Tensor, n: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The coarse logits of an int4 output layer in int4_filter's layout (packed uint8 [ceil(n / 16),
    groups, INT4_BLOCK]: see ld_int4_filter in decode.c) for x [B, 32 groups] float32, B <= 64.
    Returns (coarse [B, n] float32, best [B] int64: each row's first largest, stats [B, 2]: the
    norm of the activations' int16 rounding error and their rounded L1 norm)."""
    nb, groups, blk = packed.shape
    b, k = x.shape
    if packed.dtype != torch.uint8 or blk != INT4_BLOCK or k != 32 * groups or nb != (n + 15) // 16 \
            or not packed.is_contiguous() or not _ok(x) or not 1 <= b <= 64:
        raise ValueError(f"int4_filter: packed {tuple(packed.shape)} {packed.dtype} for {n} rows, x {tuple(x.shape)}")
    x = x.contiguous()
    coarse = torch.empty(b, n, dtype=torch.float32)
    best = torch.empty(b, dtype=torch.int64)
    stats = torch.empty(b, 2, dtype=torch.float32)
    if lib().ld_int4_filter(packed.data_ptr(), n, groups, x.data_ptr(), b, coarse.data_ptr(), best.data_ptr(),
                            stats.data_ptr(), torch.get_num_threads()) != 0:
        raise MemoryError("int4_filter: no buffers")
    return coarse, best, stats


def int4_filter_candidates(coarse: torch.Tensor, err: torch.Tensor, wnorm: torch.Tensor, tol: torch.Tensor,
                           xnorm: torch.Tensor, dnorm: torch.Tensor, l1: torch.Tensor, floor: torch.Tensor,
                           rel: float, slack: float) -> torch.Tensor:
    """The ascending ids j where, for some row b, coarse[b, j] + (|coarse[b, j]| rel + (xnorm[b] err[j]
    + dnorm[b] wnorm[j] + l1[b] tol[j]) (1 + rel)) + slack >= floor[b] - |floor[b]| rel - slack, in
    float32 in that order (as the torch expression). coarse [B, V]; err, wnorm, tol [V]; xnorm,
    dnorm, l1, floor [B]; all float32, B <= 64."""
    b, v = coarse.shape
    if not _ok(coarse, err, wnorm, tol, xnorm, dnorm, l1, floor) or not b <= 64 \
            or any(t.shape != (v,) for t in (err, wnorm, tol)) or any(t.shape != (b,) for t in (xnorm, dnorm, l1, floor)):
        raise ValueError("int4_filter_candidates: coarse [B, V], err/wnorm/tol [V], xnorm/dnorm/l1/floor [B] float32")
    ts = [t.contiguous() for t in (coarse, err, wnorm, tol, xnorm, dnorm, l1, floor)]
    cap = 4096
    while True:
        out = torch.empty(cap, dtype=torch.int64)
        n = lib().ld_int4_filter_candidates(ts[0].data_ptr(), b, v, *(t.data_ptr() for t in ts[1:]), rel, slack,
                                            out.data_ptr(), cap)
        if n <= cap:
            return out[:n]
        cap = n
