/* common.h — helpers shared by the CPU kernels (sgp.c, fcgp.c).
 *
 * Shapes: D components, G grades, P paths, T product terms, B batch rows, N features.
 * Layouts as fc.h: multivectors (D, B, N), component A of row b at A * B * N + b * N.
 *
 * Two parts. The first (include-guarded) is type-independent: OpenMP glue, allocation,
 * the batch chunking that keeps cross-row sums deterministic, the regrouped term lists
 * (SGP tile plans, FCGP pairs). The second is the per-type half: GELU gate and its
 * backward (each the identity when fc_args.gate is 0, the plain geometric product),
 * grade-wise RMSNorm and its backward, the vectorised inner loops. It is a
 * "template": it expands once for every inclusion made with `real` and FC_T(name)
 * defined, which the *_impl.h files do once per compute type, so each helper is written
 * once and exists for float and double.
 */
#ifndef FC_CPU_COMMON_H
#define FC_CPU_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h> /* erf/exp/sqrt/fabs resolve to the float or double function */

#include "../fc.h"

#ifdef _OPENMP
#include <omp.h>
#define FC_PRAGMA(x) _Pragma(#x)
#define FC_OMP(x) FC_PRAGMA(omp x)
#else
#define FC_OMP(x)
#endif

/* Feature tile of the SGP kernels: 64 floats are 4 AVX-512 / 8 AVX2 vectors, and the
 * D x 64 tiles of xg, yg and o (24 KiB in double for D = 16) stay in L1. */
#define FC_TILE 64
/* Accumulators kept side by side so sums vectorise: 128 bytes, 32 floats or 16 doubles,
 * are 8 SSE / 4 AVX2 / 2 AVX-512 registers. Expands where `real` is defined. */
#define FC_VEC ((int)(128 / sizeof(real)))
/* Batch chunks of a cross-row sum (the SGP weight gradient). The count depends on B
 * only, never on the thread count, so the summation order and the result are fixed. */
#define FC_CHUNKS 64
/* Batch rows per FCGP block: the block of one output component (16 x N_out) and one
 * weight row stay in L1 while the weight row is reused 16 times. */
#define FC_ROWS 16
/* Input features per FCGP weight-gradient task: a 32 x N_out tile of grad_weight. */
#define FC_NTILE 32

/* FC_CPU_HOT marks the row functions that hold the inner loops.
 * On x86-64 ELF with GCC they are compiled for baseline x86-64, AVX2+FMA (x86-64-v3) and
 * AVX-512 (x86-64-v4), picked at load time (ifunc), so a portable build still runs at
 * the width of the machine (Cl(3,0) fp32 SGP backward: 0.6x the cycles of SSE2 only).
 * With any GCC, -O3's unroll-and-jam is off there: it fuses two terms' FC_VEC loops of
 * tile_group into one loop it then leaves scalar (twice the instructions, measured). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
#define FC_CPU_HOT                                                                          \
    __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4"),         \
                   optimize("no-loop-unroll-and-jam")))
#elif defined(__GNUC__) && !defined(__clang__)
#define FC_CPU_HOT __attribute__((optimize("no-loop-unroll-and-jam")))
#else
#define FC_CPU_HOT
#endif

#define FC_SQRT1_2 0.70710678118654752440
#define FC_INV_SQRT_2PI 0.39894228040143267794

static inline int fc_cpu_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static inline int fc_cpu_thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int64_t fc_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t fc_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* malloc of count elements; NULL on overflow or failure, never NULL for count == 0
 * (so NULL always means FC_ERR_NOMEM). Returns memory the caller frees. */
static inline void *fc_cpu_alloc(int64_t count, size_t elem)
{
    if (count < 0 || (uint64_t)count > SIZE_MAX / elem)
        return NULL;
    size_t bytes = (size_t)count * elem;
    return malloc(bytes ? bytes : 1);
}

/* Rows [begin, end) of chunk c out of `chunks` over B rows. */
static inline int64_t fc_chunk_begin(int64_t B, int64_t chunks, int64_t c) { return B * c / chunks; }

