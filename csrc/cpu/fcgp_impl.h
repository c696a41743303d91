/* fcgp_impl.h — the FCGP kernels for one compute type. fcgp.c includes it once per type
 * with `real` (float or double) and FC_T(name) (name##_f32 / name##_f64) defined.
 *
 *   x, y, grad_x, grad_y      (D, B, N_in)
 *   out, grad_out             (D, B, N_out)
 *   weight, grad_weight       (P, N_in, N_out)
 *   norms                     (B, G)
 *
 * Work is grouped per (output component j, path p): the pairwise product
 * z[b, n] = sum of its terms' sign xg_i yg_k, then o_j += z @ W[p]. Rows go in blocks of
 * FC_ROWS so a weight row is reused by the whole block while it sits in L1.
 */
#include "common.h"

/* What every block of one call shares. */
typedef struct FC_T(fcgp_ctx) {
    const fc_args *a;
    fc_term terms[FC_MAX_T]; /* grouped pair by pair */
    fc_pair pairs[FC_MAX_T];
    int np;
    const real *xg, *yg; /* backward: the gated inputs of every row, (D, B, N_in); x, y without the gate */
    real *xgb, *ygb;     /* their buffers, gate on only */
    real *gof;        /* backward with the norm: dL/do of every row, (D, B, N_out) */
    const real *go;   /* backward: gof, or grad_out itself without the norm */
    real *wt;         /* backward: W transposed, (P, N_out, N_in) */
} FC_T(fcgp_ctx);

/* o_j[r, :] += z_{j,p}[r, :] @ W[p] for every pair, over rb rows.
 * xg, yg: row 0 of the block, component A at + A * xcs, rows N_in apart;
 * o: row 0 of the block, component A at + A * ocs, rows N_out apart; z: rb * N_in. */
static inline void FC_T(fcgp_block_product)(const FC_T(fcgp_ctx) *c, const real *xg, const real *yg,
                                            int64_t xcs, int64_t rb, real *z, real *o, int64_t ocs)
{
    const int64_t Ni = c->a->N_in, No = c->a->N_out;
    for (int q = 0; q < c->np; ++q) {
        const fc_pair pr = c->pairs[q];
        FC_T(zero)(z, rb * Ni);
        for (int t = pr.t0; t < pr.t1; ++t)
            FC_T(add_prod)(z, xg + c->terms[t].i * xcs, yg + c->terms[t].k * xcs, (real)c->terms[t].sign,
                           rb * Ni);
        const real *Wp = (const real *)c->a->weight + pr.path * Ni * No;
        real *oj = o + pr.j * ocs;
        for (int64_t n = 0; n < Ni; ++n)
            for (int64_t r = 0; r < rb; ++r)
                FC_T(axpy)(oj + r * No, Wp + n * No, z[r * Ni + n], No);
    }
}

/* The forward of rows [b0, b0 + rb). buf: (2 D + 1) FC_ROWS N_in elements. */
FC_CPU_HOT
static void FC_T(fcgp_forward_block)(const FC_T(fcgp_ctx) *c, int64_t b0, int64_t rb, real *buf)
{
    const fc_args *a = c->a;
    const fc_algebra *alg = a->alg;
    const int D = alg->D, G = alg->G;
    const int64_t B = a->B, Ni = a->N_in, No = a->N_out, gcs = FC_ROWS * Ni;
    real *xg = buf, *yg = xg + D * gcs, *z = yg + D * gcs;
    real *out = (real *)a->out + b0 * No;

    /* a block's rows are contiguous within each component */
    FC_T(gelu_gate)(a->gate, D, (const real *)a->x + b0 * Ni, B * Ni, rb * Ni, rb * Ni, xg, gcs, NULL, NULL);
    FC_T(gelu_gate)(a->gate, D, (const real *)a->y + b0 * Ni, B * Ni, rb * Ni, rb * Ni, yg, gcs, NULL, NULL);
    for (int A = 0; A < D; ++A)
        FC_T(zero)(out + A * B * No, rb * No);
    FC_T(fcgp_block_product)(c, xg, yg, gcs, rb, z, out, B * No);
    if (a->normalize)
        for (int64_t r = 0; r < rb; ++r) {
            real rg[FC_MAX_G];
            FC_T(grade_norm)(alg, out + r * No, B * No, No, rg);
            if (a->norms)
                memcpy((real *)a->norms + (b0 + r) * G, rg, (size_t)G * sizeof(real));
        }
}

static fc_status FC_T(fcgp_forward)(const fc_args *a)
{
    const int D = a->alg->D;
    const int64_t B = a->B, blocks = (B + FC_ROWS - 1) / FC_ROWS;
    const int64_t per = (2 * (int64_t)D + 1) * FC_ROWS * a->N_in;
    const int nth = fc_cpu_threads();
    real *scratch = NULL;
    FC_T(fcgp_ctx) c = {0};
    fc_status st = FC_OK;

    if (B == 0)
        return FC_OK;
    c.a = a;
    c.np = fc_group_pairs(a->alg, c.terms, c.pairs);
    scratch = fc_cpu_alloc(nth * per, sizeof(real));
    if (!scratch) {
        st = FC_ERR_NOMEM;
        goto done;
    }

    FC_OMP(parallel num_threads(nth))
    {
        real *buf = scratch + fc_cpu_thread_id() * per;
        FC_OMP(for schedule(static))
        for (int64_t blk = 0; blk < blocks; ++blk)
            FC_T(fcgp_forward_block)(&c, blk * FC_ROWS, fc_min64(FC_ROWS, B - blk * FC_ROWS), buf);
    }

done:
    free(scratch);
    return st;
}

