/* C kernels for the CPU decode step (longdoc_kernels/cpu/__init__.py builds this file with the
 * system C compiler, -O3 -march=native -fopenmp, and loads it with ctypes).
 *
 * A CPU decode step of a small model is a few hundred small operations; in torch each costs a
 * dispatch of several microseconds whatever its size (an RMSNorm of 640 values: six ATen ops, 19-50
 * us on the 2-core Xeon of 2026-12-06) and one attention over a few thousand cached keys is a dozen
 * ops. These kernels do the same float32 arithmetic in one call each. Every output is computed by
 * one thread in a fixed order, so results do not depend on the thread count. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#if defined(__AVX512F__) || defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif
/* 16-bit K/V pages (IEEE half) are read and written through the F16C conversions (AVX-512 has them) */
#if defined(__AVX512F__) || defined(__F16C__)
#define LD_F16 1
#else
#define LD_F16 0
#endif

/* one row of ld_rms_norm: yi = xi / sqrt(mean(xi^2) + eps) * wi */
static void ld_norm_row(const float *xi, const float *wi, float *yi, int64_t dim, float eps) {
  float ss = 0.0f;
  for (int64_t k = 0; k < dim; k++) ss += xi[k] * xi[k];
  const float r = 1.0f / sqrtf(ss / (float)dim + eps);
  for (int64_t k = 0; k < dim; k++) yi[k] = (xi[k] * r) * wi[k];
}

/* y[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * w[i % w_rows, :] for i < rows; x rows `x_stride`
 * floats apart, y contiguous. */
void ld_rms_norm(const float *x, int64_t x_stride, const float *w, int64_t w_rows, float *y, int64_t rows,
                 int64_t dim, float eps) {
  for (int64_t i = 0; i < rows; i++) ld_norm_row(x + i * x_stride, w + (i % w_rows) * dim, y + i * dim, dim, eps);
}

/* The residual add between Gemma's sandwich norms, in one call: x_out = x + rms_norm(a) * w1, then
 * h_out = rms_norm(x_out) * w2 (skipped when w2 is NULL). All [rows, dim] contiguous. */
void ld_add_rms_norm(const float *x, const float *a, const float *w1, const float *w2, float *x_out, float *h_out,
                     int64_t rows, int64_t dim, float eps) {
  for (int64_t i = 0; i < rows; i++) {
    const float *xi = x + i * dim, *ai = a + i * dim;
    float *xo = x_out + i * dim;
    float ss = 0.0f;
    for (int64_t k = 0; k < dim; k++) ss += ai[k] * ai[k];
    float r = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int64_t k = 0; k < dim; k++) xo[k] = xi[k] + (ai[k] * r) * w1[k];
    if (!w2) continue;
    float *ho = h_out + i * dim;
    ss = 0.0f;
    for (int64_t k = 0; k < dim; k++) ss += xo[k] * xo[k];
    r = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int64_t k = 0; k < dim; k++) ho[k] = (xo[k] * r) * w2[k];
  }
}

/* y rotated by RoPE into o (see ld_qk_rope_write): each product rounded, then the sum */
__attribute__((noinline, optimize("fp-contract=off"))) static void ld_rope_row(const float *y, const float *c,
                                                                               const float *s, float *o, int64_t d) {
  const int64_t half = d / 2;
  for (int64_t e = 0; e < half; e++) {
    const float a = y[e] * c[e], b = y[e + half] * -s[e];
    o[e] = a + b;
  }
  for (int64_t e = half; e < d; e++) {
    const float a = y[e] * c[e], b = y[e - half] * s[e];
    o[e] = a + b;
  }
}

/* q and k of a few rows straight from the fused q/k/v projection, and the cache write, in one call:
 * row t < T of qkv (rows `ld` floats apart) holds h q heads, kvh k heads and kvh v heads of d
 * floats. Each q/k head is RMS-normed with its weight row w[j] (j < h + kvh; no norm where w is
 * NULL), then rotated by RoPE in the rotate-half convention with cos/sin [T, d]: y[e] * cos[e] +
 * y[e + d/2] * -sin[e] for e < d/2, y[e] * cos[e] + y[e - d/2] * sin[e] above (each product
 * rounded, then the sum: torch's `x * cos + roll(x) * signed_sin`, no fused multiply-add), into
 * qk_out [T, h + kvh, d]. Then row t's rotated k heads and its v heads go to slot slots[t] of the
 * pools k_cache / v_cache ([n_slots, kvh, d]): float32, or IEEE half where f16 (rounded to nearest
 * even, as torch's .half()). Returns 0, or -1 (nothing written) where a slot is outside 0 ..
 * n_slots - 1, or f16 without F16C. */
static int ld_qk_rope_write_t(const float *qkv, int64_t ld, const float *w, float eps, const float *cos,
                              const float *sin, int64_t T, int64_t h, int64_t kvh, int64_t d, float *qk_out,
                              void *k_cache, void *v_cache, const int64_t *slots, int64_t n_slots, const int f16) {
  const int64_t nh = h + kvh;
  if (f16 && !LD_F16) return -1;
  for (int64_t t = 0; t < T; t++)
    if (slots[t] < 0 || slots[t] >= n_slots) return -1;
  float *y = (float *)malloc(sizeof(float) * d);
  if (!y) return -1;
  for (int64_t t = 0; t < T; t++) {
    const float *row = qkv + t * ld;
    for (int64_t j = 0; j < nh; j++) {
      const float *x = row + j * d;
      if (w) ld_norm_row(x, w + j * d, y, d, eps);
      ld_rope_row(w ? y : x, cos + t * d, sin + t * d, qk_out + (t * nh + j) * d, d);
    }
    const float *kr = qk_out + (t * nh + h) * d, *vr = row + nh * d;
    if (!f16) {
      float *kc = (float *)k_cache + slots[t] * kvh * d, *vc = (float *)v_cache + slots[t] * kvh * d;
      for (int64_t e = 0; e < kvh * d; e++) {
        kc[e] = kr[e];
        vc[e] = vr[e];
      }
    } else {
#if LD_F16
      uint16_t *kc = (uint16_t *)k_cache + slots[t] * kvh * d, *vc = (uint16_t *)v_cache + slots[t] * kvh * d;
      for (int64_t e = 0; e < kvh * d; e++) {
        kc[e] = _cvtss_sh(kr[e], _MM_FROUND_TO_NEAREST_INT);
        vc[e] = _cvtss_sh(vr[e], _MM_FROUND_TO_NEAREST_INT);
      }
#endif
    }
  }
  free(y);
  return 0;
}

int ld_qk_rope_write(const float *qkv, int64_t ld, const float *w, float eps, const float *cos, const float *sin,
                     int64_t T, int64_t h, int64_t kvh, int64_t d, float *qk_out, float *k_cache, float *v_cache,
                     const int64_t *slots, int64_t n_slots) {
  return ld_qk_rope_write_t(qkv, ld, w, eps, cos, sin, T, h, kvh, d, qk_out, k_cache, v_cache, slots, n_slots, 0);
}