/* The checks every CPU entry point shares; the dtype is checked by its dispatch. */
static inline fc_status fc_cpu_check(const fc_args *a, int is_sgp)
{
    if (a == NULL || a->alg == NULL) {
        fc_set_error("cpu kernel: no algebra given");
        return FC_ERR_VALUE;
    }
    if (a->B < 0 || a->N_in < 0 || a->N_out < 0) {
        fc_set_error("cpu kernel: negative size (B=%lld, N_in=%lld, N_out=%lld)", (long long)a->B,
                     (long long)a->N_in, (long long)a->N_out);
        return FC_ERR_VALUE;
    }
    if (is_sgp && a->N_in != a->N_out) {
        fc_set_error("sgp: N_out must equal N_in, got %lld and %lld", (long long)a->N_out,
                     (long long)a->N_in);
        return FC_ERR_VALUE;
    }
    return FC_OK;
}

/* The extern entry point of one op and pass: check the arguments, then run the float or
 * the double body (name##_f32 / name##_f64, from the *_impl.h file included twice). */
#define FC_CPU_ENTRY(entry, body, is_sgp)                 \
    fc_status entry(const fc_args *a)                     \
    {                                                     \
        fc_status st = fc_cpu_check(a, is_sgp);           \
        if (st != FC_OK)                                  \
            return st;                                    \
        switch (a->dtype) {                               \
        case FC_F32:                                      \
            return body##_f32(a);                         \
        case FC_F64:                                      \
            return body##_f64(a);                         \
        default:                                          \
            return FC_ERR_TYPE;                           \
        }                                                 \
    }

/* A tile plan: the terms regrouped by the operand one pass writes, so each output row is
 * summed in registers over its terms (3 loads per term and vector instead of 4 and a
 * store). Group g writes row g of its output: out_g = sum of sign * f0 * f1 * f2, where
 * f0..f2 name rows of three operands, e.g. the forward has out = o_j, f = (w_path, xg_i, yg_k).
 * Inside a group the +1 terms come first, so the sign is an add or a subtract, not a multiply. */
enum { FC_I = 0, FC_J, FC_K, FC_PATH };
typedef struct fc_plan {
    int ngroups;
    int start[FC_MAX_P + 1]; /* group g: terms [start[g], start[g + 1]) */
    int minus[FC_MAX_P];     /* its -1 terms: [minus[g], start[g + 1]) */
    unsigned char f0[FC_MAX_T], f1[FC_MAX_T], f2[FC_MAX_T];
} fc_plan;

static inline int fc_term_field(fc_term t, int field)
{
    return field == FC_I ? t.i : field == FC_J ? t.j : field == FC_K ? t.k : t.path;
}

/* Group by `key` (one group per component, or per path), operands named by three fields. */
static inline void fc_plan_build(const fc_algebra *alg, int key, int f0, int f1, int f2, fc_plan *pl)
{
    int t = 0;
    pl->ngroups = key == FC_PATH ? alg->P : alg->D;
    for (int g = 0; g < pl->ngroups; ++g) {
        pl->start[g] = t;
        for (int sign = 1; sign >= -1; sign -= 2) {
            if (sign < 0)
                pl->minus[g] = t;
            for (int s = 0; s < alg->T; ++s) {
                const fc_term term = alg->term[s];
                if (fc_term_field(term, key) != g || term.sign != sign)
                    continue;
                pl->f0[t] = (unsigned char)fc_term_field(term, f0);
                pl->f1[t] = (unsigned char)fc_term_field(term, f1);
                pl->f2[t] = (unsigned char)fc_term_field(term, f2);
                ++t;
            }
        }
    }
    pl->start[pl->ngroups] = t;
}

/* FCGP works per (output component j, path p): z = sum over its terms of sign xg_i yg_k,
 * then o_j += z @ W[p]. `sorted` receives the terms grouped pair by pair. */
typedef struct fc_pair {
    int j, path;
    int t0, t1; /* its terms: sorted[t0 .. t1) */
} fc_pair;

