/* fcgp_plans.cuh — the algebra's product terms regrouped for the FCGP kernels (fcgp.cu and
 * the lab kernels in benchmarks/lab/), derived at compile time from algebra_traits.cuh. */
#pragma once

#include "algebra_traits.cuh"

namespace fc {
namespace fcgp {
/* ------------------------------------------------------------------------------------ */
/* Plans: the term tables regrouped for the kernels, derived at compile time.            */

/* Pairs (j, p) ordered by j then p; code = i | k << 4 | (sign < 0) << 8. */
template <int ID> struct PairPlan {
    static constexpr int D = AlgebraTraits<ID>::D, T = AlgebraTraits<ID>::T;
    int np;
    short jbegin[D + 1];
    unsigned char pj[T], pp[T];
    short tbegin[T + 1];
    unsigned short code[T];
    unsigned char term_pair[T]; /* the pair of table term t */
};

template <int ID> constexpr PairPlan<ID> make_pair_plan()
{
    constexpr int D = AlgebraTraits<ID>::D, T = AlgebraTraits<ID>::T, P = AlgebraTraits<ID>::P;
    const AlgebraTable &tb = AlgebraTraits<ID>::table;
    PairPlan<ID> pl{};
    int q = 0, n = 0;
    for (int j = 0; j < D; ++j) {
        pl.jbegin[j] = (short)q;
        bool used[FC_MAX_P] = {};
        for (int t = 0; t < T; ++t)
            if (tb.term[t].j == j)
                used[tb.term[t].path] = true;
        for (int p = 0; p < P; ++p) {
            if (!used[p])
                continue;
            pl.pj[q] = (unsigned char)j;
            pl.pp[q] = (unsigned char)p;
            pl.tbegin[q] = (short)n;
            for (int t = 0; t < T; ++t)
                if (tb.term[t].j == j && tb.term[t].path == p) {
                    pl.code[n++] = (unsigned short)(tb.term[t].i | tb.term[t].k << 4 | (tb.term[t].sign < 0) << 8);
                    pl.term_pair[t] = (unsigned char)q;
                }
            ++q;
        }
    }
    pl.jbegin[D] = (short)q;
    pl.tbegin[q] = (short)n;
    pl.np = q;
    return pl;
}

/* Per path p: the x components (xc), y components (yc) and outputs (jc) it touches, and its
 * terms grouped by output slot s: code[tbeg[p][s] .. tbeg[p][s+1]) = xslot | yslot << 4 |
 * (sign < 0) << 8. */
template <int ID> struct PathPlan {
    static constexpr int P = AlgebraTraits<ID>::P, T = AlgebraTraits<ID>::T;
    unsigned char nx[P], ny[P], nj[P];
    unsigned char xc[P][8], yc[P][8], jc[P][8];
    short tbeg[P][9];
    unsigned short code[T];
    int max_nx, max_ny, max_nj;
};

template <int ID> constexpr PathPlan<ID> make_path_plan()
{
    constexpr int D = AlgebraTraits<ID>::D, T = AlgebraTraits<ID>::T, P = AlgebraTraits<ID>::P;
    const AlgebraTable &tb = AlgebraTraits<ID>::table;
    PathPlan<ID> pl{};
    int n = 0;
    for (int p = 0; p < P; ++p) {
        int xs[FC_MAX_D] = {}, ys[FC_MAX_D] = {}, js[FC_MAX_D] = {};
        for (int c = 0; c < D; ++c)
            xs[c] = ys[c] = js[c] = -1;
        int nx = 0, ny = 0, nj = 0;
        for (int c = 0; c < D; ++c)
            for (int t = 0; t < T; ++t)
                if (tb.term[t].path == p) {
                    if (tb.term[t].i == c && xs[c] < 0)
                        xs[c] = nx, pl.xc[p][nx++] = (unsigned char)c;
                    if (tb.term[t].k == c && ys[c] < 0)
                        ys[c] = ny, pl.yc[p][ny++] = (unsigned char)c;
                    if (tb.term[t].j == c && js[c] < 0)
                        js[c] = nj, pl.jc[p][nj++] = (unsigned char)c;
                }
        pl.nx[p] = (unsigned char)nx;
        pl.ny[p] = (unsigned char)ny;
        pl.nj[p] = (unsigned char)nj;
        pl.max_nx = nx > pl.max_nx ? nx : pl.max_nx;
        pl.max_ny = ny > pl.max_ny ? ny : pl.max_ny;
        pl.max_nj = nj > pl.max_nj ? nj : pl.max_nj;
        for (int s = 0; s < nj; ++s) {
            pl.tbeg[p][s] = (short)n;
            for (int t = 0; t < T; ++t)
                if (tb.term[t].path == p && tb.term[t].j == pl.jc[p][s])
                    pl.code[n++] = (unsigned short)(xs[tb.term[t].i] | ys[tb.term[t].k] << 4 | (tb.term[t].sign < 0) << 8);
        }
        pl.tbeg[p][nj] = (short)n;
    }
    return pl;
}

template <int ID> struct Plans {
    static constexpr PairPlan<ID> pair = make_pair_plan<ID>();
    static constexpr PathPlan<ID> path = make_path_plan<ID>();
    static_assert(path.max_nx <= 8 && path.max_ny <= 8 && path.max_nj <= 8, "path component lists hold 8");
};

/* The paths in slot order: by output grade, stably. gz's prepared W copy lies in it, so that an output
 * component's paths are side by side (fcgp_wgmma_gz.cuh), and so does the forward's W^T in stage
 * order where a CTA takes a group of components (Cfg's CG, fcgp_wgmma.cuh), so that a group's paths
 * are one run. */
struct PathSlots {
    unsigned char path[FC_MAX_P];  /* slot -> path */
    unsigned char slot[FC_MAX_P];  /* path -> slot */
    unsigned char first[FC_MAX_D]; /* j -> the slot of its first pair */
    bool ok;                       /* every j's pairs lie in consecutive slots, in pair order */
};
template <int ID> constexpr PathSlots make_path_slots()
{
    const AlgebraTable &tb = AlgebraTraits<ID>::table;
    const auto &pl = Plans<ID>::pair;
    PathSlots s{};
    int grade_out[FC_MAX_P] = {}, n = 0;
    for (int t = 0; t < tb.T; ++t)
        grade_out[tb.term[t].path] = tb.grade[tb.term[t].j];
    for (int g = 0; g < tb.G; ++g)
        for (int p = 0; p < tb.P; ++p)
            if (grade_out[p] == g) {
                s.path[n] = (unsigned char)p;
                s.slot[p] = (unsigned char)n++;
            }
    s.ok = n == tb.P;
    for (int j = 0; j < tb.D; ++j) {
        s.first[j] = s.slot[pl.pp[pl.jbegin[j]]];
        for (int q = pl.jbegin[j]; q < pl.jbegin[j + 1]; ++q)
            s.ok = s.ok && s.slot[pl.pp[q]] == s.first[j] + (q - pl.jbegin[j]);
    }
    return s;
}

} // namespace fcgp
} // namespace fc