int ld_qk_rope_write_f16(const float *qkv, int64_t ld, const float *w, float eps, const float *cos, const float *sin,
                         int64_t T, int64_t h, int64_t kvh, int64_t d, float *qk_out, uint16_t *k_cache,
                         uint16_t *v_cache, const int64_t *slots, int64_t n_slots) {
  return ld_qk_rope_write_t(qkv, ld, w, eps, cos, sin, T, h, kvh, d, qk_out, k_cache, v_cache, slots, n_slots, 1);
}

#define LD_CHUNK 256 /* keys per task: a sequence's keys are split into chunks computed in parallel */
#define LD_MAX_G 64  /* query heads per kv head handled (GQA group) */
#define LD_KEYS_AHEAD 4 /* keys a K row is prefetched ahead in the scores */
#if defined(__AVX2__) && !defined(__AVX512F__)
#define LD_VEC 8 /* floats per vector below: one AVX2 register (vectors of 16 compiled for AVX2 ran the
                    attention 5x slower than the AVX-512 build on the same core, 2026-12-07) */
#else
#define LD_VEC 16 /* floats per vector below: one AVX-512 register */
#endif
typedef float ld_vf __attribute__((vector_size(LD_VEC * sizeof(float)), aligned(sizeof(float))));
typedef float ld_v8 __attribute__((vector_size(8 * sizeof(float))));

/* LD_VEC int8 values widened to float32 (gcc scalarises __builtin_convertvector of int8 vectors) */
static inline ld_vf ld_load_i8(const int8_t *p) {
  ld_vf r;
#if defined(__AVX512F__)
  const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
  __builtin_memcpy(&r, &v, sizeof r);
#elif defined(__AVX2__)
  const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
  __builtin_memcpy(&r, &v, sizeof r);
#else
  for (int e = 0; e < LD_VEC; e++) r[e] = (float)p[e];
#endif
  return r;
}

/* The K/V pools' values: float32, or IEEE half (the CPU's 16-bit pages, kv_f16) widened exactly to
 * float32 as they are read. ld_kv_vec: LD_VEC values from element i of pool p; ld_kv_one: one. */
static inline __attribute__((always_inline)) ld_vf ld_kv_vec(const void *p, int64_t i, const int f16) {
  if (!f16) return *(const ld_vf *)((const float *)p + i);
  ld_vf r;
#if LD_F16 && LD_VEC == 16
  const __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
  __builtin_memcpy(&r, &v, sizeof r);
#elif LD_F16
  const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
  __builtin_memcpy(&r, &v, sizeof r);
#else
  for (int e = 0; e < LD_VEC; e++) r[e] = 0.0f; /* not reached: the f16 entry points refuse without F16C */
#endif
  return r;
}

static inline __attribute__((always_inline)) float ld_kv_one(const void *p, int64_t i, const int f16) {
  if (!f16) return ((const float *)p)[i];
#if LD_F16
  return _cvtsh_ss(((const uint16_t *)p)[i]);
#else
  return 0.0f;
#endif
}

/* whether this build reads and writes 16-bit K/V pages (F16C or AVX-512 conversions) */
int ld_kv_f16_ok(void) { return LD_F16; }

/* the sum of a vector's lanes as a tree of adds (lanes i and i + 8, then i and i + 4, ...) */
static inline float ld_hsum(ld_vf a) {
  ld_v8 b;
#if LD_VEC == 16
  ld_v8 lo, hi;
  __builtin_memcpy(&lo, &a, sizeof lo);
  __builtin_memcpy(&hi, (const char *)&a + sizeof lo, sizeof hi);
  b = lo + hi;
#else
  __builtin_memcpy(&b, &a, sizeof b);
#endif
  float f[8];
  __builtin_memcpy(f, &b, sizeof f);
  return ((f[0] + f[4]) + (f[2] + f[6])) + ((f[1] + f[5]) + (f[3] + f[7]));
}

#if defined(__AVX512F__)
/* exp(x) for 16 lanes: 2^n e^r, |r| <= ln2 / 2, a degree-7 Taylor polynomial (relative error ~1e-8
 * before rounding), n applied by scalef; x clamped to +-88 */
static inline __m512 ld_exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-88.0f)), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

/* 1 / (1 + exp(-z)) for 16 lanes */
static inline __m512 ld_sigmoid16(__m512 z) {
  const __m512 e = ld_exp16(_mm512_sub_ps(_mm512_setzero_ps(), z));
  return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}
#endif

/* acc_r[e] = sum_j w_r[j - lo] V[j][e] for nr <= 4 query heads r (weights w_r = w + r LD_CHUNK; out
 * rows acc_r = acc + r (d + 2)) over keys lo .. hi - 1 of one kv head: 64 values of V a pass, each
 * read once for all nr heads; the rest of a row (d not a multiple of 64) one value at a time. V
 * float32, or half where f16 (widened as read) */
static inline __attribute__((always_inline)) void ld_weighted_v(const int nr, const float *w, float *acc,
                                                                  const void *v_cache, const int64_t *table, int64_t lo,
                                                                  int64_t hi, int64_t bs, int64_t kvh, int64_t kv,
                                                                  int64_t d, const int f16) {
  int64_t e0 = 0;
  for (; e0 + 4 * LD_VEC <= d; e0 += 4 * LD_VEC) {
    ld_vf a[4][4] = {{{0}}};
    for (int64_t j = lo; j < hi;) {
      const int64_t off = j % bs, run = (bs - off < hi - j) ? bs - off : hi - j;
      const int64_t vb = ((table[j / bs] * bs + off) * kvh + kv) * d + e0;
      for (int64_t o = 0; o < run; o++) {
        const int64_t vr = vb + o * kvh * d;
        const ld_vf v0 = ld_kv_vec(v_cache, vr, f16), v1 = ld_kv_vec(v_cache, vr + LD_VEC, f16),
                    v2 = ld_kv_vec(v_cache, vr + 2 * LD_VEC, f16), v3 = ld_kv_vec(v_cache, vr + 3 * LD_VEC, f16);
        for (int r = 0; r < nr; r++) {
          const float wj = w[r * LD_CHUNK + j + o - lo];
          a[r][0] += wj * v0;
          a[r][1] += wj * v1;
          a[r][2] += wj * v2;
          a[r][3] += wj * v3;
        }
      }
      j += run;
    }
    for (int r = 0; r < nr; r++)
      for (int u = 0; u < 4; u++) *(ld_vf *)(acc + r * (d + 2) + e0 + u * LD_VEC) = a[r][u];
  }
  for (int64_t e = e0; e < d; e++)
    for (int r = 0; r < nr; r++) {
      float sum = 0.0f;
      for (int64_t j = lo; j < hi; j++)
        sum = fmaf(w[r * LD_CHUNK + j - lo], ld_kv_one(v_cache, ((table[j / bs] * bs + j % bs) * kvh + kv) * d + e, f16),
                   sum); /* fmaf: one rounding whichever pool type this copy of the loop reads */
      acc[r * (d + 2) + e] = sum;
    }
}