static inline int fc_group_pairs(const fc_algebra *alg, fc_term *sorted, fc_pair *pairs)
{
    int np = 0, t = 0;
    for (int j = 0; j < alg->D; ++j)
        for (int p = 0; p < alg->P; ++p) {
            int t0 = t;
            for (int s = 0; s < alg->T; ++s)
                if (alg->term[s].j == j && alg->term[s].path == p)
                    sorted[t++] = alg->term[s];
            if (t > t0) {
                fc_pair q = {j, p, t0, t};
                pairs[np++] = q;
            }
        }
    return np;
}

#endif /* FC_CPU_COMMON_H */

/* ---- per-type part: expanded once per (real, FC_T) ---- */
#if defined(real) && defined(FC_T)

/* Phi(t) = (1 + erf(t / sqrt 2)) / 2, the GELU gate. */
static inline real FC_T(gelu_cdf)(real t) { return (real)0.5 * ((real)1 + erf(t * (real)FC_SQRT1_2)); }

/* phi(t) = Phi'(t), the standard normal density. */
static inline real FC_T(gelu_pdf)(real t) { return (real)FC_INV_SQRT_2PI * exp((real)-0.5 * t * t); }

/* MVGELU over `len` consecutive elements of every component: xg_A = x_A * Phi(x_0).
 * x: component A at x + A * xcs; xg: at xg + A * gcs, zero-filled from len up to pad.
 * Phi, dphi (each may be NULL): the gate and its derivative, kept for the backward.
 * gate == 0 (the plain product): xg = x, Phi and dphi are not written. The copy keeps the
 * callers' tile layout (stride, zero padding) the same either way. */
static inline void FC_T(gelu_gate)(int gate, int D, const real *x, int64_t xcs, int64_t len, int64_t pad,
                                   real *xg, int64_t gcs, real *Phi, real *dphi)
{
    for (int64_t e0 = 0; e0 < len; e0 += FC_TILE) {
        const int64_t m = fc_min64(FC_TILE, len - e0);
        if (!gate) {
            for (int A = 0; A < D; ++A)
                memcpy(xg + A * gcs + e0, x + A * xcs + e0, (size_t)m * sizeof(real));
            continue;
        }
        real c[FC_TILE];
        for (int64_t e = 0; e < m; ++e)
            c[e] = FC_T(gelu_cdf)(x[e0 + e]);
        if (Phi)
            memcpy(Phi + e0, c, (size_t)m * sizeof(real));
        if (dphi)
            for (int64_t e = 0; e < m; ++e)
                dphi[e0 + e] = FC_T(gelu_pdf)(x[e0 + e]);
        for (int A = 0; A < D; ++A) {
            const real *restrict xa = x + A * xcs + e0;
            real *restrict ga = xg + A * gcs + e0;
            for (int64_t e = 0; e < m; ++e)
                ga[e] = xa[e] * c[e];
        }
    }
    for (int A = 0; A < D; ++A)
        for (int64_t e = len; e < pad; ++e)
            xg[A * gcs + e] = 0;
}

/* The MVGELU backward over `len` elements: gx_A = gxg_A Phi, and the gate's own input
 * x_0 also collects phi(x_0) sum_A gxg_A x_A. gx_0 is the accumulator of that sum, so
 * gx must not alias x or gxg. Phi == NULL means no gate (the plain product): gx = gxg,
 * copied, not multiplied by Phi = 1 and phi = 0 (0 * an overflowed sum would be NaN). */
static inline void FC_T(gelu_gate_backward)(int D, const real *x, int64_t xcs, const real *gxg,
                                            int64_t gcs, const real *Phi, const real *dphi,
                                            int64_t len, real *gx, int64_t gxcs)
{
    if (!Phi) {
        for (int A = 0; A < D; ++A)
            memcpy(gx + A * gxcs, gxg + A * gcs, (size_t)len * sizeof(real));
        return;
    }
    real *restrict s = gx;
    for (int64_t e = 0; e < len; ++e)
        s[e] = gxg[e] * x[e];
    for (int A = 1; A < D; ++A) {
        const real *restrict xa = x + A * xcs;
        const real *restrict ga = gxg + A * gcs;
        real *restrict gxa = gx + A * gxcs;
        for (int64_t e = 0; e < len; ++e) {
            s[e] += ga[e] * xa[e];
            gxa[e] = ga[e] * Phi[e];
        }
    }
    for (int64_t e = 0; e < len; ++e)
        s[e] = gxg[e] * Phi[e] + dphi[e] * s[e];
}

