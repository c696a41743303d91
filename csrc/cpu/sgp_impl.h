/* sgp_impl.h — the SGP kernels for one compute type. sgp.c includes it once per type
 * with `real` (float or double) and FC_T(name) (name##_f32 / name##_f64) defined.
 *
 *   x, y, grad_x, grad_y, out, grad_out   (D, B, N)
 *   weight, grad_weight                   (N, P)
 *   norms                                 (B, G)
 *
 * Each batch row is independent, so rows are spread over threads and each row is walked
 * in FC_TILE-wide feature tiles; the weight is transposed to (P, Np), Np = N rounded up
 * to the tile and zero-padded, so every inner loop is a fixed-width, unit-stride loop.
 * Every pass is one fc_plan (common.h): the terms grouped by the row that pass writes.
 */
#include "common.h"

/* wt (P, Np) = w (N, P) transposed, zero in the padding columns. */
static void FC_T(sgp_transpose_weight)(const real *w, int64_t N, int P, real *wt, int64_t Np)
{
    for (int p = 0; p < P; ++p) {
        for (int64_t n = 0; n < N; ++n)
            wt[p * Np + n] = w[n * P + p];
        for (int64_t n = N; n < Np; ++n)
            wt[p * Np + n] = 0;
    }
}

/* The forward of batch row b; wt: the (P, Np) weight. */
FC_CPU_HOT
static void FC_T(sgp_forward_row)(const fc_args *a, const fc_plan *pl, const real *wt, int64_t Np, int64_t b)
{
    const fc_algebra *alg = a->alg;
    const int D = alg->D, G = alg->G;
    const int64_t N = a->N_in, BN = a->B * N;
    const real *x = (const real *)a->x + b * N, *y = (const real *)a->y + b * N;
    real *out = (real *)a->out + b * N;
    real xg[FC_MAX_D * FC_TILE], yg[FC_MAX_D * FC_TILE], o[FC_MAX_D * FC_TILE];

    for (int64_t n0 = 0; n0 < N; n0 += FC_TILE) {
        const int64_t m = fc_min64(FC_TILE, N - n0);
        FC_T(gelu_gate)(a->gate, D, x + n0, BN, m, FC_TILE, xg, FC_TILE, NULL, NULL);
        FC_T(gelu_gate)(a->gate, D, y + n0, BN, m, FC_TILE, yg, FC_TILE, NULL, NULL);
        /* a full tile goes straight to out; the last, partial one through o */
        const int full = m == FC_TILE;
        for (int j = 0; j < D; ++j)
            FC_T(tile_group)(pl, j, wt + n0, Np, xg, FC_TILE, yg, FC_TILE,
                             full ? out + j * BN + n0 : o + j * FC_TILE, 0);
        if (!full)
            for (int A = 0; A < D; ++A)
                memcpy(out + A * BN + n0, o + A * FC_TILE, (size_t)m * sizeof(real));
    }
    if (a->normalize) {
        real r[FC_MAX_G];
        FC_T(grade_norm)(alg, out, BN, N, r);
        if (a->norms)
            memcpy((real *)a->norms + b * G, r, (size_t)G * sizeof(real));
    }
}

static fc_status FC_T(sgp_forward)(const fc_args *a)
{
    const fc_algebra *alg = a->alg;
    const int64_t B = a->B, N = a->N_in, Np = fc_round_up(N, FC_TILE);
    real *wt = NULL;
    fc_plan fwd;
    fc_status st = FC_OK;

    if (B == 0)
        return FC_OK;
    fc_plan_build(alg, FC_J, FC_PATH, FC_I, FC_K, &fwd);
    wt = fc_cpu_alloc(alg->P * Np, sizeof(real));
    if (!wt) {
        st = FC_ERR_NOMEM;
        goto done;
    }
    FC_T(sgp_transpose_weight)(a->weight, N, alg->P, wt, Np);

    FC_OMP(parallel for schedule(static))
    for (int64_t b = 0; b < B; ++b)
        FC_T(sgp_forward_row)(a, &fwd, wt, Np, b);

done:
    free(wt);
    return st;
}

/* Per-thread scratch of the backward, one batch row, each (D, Np) or (Np): */
#define FC_SGP_ROW_SCRATCH(D, Np) ((3 * (int64_t)(D) + 4) * (Np))

/* The plans of the backward: o (recomputed for the norm), then gxg_i, gyg_k, gw_path. */
typedef struct FC_T(sgp_plans) {
    fc_plan o, gx, gy, gw;
} FC_T(sgp_plans);

/* The backward of batch row b. buf: FC_SGP_ROW_SCRATCH elements; gwt: this chunk's
 * (P, Np) weight-gradient partial, or NULL. */