/* Attention of one query row per sequence over its paged K/V (float32 pools [blocks, bs, kvh, d]),
 * the decode step's attention: sequence i's query q[i] [h, d] reads keys first_i .. kv_lens[i] - 1
 * (first_i = kv_lens[i] - window where window > 0) through its block-table row tables + i *
 * table_stride; query head j reads kv head j / (h / kvh). Scores times `scale`, soft-capped where
 * softcap > 0 (cap * tanh(s / cap)), softmax, then the weighted sum of V, all float32. The keys
 * are split in chunks of LD_CHUNK computed in parallel, each to a partial (max, sum, weighted V),
 * then merged per head (flash-decoding). Consecutive rows with one table (table_stride 0: the rows
 * of one sequence's speculative drafts) and the same first key form a group whose chunk is one
 * task: each kv head's slice of the chunk is read from memory once and from cache for the group's
 * other rows (four rows at 8K keys had read the K/V four times; the time saved is small, each row's
 * arithmetic being most of its cost, BENCHMARKS.md 2026-12-07). Every row's operations are those
 * of a call with that row alone, in the same order, so its result is bit for bit the decode
 * step's. Returns 0, or -1 (nothing written) where a block id the keys need is outside 0 ..
 * n_blocks - 1 (a warm or missing entry: the caller's torch path) or a table row (table_width
 * entries) is too short for its length. */
static inline __attribute__((always_inline)) int ld_decode_attention_t(
    const float *q, const void *k_cache, const void *v_cache, int64_t n_blocks, const int64_t *tables,
    int64_t table_stride, int64_t table_width, const int64_t *kv_lens, int64_t n, int64_t h, int64_t kvh, int64_t d,
    int64_t bs, int64_t window, float scale, float softcap, float *out, int nthreads, const int f16) {
  const int64_t esz = f16 ? 2 : 4, line = 64 / esz; /* bytes a K/V value; values a cache line */
  const int64_t g = h / kvh;
  if (g > LD_MAX_G || g * kvh != h) return -1;
  /* per row: its first key, its chunks' first partial (base) and count; groups: rows gs[k] ..
     gs[k + 1] - 1, g_chunks[k] chunks; tasks: (group, chunk) pairs */
  int64_t *row_first = (int64_t *)malloc(sizeof(int64_t) * (5 * n + 1));
  if (!row_first) return -1;
  int64_t *row_base = row_first + n, *row_count = row_base + n, *gs = row_count + n, *g_chunks = gs + n + 1,
          n_groups = 0, n_parts = 0, n_tasks = 0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t len = kv_lens[i], first = window > 0 && len > window ? len - window : 0;
    if (len <= 0 || (len + bs - 1) / bs > table_width) {
      free(row_first);
      return -1;
    }
    for (int64_t b = first / bs; b < (len + bs - 1) / bs; b++) {
      const int64_t id = tables[i * table_stride + b];
      if (id < 0 || id >= n_blocks) {
        free(row_first);
        return -1;
      }
    }
    row_first[i] = first;
    row_base[i] = n_parts;
    row_count[i] = (len - first + LD_CHUNK - 1) / LD_CHUNK;
    n_parts += row_count[i];
    if (i == 0 || table_stride != 0 || first != row_first[i - 1]) gs[n_groups++] = i;
  }
  gs[n_groups] = n;
  for (int64_t k = 0; k < n_groups; k++) { /* a group's chunks: its longest row's */
    g_chunks[k] = 0;
    for (int64_t i = gs[k]; i < gs[k + 1]; i++) g_chunks[k] = row_count[i] > g_chunks[k] ? row_count[i] : g_chunks[k];
    n_tasks += g_chunks[k];
  }
  int64_t *task_group = (int64_t *)malloc(sizeof(int64_t) * n_tasks * 2);
  float *part = (float *)malloc(sizeof(float) * n_parts * h * (d + 2));
  if (!task_group || !part) {
    free(row_first);
    free(task_group);
    free(part);
    return -1;
  }
  int64_t *task_chunk = task_group + n_tasks;
  for (int64_t k = 0, t = 0; k < n_groups; k++) {
    for (int64_t c = 0; c < g_chunks[k]; c++, t++) {
      task_group[t] = k;
      task_chunk[t] = c;
    }
  }
