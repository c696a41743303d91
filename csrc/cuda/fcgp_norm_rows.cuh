/* fcgp_norm_rows.cuh — a row's grade norm and the norm backward's coefficient, as every FCGP
 * kernel that forms or undoes the grade-wise RMSNorm computes them (fcgp.cu's fwd_finalize,
 * norm_bwd and norm_stats; fcgp_sm90a.cu's go_rows): one definition, so that they agree bit for
 * bit. */
#pragma once

#include <cstdint>

#include "../fc.h" /* FC_NORM_EPS */
#include "common.cuh" /* load */

namespace fc {
namespace fcgp {

/* A row's grade-g norm r_g: the forward's saved norms when given, else sqrt(sum of the nparts
 * partial sums (each (B, G)) / N_out + eps), as the forward forms it. */
template <class C>
__device__ __forceinline__ C row_norm(const C *norms, const C *partial, int nparts, int64_t B, int64_t b, int G, int g,
                                      int64_t No)
{
    if (norms)
        return norms[b * G + g];
    C q = 0;
    for (int s = 0; s < nparts; ++s)
        q += partial[((int64_t)s * B + b) * G + g];
    if (No > 0)
        q /= (C)No;
    return sqrt(q + (C)FC_NORM_EPS);
}

/* The norm backward's coefficient of grade g from the row's dot_g (of gout with v) and 1 / r_g:
 * dot_g / (N_out r_g) when v is out (FROM_OUT), dot_g / (N_out r_g^3) when v is o; one formula for
 * norm_bwd, norm_stats and go_rows. */
template <bool FROM_OUT, class C> __device__ __forceinline__ C norm_coef(C dot, C inv, int64_t No)
{
    return No > 0 ? dot * inv * (FROM_OUT ? C(1) : inv * inv) / (C)No : C(0);
}

/* norm_stats' and go_rows' elements a thread a load: 16 bytes of the wider of the two types */
template <class Tv, class Tg> __host__ __device__ constexpr int stats_run()
{
    return 16 / (sizeof(Tv) > sizeof(Tg) ? sizeof(Tv) : sizeof(Tg));
}

/* V adjacent elements as one load (aligned to their size) */
template <class T, int V> struct alignas(V * sizeof(T)) ElemRun {
    T e[V];
};

/* V elements from p (aligned to their size when V > 1), in the compute type */
template <int V, class T, class C>
__device__ __forceinline__ void load_run(const T *p, C (&out)[V])
{
    const ElemRun<T, V> r = *(const ElemRun<T, V> *)p;
#pragma unroll
    for (int k = 0; k < V; ++k)
        out[k] = load<T>(r.e[k]);
}

} // namespace fcgp
} // namespace fc