/* Per-thread scratch of the backward: gxg, gyg (D, FC_ROWS, N_in); z, gz and the gates'
 * Phi and phi of x and y (FC_ROWS, N_in). The weight-gradient pass reuses it for its
 * (FC_ROWS, FC_NTILE) z tiles. */
static int64_t FC_T(fcgp_backward_scratch)(int D, int64_t Ni)
{
    const int64_t per = (2 * (int64_t)D + 6) * FC_ROWS * Ni;
    return per > FC_ROWS * FC_NTILE ? per : FC_ROWS * FC_NTILE;
}

/* The backward of rows [b0, b0 + rb), all but the weight gradient: gates into c->xgb/ygb
 * (gate on), dL/do into c->gof when normalising, then grad_x and grad_y. */
FC_CPU_HOT
static void FC_T(fcgp_backward_block)(const FC_T(fcgp_ctx) *c, int64_t b0, int64_t rb, real *buf)
{
    const fc_args *a = c->a;
    const fc_algebra *alg = a->alg;
    const int D = alg->D, G = alg->G;
    const int64_t B = a->B, Ni = a->N_in, No = a->N_out, BNi = B * Ni, BNo = B * No;
    const int64_t rs = FC_ROWS * Ni, len = rb * Ni;
    const real *x = (const real *)a->x + b0 * Ni, *y = (const real *)a->y + b0 * Ni;
    const real *gout = (const real *)a->grad_out + b0 * No;
    const real *xg = c->xg + b0 * Ni, *yg = c->yg + b0 * Ni, *go = c->go + b0 * No;
    real *gxg = buf, *gyg = gxg + D * rs, *z = gyg + D * rs;
    real *gz = z + rs, *px = gz + rs, *dpx = px + rs, *py = dpx + rs, *dpy = py + rs;

    if (a->gate) {
        FC_T(gelu_gate)(1, D, x, BNi, len, len, c->xgb + b0 * Ni, BNi, px, dpx);
        FC_T(gelu_gate)(1, D, y, BNi, len, len, c->ygb + b0 * Ni, BNi, py, dpy);
    }
    if (a->normalize) {
        real *o = c->gof + b0 * No;
        for (int A = 0; A < D; ++A)
            FC_T(zero)(o + A * BNo, rb * No);
        FC_T(fcgp_block_product)(c, xg, yg, BNi, rb, z, o, BNo);
        for (int64_t r = 0; r < rb; ++r) {
            real rg[FC_MAX_G];
            if (a->norms)
                memcpy(rg, (const real *)a->norms + (b0 + r) * G, (size_t)G * sizeof(real));
            else
                FC_T(grade_rms)(alg, o + r * No, BNo, No, rg);
            FC_T(grade_norm_backward)(alg, o + r * No, BNo, gout + r * No, BNo, No, rg, o + r * No, BNo);
        }
    }
    if (!a->grad_x && !a->grad_y)
        return;
    FC_T(zero)(gxg, D * len);
    FC_T(zero)(gyg, D * len);
    for (int q = 0; q < c->np; ++q) {
        const fc_pair pr = c->pairs[q];
        /* gz = go_j @ W[p]^T over the block */
        const real *wtp = c->wt + pr.path * No * Ni, *goj = go + pr.j * BNo;
        FC_T(zero)(gz, len);
        for (int64_t m = 0; m < No; ++m)
            for (int64_t r = 0; r < rb; ++r)
                FC_T(axpy)(gz + r * Ni, wtp + m * Ni, goj[r * No + m], Ni);
        for (int t = pr.t0; t < pr.t1; ++t) {
            const fc_term term = c->terms[t];
            if (a->grad_x)
                FC_T(add_prod)(gxg + term.i * len, gz, yg + term.k * BNi, (real)term.sign, len);
            if (a->grad_y)
                FC_T(add_prod)(gyg + term.k * len, gz, xg + term.i * BNi, (real)term.sign, len);
        }
    }
    /* without the gate (no Phi) these copy gxg, gyg out */
    if (a->grad_x)
        FC_T(gelu_gate_backward)(D, x, BNi, gxg, len, a->gate ? px : NULL, dpx, len, (real *)a->grad_x + b0 * Ni,
                                 BNi);
    if (a->grad_y)
        FC_T(gelu_gate_backward)(D, y, BNi, gyg, len, a->gate ? py : NULL, dpy, len, (real *)a->grad_y + b0 * Ni,
                                 BNi);
}