#pragma omp parallel for num_threads(nthreads) schedule(dynamic, 1)
  for (int64_t t = 0; t < n_tasks; t++) {
    const int64_t grp = task_group[t], ci = task_chunk[t];
    const int64_t dv = d - d % LD_VEC; /* the vectorised part of each row */
    float s[LD_MAX_G * LD_CHUNK];
    /* kv head outer, the group's rows inner: a kv head's slice of the chunk stays in cache for them */
    for (int64_t kv = 0; kv < kvh; kv++)
    for (int64_t i = gs[grp]; i < gs[grp + 1]; i++) {
      if (ci >= row_count[i]) continue;
      const int64_t lo = row_first[i] + ci * LD_CHUNK, pt = row_base[i] + ci;
      const int64_t hi = lo + LD_CHUNK < kv_lens[i] ? lo + LD_CHUNK : kv_lens[i];
      const int64_t *table = tables + i * table_stride;
      const float *qg = q + (i * h + kv * g) * d;
      /* scores: each key row read once for up to 4 query heads at a time, two accumulators each
         (independent FMA chains: one chain would wait on each FMA's latency) */
      for (int64_t j = lo; j < hi;) {
        const int64_t off = j % bs, run = (bs - off < hi - j) ? bs - off : hi - j;
        const int64_t kb = ((table[j / bs] * bs + off) * kvh + kv) * d;
        for (int64_t o = 0; o < run; o++) {
          const int64_t kr = kb + o * kvh * d; /* the key's first value, an element index of the pools */
          /* prefetch: this key's V row into L2 for the weighted sum below, and the K row LD_KEYS_AHEAD
             keys on (through the block table) into L1 */
          for (int64_t c = 0; c < d; c += line) __builtin_prefetch((const char *)v_cache + (kr + c) * esz, 0, 2);
          if (j + o + LD_KEYS_AHEAD < hi) {
            const int64_t jn = j + o + LD_KEYS_AHEAD;
            const int64_t kn = ((table[jn / bs] * bs + jn % bs) * kvh + kv) * d;
            for (int64_t c = 0; c < d; c += line) __builtin_prefetch((const char *)k_cache + (kn + c) * esz, 0, 3);
          }
          for (int64_t r0 = 0; r0 < g; r0 += 4) {
            const int nr = (int)(g - r0 < 4 ? g - r0 : 4);
            ld_vf a[4][2] = {{{0}}};
            int64_t e = 0;
            for (; e + 2 * LD_VEC <= dv; e += 2 * LD_VEC) {
              const ld_vf k0 = ld_kv_vec(k_cache, kr + e, f16), k1 = ld_kv_vec(k_cache, kr + e + LD_VEC, f16);
              for (int r = 0; r < nr; r++) {
                const float *qr = qg + (r0 + r) * d + e;
                a[r][0] += *(const ld_vf *)qr * k0;
                a[r][1] += *(const ld_vf *)(qr + LD_VEC) * k1;
              }
            }
            for (; e < dv; e += LD_VEC)
              for (int r = 0; r < nr; r++) a[r][0] += *(const ld_vf *)(qg + (r0 + r) * d + e) * ld_kv_vec(k_cache, kr + e, f16);
            for (int r = 0; r < nr; r++) {
              const float *qr = qg + (r0 + r) * d;
              float dot = ld_hsum(a[r][0] + a[r][1]);
              for (int64_t x = dv; x < d; x++) dot = fmaf(qr[x], ld_kv_one(k_cache, kr + x, f16), dot);
              dot *= scale;
              if (softcap > 0.0f) dot = softcap * tanhf(dot / softcap);
              s[(r0 + r) * LD_CHUNK + (j + o - lo)] = dot;
            }
          }
        }
        j += run;
      }
      for (int64_t r = 0; r < g; r++) {
        float *sr = s + r * LD_CHUNK, m = sr[0], l = 0.0f;
        for (int64_t j = 1; j < hi - lo; j++) m = sr[j] > m ? sr[j] : m;
        int64_t j = 0;
#if defined(__AVX512F__)
        __m512 lv = _mm512_setzero_ps();
        for (; j + 16 <= hi - lo; j += 16) {
          const __m512 ev = ld_exp16(_mm512_sub_ps(_mm512_loadu_ps(sr + j), _mm512_set1_ps(m)));
          _mm512_storeu_ps(sr + j, ev);
          lv = _mm512_add_ps(lv, ev);
        }
        l = _mm512_reduce_add_ps(lv);
#endif
        for (; j < hi - lo; j++) {
          sr[j] = expf(sr[j] - m);
          l += sr[j];
        }
        float *p = part + (pt * h + kv * g + r) * (d + 2);
        p[0] = m;
        p[1] = l;
      }
      /* weighted V: four query heads at a time, each V row's values read once per 64 of them for
         the four (16 accumulators, independent chains), the chunk's keys block by block */
      for (int64_t r0 = 0; r0 < g; r0 += 4) {
        switch (g - r0 < 4 ? g - r0 : 4) { /* the head count a compile-time constant: accumulators in registers */
          case 4: ld_weighted_v(4, s + r0 * LD_CHUNK, part + (pt * h + kv * g + r0) * (d + 2) + 2, v_cache, table, lo, hi, bs, kvh, kv, d, f16); break;
          case 3: ld_weighted_v(3, s + r0 * LD_CHUNK, part + (pt * h + kv * g + r0) * (d + 2) + 2, v_cache, table, lo, hi, bs, kvh, kv, d, f16); break;
          case 2: ld_weighted_v(2, s + r0 * LD_CHUNK, part + (pt * h + kv * g + r0) * (d + 2) + 2, v_cache, table, lo, hi, bs, kvh, kv, d, f16); break;
          default: ld_weighted_v(1, s + r0 * LD_CHUNK, part + (pt * h + kv * g + r0) * (d + 2) + 2, v_cache, table, lo, hi, bs, kvh, kv, d, f16);
        }
      }
    }
  }
  /* merge each row's chunks, in chunk order */
  for (int64_t i = 0; i < n; i++) {
    const int64_t t0 = row_base[i], t1 = t0 + row_count[i];
    for (int64_t r = 0; r < h; r++) {
      float m = -INFINITY, l = 0.0f;
      for (int64_t t = t0; t < t1; t++) {
        const float mt = part[(t * h + r) * (d + 2)];
        m = mt > m ? mt : m;
      }
      float *o = out + (i * h + r) * d;
      for (int64_t e = 0; e < d; e++) o[e] = 0.0f;
      for (int64_t t = t0; t < t1; t++) {
        const float *p = part + (t * h + r) * (d + 2);
        const float c = expf(p[0] - m);
        l += c * p[1];
        for (int64_t e = 0; e < d; e++) o[e] += c * p[2 + e];
      }
      const float inv = 1.0f / l;
      for (int64_t e = 0; e < d; e++) o[e] *= inv;
    }
  }
  free(row_first);
  free(task_group);
  free(part);
  return 0;
}

/* ld_decode_attention_t over float32 pools, and over half pools (each value widened to float32 as
 * it is read: the same float32 arithmetic on the values the pages hold); the latter returns -1
 * where this build has no F16C conversions (ld_kv_f16_ok) */
int ld_decode_attention(const float *q, const float *k_cache, const float *v_cache, int64_t n_blocks,
                        const int64_t *tables, int64_t table_stride, int64_t table_width, const int64_t *kv_lens,
                        int64_t n, int64_t h, int64_t kvh, int64_t d, int64_t bs, int64_t window, float scale,
                        float softcap, float *out, int nthreads) {
  return ld_decode_attention_t(q, k_cache, v_cache, n_blocks, tables, table_stride, table_width, kv_lens, n, h, kvh,
                               d, bs, window, scale, softcap, out, nthreads, 0);
}

int ld_decode_attention_f16(const float *q, const uint16_t *k_cache, const uint16_t *v_cache, int64_t n_blocks,
                            const int64_t *tables, int64_t table_stride, int64_t table_width, const int64_t *kv_lens,
                            int64_t n, int64_t h, int64_t kvh, int64_t d, int64_t bs, int64_t window, float scale,
                            float softcap, float *out, int nthreads) {
  if (!LD_F16) return -1;
  return ld_decode_attention_t(q, k_cache, v_cache, n_blocks, tables, table_stride, table_width, kv_lens, n, h, kvh,
                               d, bs, window, scale, softcap, out, nthreads, 1);
}

/* Weight bytes read ahead of the int8 products (a prefetch a cache line): the hardware prefetcher
 * alone left 18 layers' weights at 12-13 GB/s on the 2-core Xeon of 2026-12-07 (2 threads, 6.0-8.2
 * ms), with it 4.6-5.4 ms (~20 GB/s, above a plain streaming read's 17). */
#define LD_PREFETCH 2048

/* the product of int8 row w [kdim] and float32 x [kdim], unscaled */
static inline float ld_dot_i8(const int8_t *w, const float *xt, int64_t kdim) {
  const int64_t kv = kdim - kdim % (2 * LD_VEC);
  ld_vf a0 = {0}, a1 = {0}; /* two chains, so an FMA does not wait on the one before */
  for (int64_t k = 0; k < kv; k += 2 * LD_VEC) {
    __builtin_prefetch(w + k + LD_PREFETCH);
    const ld_vf w0 = ld_load_i8(w + k), w1 = ld_load_i8(w + k + LD_VEC);
    a0 += w0 * *(const ld_vf *)(xt + k);
    a1 += w1 * *(const ld_vf *)(xt + k + LD_VEC);
  }
  float s = ld_hsum(a0 + a1);
  for (int64_t k = kv; k < kdim; k++) s += (float)w[k] * xt[k];
  return s;
}