FC_CPU_HOT
static void FC_T(sgp_backward_row)(const fc_args *a, const FC_T(sgp_plans) *pl, const real *wt, int64_t Np,
                                   int64_t b, real *buf, real *gwt)
{
    const fc_algebra *alg = a->alg;
    const int D = alg->D, G = alg->G;
    const int64_t B = a->B, N = a->N_in, BN = B * N;
    const real *x = (const real *)a->x + b * N, *y = (const real *)a->y + b * N;
    const real *gout = (const real *)a->grad_out + b * N;
    real *gx = a->grad_x ? (real *)a->grad_x + b * N : NULL;
    real *gy = a->grad_y ? (real *)a->grad_y + b * N : NULL;
    real *xg = buf, *yg = xg + D * Np, *go = yg + D * Np;
    real *px = go + D * Np, *dpx = px + Np, *py = dpx + Np, *dpy = py + Np;
    const int gate = a->gate;

    /* gated inputs for the whole row, and o when the norm needs it */
    for (int64_t n0 = 0; n0 < N; n0 += FC_TILE) {
        const int64_t m = fc_min64(FC_TILE, N - n0);
        FC_T(gelu_gate)(gate, D, x + n0, BN, m, FC_TILE, xg + n0, Np, px + n0, dpx + n0);
        FC_T(gelu_gate)(gate, D, y + n0, BN, m, FC_TILE, yg + n0, Np, py + n0, dpy + n0);
        if (a->normalize)
            for (int j = 0; j < D; ++j)
                FC_T(tile_group)(&pl->o, j, wt + n0, Np, xg + n0, Np, yg + n0, Np, go + j * Np + n0, 0);
    }

    /* go = dL/do, zero in the padding */
    if (a->normalize) {
        real r[FC_MAX_G];
        if (a->norms)
            memcpy(r, (const real *)a->norms + b * G, (size_t)G * sizeof(real));
        else
            FC_T(grade_rms)(alg, go, Np, N, r);
        FC_T(grade_norm_backward)(alg, go, Np, gout, BN, N, r, go, Np);
    } else {
        for (int A = 0; A < D; ++A) {
            memcpy(go + A * Np, gout + A * BN, (size_t)N * sizeof(real));
            FC_T(zero)(go + A * Np + N, Np - N);
        }
    }

    for (int64_t n0 = 0; n0 < N; n0 += FC_TILE) {
        const int64_t m = fc_min64(FC_TILE, N - n0);
        real gxg[FC_MAX_D * FC_TILE], gyg[FC_MAX_D * FC_TILE];
        if (gx)
            for (int i = 0; i < D; ++i)
                FC_T(tile_group)(&pl->gx, i, wt + n0, Np, go + n0, Np, yg + n0, Np, gxg + i * FC_TILE, 0);
        if (gy)
            for (int k = 0; k < D; ++k)
                FC_T(tile_group)(&pl->gy, k, wt + n0, Np, go + n0, Np, xg + n0, Np, gyg + k * FC_TILE, 0);
        if (gwt)
            for (int p = 0; p < alg->P; ++p)
                FC_T(tile_group)(&pl->gw, p, go + n0, Np, xg + n0, Np, yg + n0, Np, gwt + p * Np + n0, 1);
        /* without the gate (no Phi) these copy gxg, gyg out */
        if (gx)
            FC_T(gelu_gate_backward)(D, x + n0, BN, gxg, FC_TILE, gate ? px + n0 : NULL, dpx + n0, m, gx + n0,
                                     BN);
        if (gy)
            FC_T(gelu_gate_backward)(D, y + n0, BN, gyg, FC_TILE, gate ? py + n0 : NULL, dpy + n0, m, gy + n0,
                                     BN);
    }
}

static fc_status FC_T(sgp_backward)(const fc_args *a)
{
    const fc_algebra *alg = a->alg;
    const int P = alg->P;
    const int64_t B = a->B, N = a->N_in, Np = fc_round_up(N, FC_TILE);
    const int64_t chunks = fc_min64(B, FC_CHUNKS);
    const int need_w = a->grad_weight != NULL;
    const int nth = fc_cpu_threads();
    real *wt = NULL, *scratch = NULL, *partial = NULL;
    FC_T(sgp_plans) pl;
    fc_status st = FC_OK;

    if (need_w)
        FC_T(zero)(a->grad_weight, N * P);
    if (B == 0 || N == 0 || (!need_w && !a->grad_x && !a->grad_y))
        return FC_OK;

    wt = fc_cpu_alloc(P * Np, sizeof(real));
    scratch = fc_cpu_alloc(nth * FC_SGP_ROW_SCRATCH(alg->D, Np), sizeof(real));
    partial = need_w ? fc_cpu_alloc(chunks * P * Np, sizeof(real)) : NULL;
    if (!wt || !scratch || (need_w && !partial)) {
        st = FC_ERR_NOMEM;
        goto done;
    }
    FC_T(sgp_transpose_weight)(a->weight, N, P, wt, Np);
    fc_plan_build(alg, FC_J, FC_PATH, FC_I, FC_K, &pl.o);
    fc_plan_build(alg, FC_I, FC_PATH, FC_J, FC_K, &pl.gx);
    fc_plan_build(alg, FC_K, FC_PATH, FC_J, FC_I, &pl.gy);
    fc_plan_build(alg, FC_PATH, FC_J, FC_I, FC_K, &pl.gw);

    FC_OMP(parallel num_threads(nth))
    {
        real *buf = scratch + fc_cpu_thread_id() * FC_SGP_ROW_SCRATCH(alg->D, Np);
        FC_OMP(for schedule(static))
        for (int64_t c = 0; c < chunks; ++c) {
            real *gwt = need_w ? partial + c * P * Np : NULL;
            if (gwt)
                FC_T(zero)(gwt, P * Np);
            const int64_t b1 = fc_chunk_begin(B, chunks, c + 1);
            for (int64_t b = fc_chunk_begin(B, chunks, c); b < b1; ++b)
                FC_T(sgp_backward_row)(a, &pl, wt, Np, b, buf, gwt);
        }
    }

    if (need_w) {
        /* chunk partials summed in chunk order, whatever thread made each */
        real *gw = a->grad_weight;
        FC_OMP(parallel for schedule(static))
        for (int p = 0; p < P; ++p) {
            real *acc = partial + p * Np;
            for (int64_t c = 1; c < chunks; ++c)
                FC_T(axpy)(acc, partial + (c * P + p) * Np, (real)1, N);
            for (int64_t n = 0; n < N; ++n)
                gw[n * P + p] = acc[n];
        }
    }

done:
    free(wt);
    free(scratch);
    free(partial);
    return st;
}

#undef FC_SGP_ROW_SCRATCH