/* sum_e a[e] b[e] with FC_VEC partial sums: vectorises without reassociation flags and
 * keeps a fixed summation order. */
static inline real FC_T(dot)(const real *restrict a, const real *restrict b, int64_t len)
{
    real lane[FC_VEC] = {0};
    int64_t e = 0;
    for (; e + FC_VEC <= len; e += FC_VEC)
        for (int v = 0; v < FC_VEC; ++v)
            lane[v] += a[e + v] * b[e + v];
    for (int v = 0; e < len; ++e, ++v)
        lane[v] += a[e] * b[e];
    real sum = 0;
    for (int v = 0; v < FC_VEC; ++v)
        sum += lane[v];
    return sum;
}

/* t_g[n] = sum_{A in g} s_A o_A[n0 + n]^2 for n < m (m <= FC_TILE), zero up to FC_TILE. */
static inline void FC_T(grade_square)(const fc_algebra *alg, int g, const real *o, int64_t cs, int64_t n0,
                                      int64_t m, real *restrict t)
{
    for (int e = 0; e < FC_TILE; ++e)
        t[e] = 0;
    for (int A = alg->grade_start[g]; A < alg->grade_start[g + 1]; ++A) {
        const real s = (real)alg->grade_sign[A];
        const real *restrict oa = o + A * cs + n0;
        for (int64_t e = 0; e < m; ++e)
            t[e] += s * oa[e] * oa[e];
    }
}

/* r_g = sqrt(mean_n |t_g[n]| + eps) of one row; o: component A at o + A * cs, N features.
 * N == 0 gives the mean of nothing, 0. */
static inline void FC_T(grade_rms)(const fc_algebra *alg, const real *o, int64_t cs, int64_t N, real *r)
{
    for (int g = 0; g < alg->G; ++g) {
        real lane[FC_VEC] = {0}, q = 0;
        for (int64_t n0 = 0; n0 < N; n0 += FC_TILE) {
            real t[FC_TILE];
            FC_T(grade_square)(alg, g, o, cs, n0, fc_min64(FC_TILE, N - n0), t);
            for (int e = 0; e < FC_TILE; e += FC_VEC)
                for (int v = 0; v < FC_VEC; ++v)
                    lane[v] += fabs(t[e + v]);
        }
        for (int v = 0; v < FC_VEC; ++v)
            q += lane[v];
        if (N > 0)
            q /= (real)N;
        r[g] = sqrt(q + (real)FC_NORM_EPS);
    }
}

/* Grade-wise RMSNorm of one row in place, o_A /= r_grade(A); r receives the G norms. */
static inline void FC_T(grade_norm)(const fc_algebra *alg, real *o, int64_t cs, int64_t N, real *r)
{
    FC_T(grade_rms)(alg, o, cs, N, r);
    for (int A = 0; A < alg->D; ++A) {
        const real inv = (real)1 / r[alg->grade[A]];
        real *restrict oa = o + A * cs;
        for (int64_t n = 0; n < N; ++n)
            oa[n] *= inv;
    }
}

/* The RMSNorm backward of one row. With dot_g = sum_{A in g, n} gout_A o_A:
 *   go_A[n] = gout_A[n] / r_g - dot_g sign(t_g[n]) s_A o_A[n] / (N r_g^3).
 * o: the pre-norm output; go may be o itself (each tile of o is copied before it is
 * overwritten). Strides: component A at base + A * cs. */