#if defined(__AVX2__)
#define LD_I16 1 /* the int8 products take int16 activations (below) */
#define LD_I16_SPAN 4096 /* k values summed in int32 before a float add: < 2^31 in every lane */

/* Activation rows rounded to int16 for the int8 products, one scale a row: xq[t, k] = round(x[t, k]
 * / xs[t]), xs[t] = max_k |x[t, k]| / 32767 (1 for a row of zeros). The rounding error, at most
 * 1/65534 of a row's largest value, is ~250 times finer than the int8 weights' own (1/254 of a
 * weight row's largest). */
static void ld_quant_i16(const float *x, int64_t T, int64_t kdim, int16_t *xq, float *xs) {
  for (int64_t t = 0; t < T; t++) {
    const float *xt = x + t * kdim;
    float m = 0.0f;
    for (int64_t k = 0; k < kdim; k++) m = fabsf(xt[k]) > m ? fabsf(xt[k]) : m;
    const float s = m > 0.0f ? m / 32767.0f : 1.0f, inv = 1.0f / s;
    xs[t] = s;
    for (int64_t k = 0; k < kdim; k++) xq[t * kdim + k] = (int16_t)lrintf(xt[k] * inv);
  }
}

#if defined(__AVX512BW__)
/* ld_dot_i8_i16 (below) of one int8 row w with nr <= 4 int16 rows xq + r kdim at once: each 64
 * weights loaded and widened once for the nr rows; with nr = 1 it is ld_dot_i8_i16 itself. Exact
 * whatever nr (integer sums do not depend on their grouping). */
static inline __attribute__((always_inline)) void ld_dotn_i8_i16(const int nr, const int8_t *w, const int16_t *xq,
                                                                   int64_t kdim, float *sums) {
  int64_t acc[4] = {0, 0, 0, 0};
  int64_t k = 0;
  while (k + 64 <= kdim) {
    const int64_t end = k + LD_I16_SPAN < kdim ? k + LD_I16_SPAN : kdim;
    __m512i a[4][2];
    for (int r = 0; r < nr; r++) a[r][0] = a[r][1] = _mm512_setzero_si512();
    for (; k + 64 <= end; k += 64) {
      __builtin_prefetch(w + k + LD_PREFETCH);
      const __m512i w0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(w + k)));
      const __m512i w1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(w + k + 32)));
      for (int r = 0; r < nr; r++) {
        const int16_t *xr = xq + r * kdim + k;
        const __m512i x0 = _mm512_loadu_si512((const void *)xr), x1 = _mm512_loadu_si512((const void *)(xr + 32));
#if defined(__AVX512VNNI__)
        a[r][0] = _mm512_dpwssd_epi32(a[r][0], w0, x0);
        a[r][1] = _mm512_dpwssd_epi32(a[r][1], w1, x1);
#else
        a[r][0] = _mm512_add_epi32(a[r][0], _mm512_madd_epi16(w0, x0));
        a[r][1] = _mm512_add_epi32(a[r][1], _mm512_madd_epi16(w1, x1));
#endif
      }
    }
    for (int r = 0; r < nr; r++) {
      /* the two chains' lanes added in int32 (each at most LD_I16_SPAN / 32 products of at most 128 x
         32767 in magnitude: the sum of both < 2^31), then widened to int64 and summed */
      const __m512i ar = _mm512_add_epi32(a[r][0], a[r][1]);
      acc[r] += _mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(ar)),
                                                         _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(ar, 1))));
    }
  }
  for (int r = 0; r < nr; r++) {
    for (int64_t j = k; j < kdim; j++) acc[r] += (int32_t)w[j] * xq[r * kdim + j]; /* the last < 64 values */
    sums[r] = (float)acc[r];
  }
}
#endif

/* the product of int8 row w [kdim] and int16 row xq [kdim], unscaled: int8 widened to int16, pairs
 * of products summed into int32 lanes (vpdpwssd with AVX512-VNNI, vpmaddwd and an add without),
 * two independent chains, added lane by lane at the end of each span of LD_I16_SPAN values (at
 * most 256 products of |128 x 32767| a lane: below 2^31), the lanes then summed in int64. Exact up
 * to the one rounding to float32 at the end (lanes rounded to float32 before their sum would lose
 * digits where they cancel). With AVX512BW it is ld_dotn_i8_i16 for one row. */
static inline float ld_dot_i8_i16(const int8_t *w, const int16_t *xq, int64_t kdim) {
#if defined(__AVX512BW__)
  float d;
  ld_dotn_i8_i16(1, w, xq, kdim, &d);
  return d;
#else
  int64_t s = 0;
  int64_t k = 0;
  while (k + 64 <= kdim) {
    const int64_t end = k + LD_I16_SPAN < kdim ? k + LD_I16_SPAN : kdim;
    __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (; k + 64 <= end; k += 64) {
      __builtin_prefetch(w + k + LD_PREFETCH);
      for (int c = 0; c < 4; c++) {
        const __m256i wc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + k + 16 * c)));
        a[c] = _mm256_add_epi32(a[c], _mm256_madd_epi16(wc, _mm256_loadu_si256((const __m256i *)(xq + k + 16 * c))));
      }
    }
    __m256i l = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++)
      l = _mm256_add_epi64(_mm256_add_epi64(l, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(a[c]))),
                           _mm256_cvtepi32_epi64(_mm256_extracti128_si256(a[c], 1)));
    s += _mm256_extract_epi64(l, 0) + _mm256_extract_epi64(l, 1) + _mm256_extract_epi64(l, 2) + _mm256_extract_epi64(l, 3);
  }
  for (; k < kdim; k++) s += (int32_t)w[k] * xq[k]; /* the last < 64 values */
  return (float)s;
#endif
}

/* y[t * ys] = (w . xq_t) * (xs[t] * scale) for the T int16 rows xq_t = xq + t kdim: one weight row's
 * products for a step's rows, four rows a pass over w where AVX512BW has ld_dotn_i8_i16 (a
 * speculative verify's four rows had widened each weight four times); every value as ld_dot_i8_i16
 * gives it, whatever T. */
static inline void ld_rows_i8_i16(const int8_t *w, const int16_t *xq, int64_t kdim, const float *xs, float scale,
                                  float *y, int64_t ys, int64_t T) {
  int64_t t = 0;
#if defined(__AVX512BW__)
  for (; t + 1 < T; t += 4) {
    float d[4];
    const int nr = T - t < 4 ? (int)(T - t) : 4;
    switch (nr) { /* the row count a compile-time constant: accumulators in registers */
      case 4: ld_dotn_i8_i16(4, w, xq + t * kdim, kdim, d); break;
      case 3: ld_dotn_i8_i16(3, w, xq + t * kdim, kdim, d); break;
      default: ld_dotn_i8_i16(2, w, xq + t * kdim, kdim, d);
    }
    for (int r = 0; r < nr; r++) y[(t + r) * ys] = d[r] * (xs[t + r] * scale);
  }
#endif
  for (; t < T; t++) y[t * ys] = ld_dot_i8_i16(w, xq + t * kdim, kdim) * (xs[t] * scale);
}
#endif