/* grad_weight[p, n0 : n0 + nl, :] = sum over rows and the pairs of path p of
 * z_{j,p}[b, n] go_j[b, :]. One task owns its tile and walks the rows in order, so the
 * sum is the same for any thread count. z: FC_ROWS * FC_NTILE scratch. */
FC_CPU_HOT
static void FC_T(fcgp_weight_grad_tile)(const FC_T(fcgp_ctx) *c, int p, int64_t n0, int64_t nl, real *z)
{
    const int64_t B = c->a->B, Ni = c->a->N_in, No = c->a->N_out;
    real *gw = (real *)c->a->grad_weight + (p * Ni + n0) * No;
    FC_T(zero)(gw, nl * No);
    for (int64_t b0 = 0; b0 < B; b0 += FC_ROWS) {
        const int64_t rb = fc_min64(FC_ROWS, B - b0);
        for (int q = 0; q < c->np; ++q) {
            const fc_pair pr = c->pairs[q];
            if (pr.path != p)
                continue;
            FC_T(zero)(z, rb * nl);
            for (int t = pr.t0; t < pr.t1; ++t)
                for (int64_t r = 0; r < rb; ++r) {
                    const int64_t off = (b0 + r) * Ni + n0;
                    FC_T(add_prod)(z + r * nl, c->xg + c->terms[t].i * B * Ni + off,
                                   c->yg + c->terms[t].k * B * Ni + off, (real)c->terms[t].sign, nl);
                }
            const real *goj = c->go + pr.j * B * No + b0 * No;
            for (int64_t r = 0; r < rb; ++r)
                for (int64_t n = 0; n < nl; ++n)
                    FC_T(axpy)(gw + n * No, goj + r * No, z[r * nl + n], No);
        }
    }
}

static fc_status FC_T(fcgp_backward)(const fc_args *a)
{
    const int D = a->alg->D, P = a->alg->P;
    const int64_t B = a->B, Ni = a->N_in, No = a->N_out, blocks = (B + FC_ROWS - 1) / FC_ROWS;
    const int64_t per = FC_T(fcgp_backward_scratch)(D, Ni);
    const int need_xy = a->grad_x || a->grad_y;
    const int nth = fc_cpu_threads();
    real *scratch = NULL;
    FC_T(fcgp_ctx) c = {0};
    fc_status st = FC_OK;

    if (a->grad_weight)
        FC_T(zero)(a->grad_weight, P * Ni * No);
    if (B == 0 || Ni == 0 || (!need_xy && !a->grad_weight))
        return FC_OK;
    c.a = a;
    c.np = fc_group_pairs(a->alg, c.terms, c.pairs);

    /* The gated inputs and dL/do of every row are kept: the weight-gradient pass reads
     * them per feature tile, across all rows. Without the gate they are x and y. */
    c.xgb = a->gate ? fc_cpu_alloc(D * B * Ni, sizeof(real)) : NULL;
    c.ygb = a->gate ? fc_cpu_alloc(D * B * Ni, sizeof(real)) : NULL;
    c.xg = a->gate ? c.xgb : (const real *)a->x;
    c.yg = a->gate ? c.ygb : (const real *)a->y;
    c.gof = a->normalize ? fc_cpu_alloc(D * B * No, sizeof(real)) : NULL;
    c.wt = need_xy ? fc_cpu_alloc(P * No * Ni, sizeof(real)) : NULL;
    scratch = fc_cpu_alloc(nth * per, sizeof(real));
    if (!c.xg || !c.yg || (a->normalize && !c.gof) || (need_xy && !c.wt) || !scratch) {
        st = FC_ERR_NOMEM;
        goto done;
    }
    c.go = a->normalize ? c.gof : (const real *)a->grad_out;
    /* W[p]^T, so that gz = go_j @ W[p]^T is also a sequence of unit-stride row updates */
    if (c.wt) {
        const real *W = a->weight;
        for (int p = 0; p < P; ++p)
            for (int64_t n = 0; n < Ni; ++n)
                for (int64_t m = 0; m < No; ++m)
                    c.wt[(p * No + m) * Ni + n] = W[(p * Ni + n) * No + m];
    }

    FC_OMP(parallel num_threads(nth))
    {
        real *buf = scratch + fc_cpu_thread_id() * per;
        FC_OMP(for schedule(static))
        for (int64_t blk = 0; blk < blocks; ++blk)
            FC_T(fcgp_backward_block)(&c, blk * FC_ROWS, fc_min64(FC_ROWS, B - blk * FC_ROWS), buf);
        if (a->grad_weight) {
            const int64_t ntiles = (Ni + FC_NTILE - 1) / FC_NTILE;
            /* the implicit barrier of the loop above: every row's xg, yg, go are ready */
            FC_OMP(for schedule(dynamic))
            for (int64_t task = 0; task < P * ntiles; ++task) {
                const int64_t n0 = task % ntiles * FC_NTILE;
                FC_T(fcgp_weight_grad_tile)(&c, (int)(task / ntiles), n0, fc_min64(FC_NTILE, Ni - n0), buf);
            }
        }
    }

done:
    free(c.xgb);
    free(c.ygb);
    free(c.gof);
    free(c.wt);
    free(scratch);
    return st;
}