static inline void FC_T(grade_norm_backward)(const fc_algebra *alg, const real *o, int64_t ocs,
                                             const real *gout, int64_t gcs, int64_t N, const real *r,
                                             real *go, int64_t gocs)
{
    for (int g = 0; g < alg->G; ++g) {
        const int A0 = alg->grade_start[g], A1 = alg->grade_start[g + 1];
        real dot = 0;
        for (int A = A0; A < A1; ++A)
            dot += FC_T(dot)(gout + A * gcs, o + A * ocs, N);
        const real inv = (real)1 / r[g];
        const real coef = N > 0 ? dot * inv * inv * inv / (real)N : (real)0;
        for (int64_t n0 = 0; n0 < N; n0 += FC_TILE) {
            const int64_t m = fc_min64(FC_TILE, N - n0);
            real t[FC_TILE], oa[FC_TILE];
            FC_T(grade_square)(alg, g, o, ocs, n0, m, t);
            for (int e = 0; e < FC_TILE; ++e)
                t[e] = coef * (real)((t[e] > 0) - (t[e] < 0));
            for (int A = A0; A < A1; ++A) {
                const real s = (real)alg->grade_sign[A];
                const real *restrict ga = gout + A * gcs + n0;
                real *restrict goa = go + A * gocs + n0;
                memcpy(oa, o + A * ocs + n0, (size_t)m * sizeof(real));
                for (int64_t e = 0; e < m; ++e)
                    goa[e] = ga[e] * inv - t[e] * s * oa[e];
            }
        }
    }
}

/* o[e] += s * a[e] * b[e] over len elements (FCGP's pairwise products and their grads). */
static inline void FC_T(add_prod)(real *restrict o, const real *restrict a, const real *restrict b,
                                  real s, int64_t len)
{
    for (int64_t e = 0; e < len; ++e)
        o[e] += s * a[e] * b[e];
}

/* o[e] += s * a[e] over len elements: one rank-1 step of FCGP's matrix products. */
static inline void FC_T(axpy)(real *restrict o, const real *restrict a, real s, int64_t len)
{
    for (int64_t e = 0; e < len; ++e)
        o[e] += s * a[e];
}

/* acc[v] += (or -=) a[v] b[v] c[v] over one FC_VEC block; restrict parameters, so the
 * compiler need not guard against overlap. */
static inline void FC_T(vec_add3)(real *restrict acc, const real *restrict a, const real *restrict b,
                                  const real *restrict c)
{
    for (int v = 0; v < FC_VEC; ++v)
        acc[v] += a[v] * b[v] * c[v];
}

static inline void FC_T(vec_sub3)(real *restrict acc, const real *restrict a, const real *restrict b,
                                  const real *restrict c)
{
    for (int v = 0; v < FC_VEC; ++v)
        acc[v] -= a[v] * b[v] * c[v];
}

/* One group of a plan over one FC_TILE-wide tile: out_g[e] (+)= sum over the group's
 * terms of sign f0[e] f1[e] f2[e]. Operand rows: f0 row r at a0 + r * cs0, and so on.
 * FC_VEC accumulators live in registers across the terms; the fixed trip counts let the
 * compiler vectorise without remainder loops (tiles are zero-padded). */
static inline void FC_T(tile_group)(const fc_plan *pl, int g, const real *a0, int64_t cs0, const real *a1,
                                    int64_t cs1, const real *a2, int64_t cs2, real *restrict out,
                                    int accumulate)
{
    for (int e0 = 0; e0 < FC_TILE; e0 += FC_VEC) {
        real acc[FC_VEC] = {0};
        for (int t = pl->start[g]; t < pl->minus[g]; ++t)
            FC_T(vec_add3)(acc, a0 + pl->f0[t] * cs0 + e0, a1 + pl->f1[t] * cs1 + e0,
                           a2 + pl->f2[t] * cs2 + e0);
        for (int t = pl->minus[g]; t < pl->start[g + 1]; ++t)
            FC_T(vec_sub3)(acc, a0 + pl->f0[t] * cs0 + e0, a1 + pl->f1[t] * cs1 + e0,
                           a2 + pl->f2[t] * cs2 + e0);
        if (accumulate)
            for (int v = 0; v < FC_VEC; ++v)
                out[e0 + v] += acc[v];
        else
            for (int v = 0; v < FC_VEC; ++v)
                out[e0 + v] = acc[v];
    }
}

static inline void FC_T(zero)(real *p, int64_t count)
{
    if (count > 0)
        memset(p, 0, (size_t)count * sizeof(real));
}

#endif /* real && FC_T */