/* 1 where the int8 products round their activations to int16 (ld_quant_i16: AVX2 and above), 0
 * where they multiply float32 activations */
int ld_int16_activations(void) {
#if defined(LD_I16)
  return 1;
#else
  return 0;
#endif
}

/* y[t, i] = scale[i] * sum_k q[i, k] * x[t, k] for t < T, i < n: a weight-only int8 product, the
 * layers' products in a decode step; rows split over the threads. With AVX2 or above the
 * activations are rounded to int16 (ld_quant_i16) and the products summed in int32 (ld_dot_i8_i16:
 * 2 vector operations per 32 weights with AVX512-VNNI instead of 6 widening to float32; 2 threads
 * reach the memory's speed); elsewhere int8 rows widened to float32 in registers, float32
 * activations and accumulation. One scale per row at the end. Returns 0, -1 when its buffers
 * cannot be had. */
int ld_int8_matmul(const int8_t *q, const float *scale, const float *x, float *y, int64_t n, int64_t kdim,
                   int64_t T, int nthreads) {
#if defined(LD_I16)
  float *xs = (float *)malloc(sizeof(float) * T);
  int16_t *xq = (int16_t *)malloc(sizeof(int16_t) * T * kdim);
  if (!xs || !xq) {
    free(xs);
    free(xq);
    return -1;
  }
  ld_quant_i16(x, T, kdim, xq, xs);
#pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    ld_rows_i8_i16(q + i * kdim, xq, kdim, xs, scale[i], y + i, n, T);
  }
  free(xs);
  free(xq);
#else
#pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    const int8_t *w = q + i * kdim;
    for (int64_t t = 0; t < T; t++) y[t * n + i] = ld_dot_i8(w, x + t * kdim, kdim) * scale[i];
  }
#endif
  return 0;
}

/* act(g) * u for n values: gelu (tanh form, as g * sigmoid(2 sqrt(2/pi) (g + 0.044715 g^3)), equal
 * to 0.5 g (1 + tanh(...))) or silu (g * sigmoid(g)) */
static void ld_act_mul(const float *g, const float *u, float *out, int64_t n, int gelu) {
  int64_t j = 0;
#if defined(__AVX512F__)
  const __m512 c0 = _mm512_set1_ps(2.0f * 0.7978845608028654f), c1 = _mm512_set1_ps(0.044715f);
  for (; j + 16 <= n; j += 16) {
    const __m512 gv = _mm512_loadu_ps(g + j);
    __m512 z = gv;
    if (gelu) z = _mm512_mul_ps(c0, _mm512_fmadd_ps(_mm512_mul_ps(c1, _mm512_mul_ps(gv, gv)), gv, gv));
    _mm512_storeu_ps(out + j, _mm512_mul_ps(_mm512_mul_ps(gv, ld_sigmoid16(z)), _mm512_loadu_ps(u + j)));
  }
#endif
  for (; j < n; j++) {
    const float gj = g[j];
    const float z = gelu ? 2.0f * 0.7978845608028654f * (gj + 0.044715f * gj * gj * gj) : gj;
    out[j] = gj / (1.0f + expf(-z)) * u[j];
  }
}

/* A decode step's MLP with int8 weights in one call: h = x q_gu^T * s_gu ([T, 2f]: gate then up),
 * a = act(gate) * up ([T, f]), out = a q_dn^T * s_dn ([T, n_out]); the three phases in one
 * parallel region, rows split over the threads. The products as ld_int8_matmul's (int16
 * activations with AVX2 and above). Returns 0, -1 when its buffers cannot be had. */
int ld_mlp_int8(const float *x, int64_t T, int64_t kdim, const int8_t *q_gu, const float *s_gu, int64_t f,
                const int8_t *q_dn, const float *s_dn, int64_t n_out, int gelu, float *out, int nthreads) {
  float *h = (float *)malloc(sizeof(float) * (T * 3 * f + 2 * T));
#if defined(LD_I16)
  int16_t *xq = (int16_t *)malloc(sizeof(int16_t) * T * (kdim + f));
#else
  int16_t *xq = (int16_t *)malloc(1);
#endif
  if (!h || !xq) {
    free(h);
    free(xq);
    return -1;
  }
  float *a = h + T * 2 * f, *xs = h + T * 3 * f, *as = xs + T;
  const int64_t nc = (f + 255) / 256; /* activation chunks of 256 values a row */
#if defined(LD_I16)
  int16_t *aq = xq + T * kdim;
  ld_quant_i16(x, T, kdim, xq, xs);
#endif
#pragma omp parallel num_threads(nthreads)
  {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < 2 * f; i++)
#if defined(LD_I16)
      ld_rows_i8_i16(q_gu + i * kdim, xq, kdim, xs, s_gu[i], h + i, 2 * f, T);
#else
      for (int64_t t = 0; t < T; t++) h[t * 2 * f + i] = ld_dot_i8(q_gu + i * kdim, x + t * kdim, kdim) * s_gu[i];
#endif
#pragma omp for schedule(static)
    for (int64_t c = 0; c < T * nc; c++) {
      const int64_t t = c / nc, j0 = (c % nc) * 256;
      const int64_t m = f - j0 < 256 ? f - j0 : 256;
      ld_act_mul(h + t * 2 * f + j0, h + t * 2 * f + f + j0, a + t * f + j0, m, gelu);
    }
#if defined(LD_I16)
#pragma omp for schedule(static)
    for (int64_t t = 0; t < T; t++) ld_quant_i16(a + t * f, 1, f, aq + t * f, as + t);
#endif
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n_out; i++)
#if defined(LD_I16)
      ld_rows_i8_i16(q_dn + i * f, aq, f, as, s_dn[i], out + i, n_out, T);
#else
      for (int64_t t = 0; t < T; t++) out[t * n_out + i] = ld_dot_i8(q_dn + i * f, a + t * f, f) * s_dn[i];
#endif
  }
  free(h);
  free(xq);
  return 0;
}

static inline float ld_bf16(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

#if defined(__AVX512F__)
/* 16 bfloat16 values widened to float32 (exact: the bits shifted into the high half) */
static inline __m512 ld_bf16x16(const uint16_t *p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
#endif

/* best[b] = the first index of the largest of row b of a [B, V] bfloat16 matrix (torch.argmax's
 * choice among ties): the largest value in one vectorised pass, then its first position */
void ld_bf16_argmax(const uint16_t *x, int64_t B, int64_t V, int64_t *best) {
  for (int64_t b = 0; b < B; b++) {
    const uint16_t *row = x + b * V;
    float top = ld_bf16(row[0]);
    int64_t j = 0;
#if defined(__AVX512F__)
    __m512 m = _mm512_set1_ps(top);
    for (; j + 16 <= V; j += 16) m = _mm512_max_ps(m, ld_bf16x16(row + j));
    top = _mm512_reduce_max_ps(m);
#endif
    for (; j < V; j++) top = ld_bf16(row[j]) > top ? ld_bf16(row[j]) : top;
    j = 0;
#if defined(__AVX512F__)
    const __m512 t = _mm512_set1_ps(top);
    for (; j + 16 <= V; j += 16) {
      const __mmask16 eq = _mm512_cmp_ps_mask(ld_bf16x16(row + j), t, _CMP_EQ_OQ);
      if (eq) break;
    }
#endif
    for (; j < V; j++)
      if (ld_bf16(row[j]) == top) break;
    best[b] = j < V ? j : 0; /* 0 only where no value equals the max (NaN) */
  }
}

/* thr[b] = (floor[b] - |floor[b]| rel) - slack for b < B: the value a candidate's ceiling must reach
 * (the candidate passes below; each product and sum rounded, as torch computes it) */
__attribute__((optimize("fp-contract=off"))) static void ld_thresholds(const float *floor, int64_t B, float rel,
                                                                        float slack, float *thr) {
  for (int64_t b = 0; b < B; b++) {
    const float f = floor[b], fr = (f < 0 ? -f : f) * rel;
    thr[b] = (f - fr) - slack;
  }
}

/* rows j + k for the set bits k of keep, ascending, appended to out (at most cap kept); returns the
 * new count n (every row counted, kept or not) */
static inline int64_t ld_emit16(uint32_t keep, int64_t j, int64_t *out, int64_t n, int64_t cap) {
  while (keep) {
    const int k = __builtin_ctz(keep);
    if (n < cap) out[n] = j + k;
    n++;
    keep &= keep - 1;
  }
  return n;
}

/* GreedyHead's candidate rows from its int4 filter (engine/model/quant.py): row j stays when for
 * some b < B its ceiling c + |c| rel + (xnorm[b] err[j]) (1 + rel) + slack, c the filter's bfloat16
 * logit coarse[b, j], reaches floor[b] - |floor[b]| rel - slack (floor[b]: the exact logit of the
 * filter's argmax). The ids of the rows kept, ascending, go to out (at most cap of them); returns
 * how many rows are kept (-1 for B > 64). Each product and sum rounded in torch's order (no fused
 * multiply-add), so the rows are exactly those of the torch expression; 16 rows a vector. */
__attribute__((optimize("fp-contract=off"))) int64_t ld_int4_candidates(
    const uint16_t *coarse, int64_t B, int64_t V, const float *err, const float *xnorm, const float *floor, float rel,
    float slack, int64_t *out, int64_t cap) {
  float thr[64];
  if (B > 64) return -1;
  ld_thresholds(floor, B, rel, slack, thr);
  const float up = 1.0f + rel;
  int64_t n = 0, j = 0;
#if defined(__AVX512F__)
  const __m512 vrel = _mm512_set1_ps(rel), vup = _mm512_set1_ps(up), vslack = _mm512_set1_ps(slack);
  for (; j + 16 <= V; j += 16) {
    const __m512 e = _mm512_loadu_ps(err + j);
    __mmask16 keep = 0;
    for (int64_t b = 0; b < B; b++) {
      const __m512 c = ld_bf16x16(coarse + b * V + j);
      const __m512 gap = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(xnorm[b]), e), vup);
      const __m512 bound = _mm512_add_ps(_mm512_mul_ps(_mm512_abs_ps(c), vrel), gap);
      const __m512 ceil = _mm512_add_ps(_mm512_add_ps(c, bound), vslack);
      keep |= _mm512_cmp_ps_mask(ceil, _mm512_set1_ps(thr[b]), _CMP_GE_OQ);
    }
    n = ld_emit16(keep, j, out, n, cap);
  }
#endif
  for (; j < V; j++) {
    const float e = err[j];
    int keep = 0;
    for (int64_t b = 0; b < B && !keep; b++) {
      const float c = ld_bf16(coarse[b * V + j]);
      const float gap = (xnorm[b] * e) * up, cr = (c < 0 ? -c : c) * rel;
      const float bound = cr + gap, ceil = c + bound; /* separate statements: no contraction anywhere */
      keep = ceil + slack >= thr[b];
    }
    if (keep) {
      if (n < cap) out[n] = j;
      n++;
    }
  }
  return n;
}

/* GreedyHead's own int4 filter (engine/model/quant.py, Int4Filter): the output layer as unsigned
 * int4 u in groups of 32 inputs with a float16 scale s and offset m a row and group (w = u s + m),
 * read in one stream. Blocks of 16 rows: per (row block, group) 320 bytes, 256 of nibbles then
 * the 16 rows' scales, then their offsets (float16). The nibbles of the group's 16 input pairs
 * (k, k + 1), 32 bytes a pair ([row 0: u(k), u(k + 1)], [row 1: ...], ...), go four pairs to each
 * 64 bytes: pairs 4j and 4j + 1 in the low nibbles of bytes 64j .. 64j + 63, pairs 4j + 2 and 4j + 3
 * in the high ones. Each lane of a vector is a row, so no horizontal sums: per pair, one vpdpwssd of
 * the 16 rows' two values times the pair of int16 activations (ld_quant_i16), exact in int32 over
 * the group (32 x 15 x 32767 < 2^24, exact in float32 too), then logit += s d + m X_g, X_g the
 * group's sum of activations, all times the row's activation scale at the end. */
#if defined(__AVX512BW__) && defined(__AVX512F__)
#define LD_I4_BLOCK 320
int ld_int4_filter_fast(void) { return 1; }

/* coarse [B, n] float32 logits of the filter for B <= 64 activation rows x [B, 32 G]; best[b]: the
 * first index of row b's largest; stats [B, 2]: ||x_b - xs_b xq_b|| (the activations' rounding)
 * and xs_b sum |xq_b| (for the float32 accumulation's bound). Returns 0, -1 (B > 64, no buffers). */
int ld_int4_filter(const uint8_t *pk, int64_t n, int64_t G, const float *x, int64_t B, float *coarse, int64_t *best,
                   float *stats, int nthreads) {
  const int64_t k = G * 32, nb = (n + 15) / 16;
  if (B > 64 || B < 1) return -1;
  int16_t *xq = (int16_t *)malloc(sizeof(int16_t) * B * k);
  float *xs = (float *)malloc(sizeof(float) * B * (1 + G) + sizeof(float) * nthreads * 64);
  int64_t *bi = (int64_t *)malloc(sizeof(int64_t) * nthreads * 64);
  if (!xq || !xs || !bi) {
    free(xq);
    free(xs);
    free(bi);
    return -1;
  }
  float *xg = xs + B, *bv = xg + B * G;
  ld_quant_i16(x, B, k, xq, xs);
  for (int64_t b = 0; b < B; b++) {
    double d2 = 0.0, l1 = 0.0;
    for (int64_t j = 0; j < k; j++) {
      const double e = (double)x[b * k + j] - (double)xs[b] * (double)xq[b * k + j];
      d2 += e * e;
      l1 += fabs((double)xq[b * k + j]);
    }
    stats[2 * b] = (float)(sqrt(d2) * (1.0 + 1e-6));
    stats[2 * b + 1] = (float)(l1 * (double)xs[b] * (1.0 + 1e-6));
    for (int64_t g = 0; g < G; g++) {
      int32_t s = 0;
      for (int64_t j = 0; j < 32; j++) s += xq[b * k + g * 32 + j];
      xg[b * G + g] = (float)s;
    }
  }
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
#pragma omp parallel num_threads(nthreads)
  {
    const int tid = omp_get_thread_num();
    float mv[64], acc[64 * 16] __attribute__((aligned(64)));
    int64_t mi[64];
    for (int64_t b = 0; b < B; b++) {
      mv[b] = -INFINITY;
      mi[b] = -1;
    }
#pragma omp for schedule(static)
    for (int64_t rb = 0; rb < nb; rb++) {
      for (int64_t b = 0; b < B; b++) _mm512_store_ps(acc + 16 * b, _mm512_setzero_ps());
      const uint8_t *blk = pk + rb * G * LD_I4_BLOCK;
      for (int64_t g = 0; g < G; g++) {
        const uint8_t *p = blk + g * LD_I4_BLOCK;
        for (int c = 0; c < LD_I4_BLOCK; c += 64) __builtin_prefetch(p + LD_PREFETCH + c);
        __m512i w[16];
        for (int j = 0; j < 4; j++) {
          const __m512i v = _mm512_loadu_si512((const void *)(p + 64 * j));
          const __m512i l = _mm512_and_si512(v, lo4), h = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
          w[4 * j] = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(l));
          w[4 * j + 1] = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(l, 1));
          w[4 * j + 2] = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(h));
          w[4 * j + 3] = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(h, 1));
        }
        const __m512 s = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 256)));
        const __m512 m = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 288)));
        for (int64_t b = 0; b < B; b++) {
          const int32_t *xp = (const int32_t *)(const void *)(xq + b * k + g * 32);
          __m512i d = _mm512_setzero_si512();
          for (int q = 0; q < 16; q++) {
            int32_t pair;
            __builtin_memcpy(&pair, xp + q, sizeof pair);
#if defined(__AVX512VNNI__)
            d = _mm512_dpwssd_epi32(d, w[q], _mm512_set1_epi32(pair));
#else
            d = _mm512_add_epi32(d, _mm512_madd_epi16(w[q], _mm512_set1_epi32(pair)));
#endif
          }
          __m512 a = _mm512_load_ps(acc + 16 * b);
          a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), s, a);
          a = _mm512_fmadd_ps(m, _mm512_set1_ps(xg[b * G + g]), a);
          _mm512_store_ps(acc + 16 * b, a);
        }
      }
      const int64_t r0 = rb * 16, nr = n - r0 < 16 ? n - r0 : 16;
      const __mmask16 mask = (__mmask16)((1u << nr) - 1u);
      for (int64_t b = 0; b < B; b++) {
        const __m512 y = _mm512_mul_ps(_mm512_load_ps(acc + 16 * b), _mm512_set1_ps(xs[b]));
        _mm512_mask_storeu_ps(coarse + b * n + r0, mask, y);
        const float top = _mm512_mask_reduce_max_ps(mask, y);
        if (top > mv[b]) { /* strictly larger: ties keep the earlier row */
          const __mmask16 eq = _mm512_mask_cmp_ps_mask(mask, y, _mm512_set1_ps(top), _CMP_EQ_OQ);
          mv[b] = top;
          mi[b] = r0 + __builtin_ctz(eq);
        }
      }
    }
    for (int64_t b = 0; b < B; b++) {
      bv[tid * 64 + b] = mv[b];
      bi[tid * 64 + b] = mi[b];
    }
  }
  /* the threads' rows are ascending in thread order (a static schedule): the first largest wins */
  for (int64_t b = 0; b < B; b++) {
    float top = -INFINITY;
    int64_t at = 0;
    for (int t = 0; t < nthreads; t++)
      if (bi[t * 64 + b] >= 0 && bv[t * 64 + b] > top) {
        top = bv[t * 64 + b];
        at = bi[t * 64 + b];
      }
    best[b] = at;
  }
  free(xq);
  free(xs);
  free(bi);
  return 0;
}

/* The rows Int4Filter keeps (see ld_int4_candidates): row j stays when for some b < B its ceiling
 * c + |c| rel + (xnorm[b] err[j] + dnorm[b] wnorm[j] + l1[b] tol[j]) (1 + rel) + slack, c =
 * coarse[b, j] (float32), reaches floor[b] - |floor[b]| rel - slack. In torch's order, no fused
 * multiply-add; ids ascending into out (at most cap); returns the count. */
__attribute__((optimize("fp-contract=off"))) int64_t ld_int4_filter_candidates(
    const float *coarse, int64_t B, int64_t V, const float *err, const float *wnorm, const float *tol,
    const float *xnorm, const float *dnorm, const float *l1, const float *floor, float rel, float slack, int64_t *out,
    int64_t cap) {
  float thr[64];
  if (B > 64) return -1;
  ld_thresholds(floor, B, rel, slack, thr);
  const float up = 1.0f + rel;
  int64_t n = 0, j = 0;
  const __m512 vrel = _mm512_set1_ps(rel), vup = _mm512_set1_ps(up), vslack = _mm512_set1_ps(slack);
  for (; j + 16 <= V; j += 16) {
    const __m512 e = _mm512_loadu_ps(err + j), wn = _mm512_loadu_ps(wnorm + j), tl = _mm512_loadu_ps(tol + j);
    __mmask16 keep = 0;
    for (int64_t b = 0; b < B; b++) {
      const __m512 c = _mm512_loadu_ps(coarse + b * V + j);
      const __m512 t1 = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(xnorm[b]), e), _mm512_mul_ps(_mm512_set1_ps(dnorm[b]), wn));
      const __m512 gap = _mm512_mul_ps(_mm512_add_ps(t1, _mm512_mul_ps(_mm512_set1_ps(l1[b]), tl)), vup);
      const __m512 bound = _mm512_add_ps(_mm512_mul_ps(_mm512_abs_ps(c), vrel), gap);
      const __m512 ceil = _mm512_add_ps(_mm512_add_ps(c, bound), vslack);
      keep |= _mm512_cmp_ps_mask(ceil, _mm512_set1_ps(thr[b]), _CMP_GE_OQ);
    }
    n = ld_emit16(keep, j, out, n, cap);
  }
  for (; j < V; j++) {
    int keep = 0;
    for (int64_t b = 0; b < B && !keep; b++) {
      const float c = coarse[b * V + j];
      const float t1a = xnorm[b] * err[j], t1b = dnorm[b] * wnorm[j];
      const float t1 = t1a + t1b, t2 = l1[b] * tol[j];
      const float gap = (t1 + t2) * up, cr = (c < 0 ? -c : c) * rel;
      const float bound = cr + gap, ceil = c + bound;
      keep = ceil + slack >= thr[b];
    }
    if (keep) {
      if (n < cap) out[n] = j;
      n++;
    }
  }
  return n;
}
#else
int ld_int4_filter_fast(void) { return 0; }
#endif
