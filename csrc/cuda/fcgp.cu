/* fcgp.cu — fused MVGELU -> fully connected geometric product -> grade RMSNorm on CUDA,
 * forward and backward (SPEC section 2), and the extern "C" entry points of fc.h.
 *
 * Shapes: x, y, grad_x, grad_y (D, B, N_in); out, grad_out (D, B, N_out);
 * weight, grad_weight (P, N_in, N_out); norms (B, G) in the compute type. T' = the distinct
 * (output component j, path p) pairs; z_{j,p}[b, n] = sum over the pair's terms of
 * sign * xg_i[b, n] * yg_k[b, n].
 *
 *   forward      o_j = sum_p z_{j,p} @ W[p]                 (fwd_kernel, + fwd_finalize)
 *   backward     go  = RMSNorm backward, from the forward's   (norm_bwd; fwd_kernel when
 *                out and norms when given, else o recomputed  out is not given)
 *                G_{j,p} = go_j @ W[p]^T, scattered into gxg_i / gyg_k by the pair's terms,
 *                then the GELU backward                     (gz_kernel)
 *                gW[p] = sum_j z_{j,p}^T @ go_j             (gw_kernel, + gw_reduce)
 *
 * On a compute-capability 9.0 GPU, for Cl(2,0) and Cl(3,0) with tf32 or bf16 products, the
 * forward GEMM (also the one a backward without out recomputes) and the backward are the Hopper
 * kernels of fcgp_sm90a.h (wgmma with TMA tiles) wherever their switches and sizes allow; the
 * Hopper forward finishes the grade norm in its own epilogue (no fwd_finalize pass); the
 * Hopper backward takes only the norm's row statistics (norm_stats) and forms go transposed
 * itself; it writes all three gradients (its gW sums on chip: no gw_reduce). Everything around
 * them (conversions, the prepass of the mma.sync gW, fwd_finalize, norm_bwd, norm_stats) stays
 * here.
 *
 * Design. Every GEMM kernel streams K in stages: cp.async copies the raw tiles into shared
 * memory, one pass turns them into the operand tiles (GELU of x and y, tf32 rounding,
 * the pairwise products of gW), then the warps run mma.sync (tf32 m16n8k8, bf16/f16
 * m16n8k16, fp32 accumulation) or fp32/fp64 FMA on them while the next stage loads.
 * No T' x B x N tensor ever reaches device memory:
 *  - forward: a block owns BM rows x BN output columns of all D components; each warp owns
 *    one output component j (so its pairs and their terms come from a small table in the
 *    kernel parameters, warp-uniform: unrolling all eight warp roles would multiply the code
 *    eightfold) and forms z_{j,p} in its A fragments from the xg_i, yg_k fragments. The
 *    grade norms take one light extra pass: the epilogue writes o and per-column-block
 *    partial sums of |sum_A s_A o_A^2|; fwd_finalize sums them in fixed order and scales.
 *    Column blocks are the fastest grid index, so co-resident blocks share x and y rows.
 *  - gz: a block owns a small BM x BN tile of (rows, N_in) and keeps G for every pair of
 *    the tile in registers (warps own CAP pairs each) over the whole K = N_out loop, then
 *    stages G in shared memory and each thread applies the terms to its positions, forming
 *    xg, yg there from x, y (algebras with many pairs take several passes over K).
 *  - gW: a block owns a tile of one path's W gradient and walks the batch; z^T tiles are
 *    formed in shared memory from precomputed xg, yg; split over the batch only when the
 *    grid would be small, with fixed-order partials reduced by gw_reduce.
 * Everything is deterministic (no atomics). float32 with precision "bf16" converts x, y,
 * W (and grad_out) to bf16 in the workspace first and runs the bf16 kernels.
 * fc_args.gate = 0 (the plain product) is a runtime, block-uniform flag, not a template
 * parameter (which would double every instantiation): the forward staging pass multiplies
 * by 1 instead of Phi(x_0), the backward skips the GELU prepass (xg = x) and the GELU
 * backward (d/dx = d/dxg).
 * The backward keeps no o when the caller gives the forward's out with the norms (the torch
 * op does): o = out r, and norm_bwd forms go from out directly.
 */
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "algebra_traits.cuh"
#include "common.cuh"
#include "fcgp_norm_rows.cuh"
#include "fcgp_plans.cuh"
#include "fcgp_sm90a.h"
#include "mma_ptx.cuh"
#include "pdl.cuh"

namespace fc {
namespace fcgp {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

/* The value written to an operand tile: tf32-rounded for the tf32 path, else the type. */
template <int MODE, class E> __device__ __forceinline__ E operand(typename Compute<E>::type v)
{
    if constexpr (MODE == kTF32)
        return __uint_as_float(to_tf32(v));
    else
        return store<E>(v);
}

/* Copy a shared region of `bytes` (a multiple of 16) with the operand rounding. */
template <int MODE> __device__ __forceinline__ void copy_region(void *dst, const void *src, int bytes)
{
    const uint4 *s = (const uint4 *)src;
    uint4 *d = (uint4 *)dst;
    for (int u = threadIdx.x; u < bytes / 16; u += kThreads) {
        uint4 v = s[u];
        if constexpr (MODE == kTF32) {
            v.x = to_tf32(__uint_as_float(v.x));
            v.y = to_tf32(__uint_as_float(v.y));
            v.z = to_tf32(__uint_as_float(v.z));
            v.w = to_tf32(__uint_as_float(v.w));
        }
        d[u] = v;
    }
}

/* Start copying `ntiles` tiles of rows x cols elements (cols a multiple of 16 bytes) from
 * global memory into shared memory: tile t, row r, column c of the destination is
 * src[t * src_ts + (row0 + r) * src_rs + col0 + c], zero past row_lim / col_lim. vec: the
 * source rows are 16-byte aligned (cp.async), else element loads. */
template <class E>
__device__ __forceinline__ void load_tiles(E *dst, int dst_rs, int dst_ts, int ntiles, int rows, int cols,
                                           const E *__restrict__ src, int64_t src_ts, int64_t src_rs, int64_t row0,
                                           int64_t row_lim, int64_t col0, int64_t col_lim, bool vec)
{
    constexpr int V = 16 / sizeof(E);
    const int cpr = cols / V, per_tile = rows * cpr, total = ntiles * per_tile;
    for (int u = threadIdx.x; u < total; u += kThreads) {
        const int t = u / per_tile, rem = u - t * per_tile, r = rem / cpr, c = (rem - r * cpr) * V;
        E *d = dst + t * dst_ts + r * dst_rs + c;
        const int64_t gr = row0 + r, gc = col0 + c;
        const bool row_ok = gr < row_lim;
        const E *s = src + t * src_ts + gr * src_rs + gc;
        if (vec) {
            int bytes = 0;
            if (row_ok && gc < col_lim)
                bytes = (int)(col_lim - gc < V ? col_lim - gc : V) * (int)sizeof(E);
            copy16(d, bytes ? s : src, bytes);
        } else {
#pragma unroll
            for (int e = 0; e < V; ++e)
                d[e] = row_ok && gc + e < col_lim ? s[e] : store<E>(0);
        }
    }
}

/* Where this lane's accumulator element (r, c, e) lies in its warp's tile: in the mma.sync
 * m16n8 fragment of row tile r and column tile c (tensor cores, TC), or in the FMA layout
 * (the lanes as 8 rows x 4 columns, r striding 8 rows and c 4 columns; e is 0). */
template <bool TC> __device__ __forceinline__ void acc_pos(int r, int c, int e, int lane, int &row, int &col)
{
    if constexpr (TC) {
        row = r * 16 + (lane >> 2) + ((e >> 1) << 3);
        col = c * 8 + 2 * (lane & 3) + (e & 1);
    } else {
        row = (lane >> 2) + 8 * r;
        col = (lane & 3) + 4 * c;
    }
}

/* The B fragments of column tiles 2 n2 and 2 n2 + 1 from one ldmatrix.x4 (16-bit types). */
template <int NT> __device__ __forceinline__ void bfrag_pair(uint32_t (&bf)[NT][2], int n2, const uint32_t (&r4)[4])
{
    bf[2 * n2][0] = r4[0];
    bf[2 * n2][1] = r4[1];
    bf[2 * n2 + 1][0] = r4[2];
    bf[2 * n2 + 1][1] = r4[3];
}

/* The B fragments of NT column tiles from a shared tile stored K-row-major (k's row at
 * k * stride, N contiguous), columns n0 .. n0 + 8 NT: tf32 two loads a tile (rows t and t + 4,
 * column g), 16-bit types one transposing ldmatrix a pair of tiles. */
template <int MODE, int NT, class E>
__device__ __forceinline__ void bfrags_krow(uint32_t (&bf)[NT][2], const E *tile, int stride, int n0, int lane)
{
    if constexpr (MODE == kTF32) {
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            bf[nt][0] = __float_as_uint(tile[t * stride + n0 + nt * 8 + g]);
            bf[nt][1] = __float_as_uint(tile[(t + 4) * stride + n0 + nt * 8 + g]);
        }
    } else {
#pragma unroll
        for (int n2 = 0; n2 < NT / 2; ++n2) {
            uint32_t r4[4];
            const int off = (((lane >> 3) & 1) * 8 + (lane & 7)) * stride + n0 + n2 * 16 + (lane >> 4) * 8;
            ldsm_x4_t(r4, tile + off);
            bfrag_pair(bf, n2, r4);
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* Forward GEMM: o_j[b, m] for BM rows x BN columns of every component.                   */

template <int ID, class E, int MODE> struct FwdCfg {
    using A = AlgebraTraits<ID>;
    using C = typename Compute<E>::type;
    static constexpr int D = A::D, P = A::P, G = A::G;
    static constexpr bool F64 = sizeof(E) == 8;
    /* 128 fp32 accumulators a thread: one output component of a 64 x 64 tile per warp
     * (two components of 32 x 32 at D = 16; fp64 halves the columns) */
    static constexpr int BM = D == 16 ? 32 : 64;
    static constexpr int JPW = D > 8 ? D / 8 : 1; /* components per warp */
    static constexpr int WPJ = D < 8 ? 8 / D : 1; /* warps per component */
    static constexpr int WN = F64 ? (D == 16 ? 16 : 32) : (D == 16 ? 32 : 64);
    static constexpr int BN = WN * WPJ;
    static constexpr int BK = 32 / (int)sizeof(E); /* one mma k-step: 32 bytes of K */
    static constexpr int SK = BK + 16 / (int)sizeof(E); /* 48-byte rows: ldmatrix without conflicts */
    static constexpr int SW = BN + 8;
    static constexpr int XT = BM * SK, WT = BK * SW;
    static constexpr int STAGE = 2 * D * XT + P * WT;
    static constexpr int MT = BM / 16, NT = WN / 8;
    static constexpr size_t RAW_BYTES = (size_t)STAGE * sizeof(E);
    static constexpr size_t SMEM = 2 * RAW_BYTES > (size_t)D * BM * BN * sizeof(C) ? 2 * RAW_BYTES
                                                                                    : (size_t)D * BM * BN * sizeof(C);
    static_assert(SMEM <= 227 * 1024, "forward tile exceeds shared memory");
};

/* dst: (D, B, N_out) in DstT; partial (when NORM): (column blocks, B, G) sums over the
 * block's columns of |sum_{A in g} s_A o_A^2|. gate: 1 MVGELU on x and y, 0 none. */
template <int ID, class E, int MODE, class DstT, bool NORM>
__global__ void __launch_bounds__(kThreads, 1)
    fwd_kernel(const E *__restrict__ x, const E *__restrict__ y, const E *__restrict__ w, DstT *__restrict__ dst,
               typename Compute<E>::type *__restrict__ partial, int64_t B, int64_t Ni, int64_t No, int vec_x,
               int vec_w, int gate, const __grid_constant__ PairPlan<ID> plan)
{
    using Cfg = FwdCfg<ID, E, MODE>;
    using A = AlgebraTraits<ID>;
    using C = typename Compute<E>::type;
    constexpr int D = Cfg::D, P = Cfg::P, G = Cfg::G, BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, SK = Cfg::SK,
                  SW = Cfg::SW, XT = Cfg::XT, WT = Cfg::WT, WN = Cfg::WN, JPW = Cfg::JPW, WPJ = Cfg::WPJ,
                  MT = Cfg::MT, NT = Cfg::NT;
    extern __shared__ __align__(16) unsigned char smem[];
    E *raw = (E *)smem, *work = raw + Cfg::STAGE;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    /* column blocks fastest: the blocks resident together share their rows of x and y, which
     * are then read from memory once, while all of W stays in L2 */
    const int64_t ncb = (No + BN - 1) / BN, cb = blockIdx.x % ncb;
    const int64_t b0 = (int64_t)(blockIdx.x / ncb) * BM, n0 = cb * BN;
    const int ncol0 = (warp % WPJ) * WN;
    const int64_t nk = (Ni + BK - 1) / BK;

    auto load_stage = [&](int64_t k0) {
        load_tiles(raw, SK, XT, D, BM, BK, x, B * Ni, Ni, b0, B, k0, Ni, vec_x);
        load_tiles(raw + D * XT, SK, XT, D, BM, BK, y, B * Ni, Ni, b0, B, k0, Ni, vec_x);
        load_tiles(raw + 2 * D * XT, SW, WT, P, BK, BN, w, Ni * No, No, k0, Ni, n0, No, vec_w);
        cp_commit();
    };

    constexpr bool TC = MODE != kFMA;
    constexpr int AR = TC ? MT : BM / 8, AC = TC ? NT : WN / 4, AE = TC ? 4 : 1;
    C acc[JPW][AR][AC][AE];
    zero_all(acc);

    if (nk > 0)
        load_stage(0);
    for (int64_t kt = 0; kt < nk; ++kt) {
        cp_wait_all();
        __syncthreads();
        /* MVGELU of the x and y tiles (the gate from component 0), W with the operand rounding.
         * Without the gate the factor is 1: an exact copy, in the same pass */
        for (int u = tid; u < 2 * BM * BK; u += kThreads) {
            const int which = u / (BM * BK), rem = u - which * BM * BK, r = rem / BK, k = rem - r * BK;
            const E *s = raw + which * D * XT + r * SK + k;
            E *d = work + which * D * XT + r * SK + k;
            const C ph = gate ? gelu_gate(load<E>(s[0])) : C(1);
#pragma unroll
            for (int a = 0; a < D; ++a)
                d[a * XT] = store<E>(load<E>(s[a * XT]) * ph);
        }
        copy_region<MODE>(work + 2 * D * XT, raw + 2 * D * XT, P * WT * (int)sizeof(E));
        __syncthreads();
        if (kt + 1 < nk)
            load_stage((kt + 1) * BK);

        const E *X = work, *Y = work + D * XT, *W = work + 2 * D * XT;
#pragma unroll
        for (int jj = 0; jj < JPW; ++jj) {
            const int j = warp / WPJ + jj * (kWarps / WPJ);
            const int q1 = plan.jbegin[j + 1];
            for (int q = plan.jbegin[j]; q < q1; ++q) {
                const E *Wp = W + plan.pp[q] * WT;
                const int t0 = plan.tbegin[q], t1 = plan.tbegin[q + 1];
                if constexpr (TC) {
                    uint32_t bf[NT][2];
                    bfrags_krow<MODE>(bf, Wp, SW, ncol0, lane);
                    /* z_{j,p} for all MT row tiles at once: 2 MT independent ldmatrix per term
                     * in flight, then one burst of MT x NT mma */
                    uint32_t af[MT][4];
                    float zf[MT][4];
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            af[mt][e] = 0u;
                            zf[mt][e] = 0.f;
                        }
                    const int arow = (lane & 15) * SK + (lane >> 4) * (16 / (int)sizeof(E));
                    for (int tt = t0; tt < t1; ++tt) {
                        const int code = plan.code[tt];
                        const E *xi = X + (code & 15) * XT + arow, *yk = Y + ((code >> 4) & 15) * XT + arow;
                        uint32_t xa[MT][4], ya[MT][4];
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt) {
                            ldsm_x4(xa[mt], xi + mt * 16 * SK);
                            ldsm_x4(ya[mt], yk + mt * 16 * SK);
                        }
                        if constexpr (MODE == kTF32) {
                            const float sg = (code >> 8) ? -1.f : 1.f;
#pragma unroll
                            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                                for (int e = 0; e < 4; ++e)
                                    zf[mt][e] = fmaf(sg * __uint_as_float(xa[mt][e]), __uint_as_float(ya[mt][e]),
                                                     zf[mt][e]);
                        } else {
                            const uint32_t neg = (code >> 8) ? 0x80008000u : 0u;
#pragma unroll
                            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                                for (int e = 0; e < 4; ++e)
                                    af[mt][e] = hfma2<MODE>(xa[mt][e] ^ neg, ya[mt][e], af[mt][e]);
                        }
                    }
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        if constexpr (MODE == kTF32) {
#pragma unroll
                            for (int e = 0; e < 4; ++e)
                                af[mt][e] = to_tf32(zf[mt][e]);
                        }
#pragma unroll
                        for (int nt = 0; nt < NT; ++nt)
                            mma<MODE>(acc[jj][mt][nt], af[mt], bf[nt][0], bf[nt][1]);
                    }
                } else {
                    const int lr = lane >> 2, lc = lane & 3;
#pragma unroll
                    for (int k = 0; k < BK; ++k) {
                        C wv[AC], z[AR];
#pragma unroll
                        for (int c = 0; c < AC; ++c)
                            wv[c] = Wp[k * SW + ncol0 + lc + 4 * c];
#pragma unroll
                        for (int r = 0; r < AR; ++r)
                            z[r] = 0;
                        for (int tt = t0; tt < t1; ++tt) {
                            const int code = plan.code[tt];
                            const E *xi = X + (code & 15) * XT + lr * SK + k, *yk = Y + ((code >> 4) & 15) * XT + lr * SK + k;
                            const C sg = (code >> 8) ? C(-1) : C(1);
#pragma unroll
                            for (int r = 0; r < AR; ++r)
                                z[r] = fma(sg * xi[8 * r * SK], yk[8 * r * SK], z[r]);
                        }
#pragma unroll
                        for (int r = 0; r < AR; ++r)
#pragma unroll
                            for (int c = 0; c < AC; ++c)
                                acc[jj][r][c][0] = fma(z[r], wv[c], acc[jj][r][c][0]);
                    }
                }
            }
        }
    }
    __syncthreads(); /* the staging below reuses the stage buffers */

    C *sO = (C *)smem; /* (D, BM, BN) */
#pragma unroll
    for (int jj = 0; jj < JPW; ++jj) {
        const int j = warp / WPJ + jj * (kWarps / WPJ);
#pragma unroll
        for (int r = 0; r < AR; ++r)
#pragma unroll
            for (int c = 0; c < AC; ++c)
#pragma unroll
                for (int e = 0; e < AE; ++e) {
                    int row, col;
                    acc_pos<TC>(r, c, e, lane, row, col);
                    sO[(j * BM + row) * BN + (ncol0 + col)] = acc[jj][r][c][e];
                }
    }
    __syncthreads();

    for (int r = warp; r < BM; r += kWarps) {
        const int64_t b = b0 + r;
        C part[G];
#pragma unroll
        for (int g = 0; g < G; ++g)
            part[g] = 0;
        for (int col = lane; col < BN; col += 32) {
            const int64_t m = n0 + col;
            C v[D];
#pragma unroll
            for (int a = 0; a < D; ++a)
                v[a] = sO[(a * BM + r) * BN + col];
            if (b < B && m < No) {
#pragma unroll
                for (int a = 0; a < D; ++a)
                    dst[((int64_t)a * B + b) * No + m] = store<DstT>(v[a]);
            }
            if constexpr (NORM) {
                C t[G];
#pragma unroll
                for (int g = 0; g < G; ++g)
                    t[g] = 0;
                static_for<D>([&](auto ac) {
                    constexpr int a = decltype(ac)::value;
                    constexpr int g = A::table.grade[a], s = A::table.grade_sign[a];
                    if constexpr (s != 0)
                        t[g] += C(s) * v[a] * v[a];
                });
#pragma unroll
                for (int g = 0; g < G; ++g)
                    part[g] += fabs(t[g]);
            }
        }
        if constexpr (NORM) {
#pragma unroll
            for (int g = 0; g < G; ++g) {
#pragma unroll
                for (int off = 16; off > 0; off >>= 1)
                    part[g] += __shfl_xor_sync(0xffffffffu, part[g], off);
            }
            if (partial && lane == 0 && b < B) {
#pragma unroll
                for (int g = 0; g < G; ++g)
                    partial[(cb * B + b) * G + g] = part[g];
            }
        }
    }
}

/* out = o / r_g per row, r_g = sqrt(sum of the nparts partials / N_out + eps); o may be out. */
template <int ID, class C, class Tout>
__global__ void __launch_bounds__(128) fwd_finalize(const C *o, Tout *out, C *__restrict__ norms,
                                                    const C *__restrict__ partial, int nparts, int64_t B, int64_t No)
{
    using A = AlgebraTraits<ID>;
    constexpr int D = A::D, G = A::G;
    const int64_t b = blockIdx.x;
    C inv[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
        const C r = row_norm<C>(nullptr, partial, nparts, B, b, G, g, No);
        inv[g] = C(1) / r;
        if (norms && threadIdx.x == 0)
            norms[b * G + g] = r;
    }
    for (int64_t m = threadIdx.x; m < No; m += blockDim.x) {
        static_for<D>([&](auto ac) {
            constexpr int a = decltype(ac)::value;
            constexpr int g = A::table.grade[a];
            const int64_t i = ((int64_t)a * B + b) * No + m;
            out[i] = store<Tout>(o[i] * inv[g]);
        });
    }
}

/* go_A = gout_A / r_g - dot_g sign(t_g) s_A o_A / (N_out r_g^3), dot_g = sum of gout_A o_A over
 * the grade, one row per block; go may be o. r from norms when given, else from the forward
 * partials. FROM_OUT: v is the forward's output out = o / r instead of o (Tv its type), and
 * with dot'_g = sum gout_A out_A = dot_g / r_g the same go is gout_A / r_g - dot'_g sign(t_g)
 * s_A out_A / (N_out r_g): the backward then needs no recomputed o. The Hopper backward takes
 * only the row statistics (1 / r_g and coef_g = dot'_g / (N_out r_g), or dot_g / (N_out r_g^3)
 * from o) from norm_stats below and forms go as it transposes it (fcgp_sm90a.cu). */
template <int ID, class C, class Tv, class Tg, class Tio, bool FROM_OUT>
__global__ void __launch_bounds__(128) norm_bwd(const Tv *v_in, const Tio *__restrict__ gout,
                                                const C *__restrict__ norms, const C *__restrict__ partial, int nparts,
                                                Tg *go, int64_t B, int64_t No)
{
    using A = AlgebraTraits<ID>;
    constexpr int D = A::D, G = A::G;
    __shared__ C red[4 * G];
    const int64_t b = blockIdx.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    C inv[G], dot[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
        inv[g] = C(1) / row_norm(norms, partial, nparts, B, b, G, g, No);
        dot[g] = 0;
    }
    /* gout and v of the row at feature m */
    auto load_at = [&](int64_t m, C(&gv)[D], C(&v)[D]) {
        static_for<D>([&](auto ac) {
            constexpr int a = decltype(ac)::value;
            const int64_t i = ((int64_t)a * B + b) * No + m;
            gv[a] = load<Tio>(gout[i]);
            v[a] = load<Tv>(v_in[i]);
        });
    };
    auto add_dots = [&](const C(&gv)[D], const C(&v)[D]) {
        static_for<D>([&](auto ac) {
            constexpr int a = decltype(ac)::value;
            constexpr int g = A::table.grade[a];
            dot[g] += gv[a] * v[a];
        });
    };
    /* the row's first MC rounds of features stay in registers for the second pass (N_out up to
     * 512 with 128 threads): the row is read once, not twice, where they fit */
    constexpr int MC = D * sizeof(C) <= 32 ? 4 : 0;
    C gc[MC ? MC : 1][D], vc[MC ? MC : 1][D];
#pragma unroll
    for (int u = 0; u < MC; ++u) {
        const int64_t m = threadIdx.x + (int64_t)u * blockDim.x;
        if (m < No) {
            load_at(m, gc[u], vc[u]);
            add_dots(gc[u], vc[u]);
        }
    }
    for (int64_t m = threadIdx.x + (int64_t)MC * blockDim.x; m < No; m += blockDim.x) {
        C gv[D], v[D];
        load_at(m, gv, v);
        add_dots(gv, v);
    }
    group_sum_runtime<G>(dot, red, warp, lane, 4);
    C coef[G];
#pragma unroll
    for (int g = 0; g < G; ++g)
        coef[g] = norm_coef<FROM_OUT>(dot[g], inv[g], No);
    /* go at feature m from the row's gout and v there (gv, v: registers) */
    auto finish = [&](int64_t m, const C(&gv)[D], const C(&v)[D]) {
        C t[G];
#pragma unroll
        for (int g = 0; g < G; ++g)
            t[g] = 0;
        static_for<D>([&](auto ac) {
            constexpr int a = decltype(ac)::value;
            constexpr int g = A::table.grade[a], s = A::table.grade_sign[a];
            if constexpr (s != 0)
                t[g] += C(s) * v[a] * v[a];
        });
        static_for<D>([&](auto ac) {
            constexpr int a = decltype(ac)::value;
            constexpr int g = A::table.grade[a], s = A::table.grade_sign[a];
            const C c = coef[g] * sign_of(t[g]) * C(s);
            go[((int64_t)a * B + b) * No + m] = store<Tg>(gv[a] * inv[g] - c * v[a]);
        });
    };
#pragma unroll
    for (int u = 0; u < MC; ++u) {
        const int64_t m = threadIdx.x + (int64_t)u * blockDim.x;
        if (m < No)
            finish(m, gc[u], vc[u]);
    }
    for (int64_t m = threadIdx.x + (int64_t)MC * blockDim.x; m < No; m += blockDim.x) {
        C gv[D], v[D];
        load_at(m, gv, v);
        finish(m, gv, v);
    }
}

/* The norm backward's row statistics alone (B, 2 G: 1 / r_g, then coef_g, as norm_bwd forms
 * them), for rows [row0, row0 + gridDim.x), one row a block of 128: the Hopper backward's
 * statistics pass (stats_rows), which forms no go. VEC: stats_run elements a thread a load (N_out
 * a multiple of them, both arrays aligned to their size), else one, so at N_out 512 a thread's
 * loads of every component go out together. Each row's dots are summed in a fixed order (a
 * thread's runs, the warps' xor trees, the four warps in order) whatever the rows around it, so
 * slicing the batch changes no bit. Until session 25 norm_bwd formed these, one element a thread
 * (2.1 TB/s at Cl(3,0) fp32, 1.3-1.5 TB/s in bf16 on the H100); one row a warp, with 16-byte runs,
 * then ran at 16 warps an SM, latency-bound; this form: 64 -> 58 us at Cl(3,0) tf32, B 4096, N
 * 512, the bf16 cells unchanged (NOTES_FCGP.md session 25). */
template <int ID, class C, class Tv, class Tio, bool FROM_OUT, bool VEC>
__global__ void __launch_bounds__(128) norm_stats(const Tv *__restrict__ v_in, const Tio *__restrict__ gout,
                                                  const C *__restrict__ norms, const C *__restrict__ partial,
                                                  int nparts, int64_t B, int64_t No, C *__restrict__ stats,
                                                  int64_t row0)
{
    using A = AlgebraTraits<ID>;
    constexpr int D = A::D, G = A::G, V = VEC ? stats_run<Tv, Tio>() : 1, WARPS = 4;
    __shared__ C red[WARPS][G];
    pdl::free_start(); /* in the Hopper backward's chain (pdl.cuh): it writes only its rows' statistics */
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t b = row0 + blockIdx.x;
    C dot[G] = {};
    for (int64_t m = (int64_t)threadIdx.x * V; m < No; m += 32 * WARPS * V) {
        C gv[D][V], vv[D][V];
        static_for<D>([&](auto ac) {
            constexpr int a = decltype(ac)::value;
            const int64_t i = ((int64_t)a * B + b) * No + m;
            load_run<V>(gout + i, gv[a]);
            load_run<V>(v_in + i, vv[a]);
        });
        static_for<D>([&](auto ac) {
            constexpr int a = decltype(ac)::value, g = A::table.grade[a];
#pragma unroll
            for (int k = 0; k < V; ++k)
                dot[g] += gv[a][k] * vv[a][k];
        });
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], off);
        if (lane == 0)
            red[warp][g] = dot[g];
    }
    __syncthreads();
    if (threadIdx.x != 0)
        return;
#pragma unroll
    for (int g = 0; g < G; ++g) {
        C d = 0;
#pragma unroll
        for (int w = 0; w < WARPS; ++w)
            d += red[w][g];
        const C inv = C(1) / row_norm(norms, partial, nparts, B, b, G, g, No);
        stats[b * 2 * G + g] = inv;
        stats[b * 2 * G + G + g] = norm_coef<FROM_OUT>(d, inv, No);
    }
}

/* xg = MVGELU(x), yg = MVGELU(y) in the operand type; BN = B * N_in. */
template <int ID, class E>
__global__ void gelu_prepass(const E *__restrict__ x, const E *__restrict__ y, E *__restrict__ xg, E *__restrict__ yg,
                             int64_t BN)
{
    constexpr int D = AlgebraTraits<ID>::D;
    using C = typename Compute<E>::type;
    for (int64_t u = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; u < 2 * BN; u += (int64_t)gridDim.x * blockDim.x) {
        const bool isy = u >= BN;
        const int64_t pos = isy ? u - BN : u;
        const E *s = isy ? y : x;
        E *d = isy ? yg : xg;
        const C gate = gelu_gate(load<E>(s[pos]));
#pragma unroll
        for (int a = 0; a < D; ++a)
            d[a * BN + pos] = store<E>(load<E>(s[a * BN + pos]) * gate);
    }
}

template <class S, class T> __global__ void convert_kernel(const S *__restrict__ s, T *__restrict__ d, int64_t n)
{
    for (int64_t u = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; u < n; u += (int64_t)gridDim.x * blockDim.x)
        d[u] = store<T>(load<S>(s[u]));
}

/* ------------------------------------------------------------------------------------ */
/* gz: G_{j,p} = go_j @ W[p]^T for every pair on a BM x BN tile of (rows, N_in), the      */
/* pairwise rule into gxg / gyg, and the GELU backward.                                    */

template <int ID, class E, int MODE> struct GzCfg {
    using A = AlgebraTraits<ID>;
    using C = typename Compute<E>::type;
    static constexpr int D = A::D, P = A::P;
    static constexpr int NP = Plans<ID>::pair.np;
    static constexpr bool F64 = sizeof(E) == 8;
    /* CAP pairs per warp, each a BM x BN accumulator: 64-96 fp32 registers a thread */
    static constexpr int CAP = D == 4 ? 2 : 6;
    static constexpr int BM = 32;
    static constexpr int BN = D == 4 ? 32 : (F64 ? 8 : 16);
    static constexpr int NPASS = (NP + kWarps * CAP - 1) / (kWarps * CAP);
    /* KS mma k-steps a stage: the per-stage work is small (CAP x 4 mma a warp a k-step), so
     * several k-steps share one barrier pair; one at D = 16, where the stage holds 51 tiles */
    static constexpr int KS = D == 16 ? 1 : 4;
    static constexpr int KSTEP = 32 / (int)sizeof(E);
    static constexpr int BK = KS * KSTEP, SK = BK + 16 / (int)sizeof(E);
    static constexpr int GT = BM * SK, WT = BN * SK;
    static constexpr int STAGE = D * GT + P * WT;
    static constexpr int POS = BM * BN;
    static constexpr int MT = BM / 16, NT = BN / 8;
    static constexpr size_t MAIN = 2 * (size_t)STAGE * sizeof(E) > (size_t)kWarps * CAP * POS * sizeof(C)
                                       ? 2 * (size_t)STAGE * sizeof(E)
                                       : (size_t)kWarps * CAP * POS * sizeof(C);
    static constexpr size_t SMEM = MAIN + (NPASS > 1 ? 2 * (size_t)D * POS * sizeof(C) : 0);
    static_assert(SMEM <= 227 * 1024, "gz tile exceeds shared memory");
    static_assert(MODE == kFMA || NT % 2 == 0, "mma B fragments come in pairs of n8 tiles");
};

/* go: (D, B, N_out); w: (P, N_in, N_out); xr, yr: the inputs (their MVGELU, xg and yg, is
 * formed at each output position, as is its backward); gx, gy: (D, B, N_in) or NULL. */
template <int ID, class E, int MODE, class Tout>
__global__ void __launch_bounds__(kThreads, 1)
    gz_kernel(const E *__restrict__ go, const E *__restrict__ w, const E *__restrict__ xr, const E *__restrict__ yr,
              Tout *__restrict__ gx, Tout *__restrict__ gy, int64_t B, int64_t Ni, int64_t No, int vec_go, int vec_w,
              int gate,
              const __grid_constant__ PairPlan<ID> plan)
{
    using Cfg = GzCfg<ID, E, MODE>;
    using A = AlgebraTraits<ID>;
    using C = typename Compute<E>::type;
    constexpr int D = Cfg::D, P = Cfg::P, BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, SK = Cfg::SK, GT = Cfg::GT,
                  WT = Cfg::WT, CAP = Cfg::CAP, POS = Cfg::POS, MT = Cfg::MT, NT = Cfg::NT, NPASS = Cfg::NPASS;
    constexpr bool TC = MODE != kFMA;
    extern __shared__ __align__(16) unsigned char smem[];
    E *raw = (E *)smem, *work = raw + Cfg::STAGE;
    C *sG = (C *)smem, *sT = (C *)(smem + Cfg::MAIN);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    /* N_in blocks fastest: resident blocks share their rows of go (read once), W stays in L2 */
    const int64_t nnb = (Ni + BN - 1) / BN;
    const int64_t b0 = (int64_t)(blockIdx.x / nnb) * BM, n0 = (int64_t)(blockIdx.x % nnb) * BN;
    const int64_t nk = (No + BK - 1) / BK;
    const int64_t BNi = B * Ni;

    auto load_stage = [&](int64_t k0) {
        load_tiles(raw, SK, GT, D, BM, BK, go, B * No, No, b0, B, k0, No, vec_go);
        load_tiles(raw + D * GT, SK, WT, P, BN, BK, w, Ni * No, No, n0, Ni, k0, No, vec_w);
        cp_commit();
    };

    constexpr int AR = TC ? MT : BM / 8, AC = TC ? NT : BN / 4, AE = TC ? 4 : 1;
    for (int pass = 0; pass < NPASS; ++pass) {
        const int base = pass * kWarps * CAP;
        C acc[CAP][AR][AC][AE];
        zero_all(acc);

        if (nk > 0)
            load_stage(0);
        for (int64_t kt = 0; kt < nk; ++kt) {
            cp_wait_all();
            __syncthreads();
            copy_region<MODE>(work, raw, Cfg::STAGE * (int)sizeof(E));
            __syncthreads();
            if (kt + 1 < nk)
                load_stage((kt + 1) * BK);
            const E *Go = work, *W = work + D * GT;
#pragma unroll
            for (int s = 0; s < CAP; ++s) {
                const int q = base + warp * CAP + s;
                if (q >= plan.np)
                    break;
                const E *Gj = Go + plan.pj[q] * GT, *Wp = W + plan.pp[q] * WT;
                if constexpr (TC) {
#pragma unroll
                    for (int ks = 0; ks < Cfg::KS; ++ks) {
                        uint32_t af[MT][4], bf[NT][2];
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt)
                            ldsm_x4(af[mt], Gj + (mt * 16 + (lane & 15)) * SK + ks * Cfg::KSTEP +
                                                (lane >> 4) * (16 / (int)sizeof(E)));
#pragma unroll
                        for (int n2 = 0; n2 < NT / 2; ++n2) {
                            uint32_t r4[4];
                            ldsm_x4(r4, Wp + (n2 * 16 + (lane >> 4) * 8 + (lane & 7)) * SK + ks * Cfg::KSTEP +
                                            ((lane >> 3) & 1) * (16 / (int)sizeof(E)));
                            bfrag_pair(bf, n2, r4);
                        }
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                            for (int nt = 0; nt < NT; ++nt)
                                mma<MODE>(acc[s][mt][nt], af[mt], bf[nt][0], bf[nt][1]);
                    }
                } else {
                    const int lr = lane >> 2, lc = lane & 3;
#pragma unroll
                    for (int k = 0; k < BK; ++k) {
                        C av[AR], bv[AC];
#pragma unroll
                        for (int r = 0; r < AR; ++r)
                            av[r] = Gj[(lr + 8 * r) * SK + k];
#pragma unroll
                        for (int c = 0; c < AC; ++c)
                            bv[c] = Wp[(lc + 4 * c) * SK + k];
#pragma unroll
                        for (int r = 0; r < AR; ++r)
#pragma unroll
                            for (int c = 0; c < AC; ++c)
                                acc[s][r][c][0] = fma(av[r], bv[c], acc[s][r][c][0]);
                    }
                }
            }
        }
        __syncthreads(); /* sG reuses the stage buffers */
#pragma unroll
        for (int s = 0; s < CAP; ++s) {
            const int slot = warp * CAP + s;
            if (base + slot >= plan.np)
                break;
#pragma unroll
            for (int r = 0; r < AR; ++r)
#pragma unroll
                for (int c = 0; c < AC; ++c)
#pragma unroll
                    for (int e = 0; e < AE; ++e) {
                        int row, col;
                        acc_pos<TC>(r, c, e, lane, row, col);
                        sG[slot * POS + row * BN + col] = acc[s][r][c][e];
                    }
        }
        __syncthreads();

        for (int pos = tid; pos < POS; pos += kThreads) {
            const int r = pos / BN, c = pos - r * BN;
            const int64_t b = b0 + r, n = n0 + c;
            const bool ok = b < B && n < Ni;
            const int64_t off = b * Ni + n;
            C xv[D] = {}, yv[D] = {}, tx[D], ty[D];
            if (ok) { /* xg, yg: the gated inputs */
                gelu_at(gate, xr + off, BNi, xv);
                gelu_at(gate, yr + off, BNi, yv);
            }
#pragma unroll
            for (int a = 0; a < D; ++a) {
                tx[a] = pass ? sT[a * POS + pos] : C(0);
                ty[a] = pass ? sT[(D + a) * POS + pos] : C(0);
            }
            static_for<A::T>([&](auto tc) {
                constexpr int t = decltype(tc)::value;
                constexpr fc_term e = A::table.term[t];
                constexpr int q = Plans<ID>::pair.term_pair[t];
                if (NPASS == 1 || (q >= base && q < base + kWarps * CAP)) {
                    const C gv = sG[(q - base) * POS + pos];
                    tx[e.i] += C(e.sign) * yv[e.k] * gv;
                    ty[e.k] += C(e.sign) * xv[e.i] * gv;
                }
            });
            if (pass + 1 < NPASS) {
#pragma unroll
                for (int a = 0; a < D; ++a) {
                    sT[a * POS + pos] = tx[a];
                    sT[(D + a) * POS + pos] = ty[a];
                }
            } else if (ok) {
                if (gx)
                    gate_backward(gate, tx, xr + off, gx + off, BNi);
                if (gy)
                    gate_backward(gate, ty, yr + off, gy + off, BNi);
            }
        }
        __syncthreads(); /* the next pass reuses sG / sT */
    }
}

/* ------------------------------------------------------------------------------------ */
/* gW[p] = sum over the batch and the pairs of path p of z_{j,p}^T @ go_j.                */

template <int ID, class E, int MODE> struct GwCfg {
    using C = typename Compute<E>::type;
    /* a 128 x 128 tile of (N_in, N_out): 8 warps of 64 x 32 */
    static constexpr int BMn = 128, BNm = 128, WM = 64, WN = 32;
    static constexpr int SXn = BMn + 8, SXm = BNm + 8;
    static constexpr int NX = Plans<ID>::path.max_nx, NY = Plans<ID>::path.max_ny, NJ = Plans<ID>::path.max_nj;
    /* two mma k-steps a stage where the tiles fit in 200 KB (one barrier pair per 2 k-steps) */
    static constexpr int KSTEP = 32 / (int)sizeof(E);
    static constexpr int KS = (size_t)(NX + NY + 3 * NJ) * 2 * KSTEP * (BMn + 8) * sizeof(E) <= 200 * 1024 ? 2 : 1;
    static constexpr int BK = KS * KSTEP;
    static constexpr int XTILE = BK * SXn, GTILE = BK * SXm;
    static constexpr int RAW = (NX + NY) * XTILE + NJ * GTILE, WORK = NJ * XTILE + NJ * GTILE;
    static constexpr size_t SMEM = (size_t)(RAW + WORK) * sizeof(E);
    static constexpr int MT = WM / 16, NT = WN / 8;
    static_assert(SMEM <= 227 * 1024, "gW tile exceeds shared memory");
};

/* xg, yg: (D, B, N_in); go: (D, B, N_out). Block (tile, p, split) sums rows
 * [split * rows_per_split, ...); writes gw (P, N_in, N_out) in Tout, or partial
 * (splits, P, N_in, N_out) in the compute type when partial != NULL. */
template <int ID, class E, int MODE, class Tout>
__global__ void __launch_bounds__(kThreads, 1)
    gw_kernel(const E *__restrict__ xg, const E *__restrict__ yg, const E *__restrict__ go, Tout *__restrict__ gw,
              typename Compute<E>::type *__restrict__ partial, int64_t B, int64_t Ni, int64_t No,
              int64_t rows_per_split, int vec_x, int vec_go, const __grid_constant__ PathPlan<ID> plan)
{
    using Cfg = GwCfg<ID, E, MODE>;
    using C = typename Compute<E>::type;
    constexpr int P = AlgebraTraits<ID>::P, BMn = Cfg::BMn, BNm = Cfg::BNm, WM = Cfg::WM, WN = Cfg::WN, BK = Cfg::BK,
                  SXn = Cfg::SXn, SXm = Cfg::SXm, NX = Cfg::NX, NY = Cfg::NY, NJ = Cfg::NJ, XTILE = Cfg::XTILE,
                  GTILE = Cfg::GTILE, MT = Cfg::MT, NT = Cfg::NT;
    constexpr bool TC = MODE != kFMA;
    extern __shared__ __align__(16) unsigned char smem[];
    E *raw = (E *)smem, *work = raw + Cfg::RAW;
    E *rawX = raw, *rawY = raw + NX * XTILE, *rawG = raw + (NX + NY) * XTILE;
    E *wZ = work, *wG = work + NJ * XTILE;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int p = blockIdx.y, split = blockIdx.z;
    const int64_t ntn = (Ni + BMn - 1) / BMn;
    const int64_t nn0 = (int64_t)(blockIdx.x % ntn) * BMn, mm0 = (int64_t)(blockIdx.x / ntn) * BNm;
    const int64_t rb0 = (int64_t)split * rows_per_split;
    const int64_t rb1 = rb0 + rows_per_split < B ? rb0 + rows_per_split : B;
    const int nx = plan.nx[p], ny = plan.ny[p], nj = plan.nj[p];
    const int wm0 = (warp & 1) * WM, wn0 = (warp >> 1) * WN;
    const int64_t nk = rb1 > rb0 ? (rb1 - rb0 + BK - 1) / BK : 0;

    auto load_stage = [&](int64_t k0) {
        for (int s = 0; s < nx; ++s)
            load_tiles(rawX + s * XTILE, SXn, 0, 1, BK, BMn, xg + plan.xc[p][s] * B * Ni, 0, Ni, k0, rb1, nn0, Ni, vec_x);
        for (int s = 0; s < ny; ++s)
            load_tiles(rawY + s * XTILE, SXn, 0, 1, BK, BMn, yg + plan.yc[p][s] * B * Ni, 0, Ni, k0, rb1, nn0, Ni, vec_x);
        for (int s = 0; s < nj; ++s)
            load_tiles(rawG + s * GTILE, SXm, 0, 1, BK, BNm, go + plan.jc[p][s] * B * No, 0, No, k0, rb1, mm0, No,
                       vec_go);
        cp_commit();
    };

    constexpr int AR = TC ? MT : WM / 8, AC = TC ? NT : WN / 4, AE = TC ? 4 : 1;
    C acc[AR][AC][AE];
    zero_all(acc);

    if (nk > 0)
        load_stage(rb0);
    for (int64_t kt = 0; kt < nk; ++kt) {
        cp_wait_all();
        __syncthreads();
        /* z_{j,p}[b, n] for the path's outputs, as A^T tiles (K = b rows, M = n columns) */
        for (int u = tid; u < BK * BMn; u += kThreads) {
            const int kb = u / BMn, nn = u - kb * BMn, off = kb * SXn + nn;
            for (int s = 0; s < nj; ++s) {
                C z = 0;
                const int t1 = plan.tbeg[p][s + 1];
                for (int tt = plan.tbeg[p][s]; tt < t1; ++tt) {
                    const int code = plan.code[tt];
                    const C xv = load<E>(rawX[(code & 15) * XTILE + off]);
                    const C yv = load<E>(rawY[((code >> 4) & 15) * XTILE + off]);
                    z = fma((code >> 8) ? -xv : xv, yv, z);
                }
                wZ[s * XTILE + off] = operand<MODE, E>(z);
            }
        }
        copy_region<MODE>(wG, rawG, nj * GTILE * (int)sizeof(E));
        __syncthreads();
        if (kt + 1 < nk)
            load_stage(rb0 + (kt + 1) * BK);

        for (int s = 0; s < nj; ++s) {
            const E *Z = wZ + s * XTILE, *Gm = wG + s * GTILE;
            if constexpr (TC) {
                const int g = lane >> 2, t = lane & 3;
#pragma unroll
                for (int ks = 0; ks < Cfg::KS; ++ks) {
                    const E *Zk = Z + ks * Cfg::KSTEP * SXn, *Gk = Gm + ks * Cfg::KSTEP * SXm;
                    uint32_t af[MT][4], bf[NT][2];
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        const int m0 = wm0 + mt * 16;
                        if constexpr (MODE == kTF32) {
                            af[mt][0] = __float_as_uint(Zk[t * SXn + m0 + g]);
                            af[mt][1] = __float_as_uint(Zk[t * SXn + m0 + g + 8]);
                            af[mt][2] = __float_as_uint(Zk[(t + 4) * SXn + m0 + g]);
                            af[mt][3] = __float_as_uint(Zk[(t + 4) * SXn + m0 + g + 8]);
                        } else {
                            ldsm_x4_t(af[mt], Zk + ((lane >> 4) * 8 + (lane & 7)) * SXn + m0 + ((lane >> 3) & 1) * 8);
                        }
                    }
                    bfrags_krow<MODE>(bf, Gk, SXm, wn0, lane);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                        for (int nt = 0; nt < NT; ++nt)
                            mma<MODE>(acc[mt][nt], af[mt], bf[nt][0], bf[nt][1]);
                }
            } else {
                const int lr = lane >> 2, lc = lane & 3;
#pragma unroll
                for (int k = 0; k < BK; ++k) {
                    C av[AR], bv[AC];
#pragma unroll
                    for (int r = 0; r < AR; ++r)
                        av[r] = Z[k * SXn + wm0 + lr + 8 * r];
#pragma unroll
                    for (int c = 0; c < AC; ++c)
                        bv[c] = Gm[k * SXm + wn0 + lc + 4 * c];
#pragma unroll
                    for (int r = 0; r < AR; ++r)
#pragma unroll
                        for (int c = 0; c < AC; ++c)
                            acc[r][c][0] = fma(av[r], bv[c], acc[r][c][0]);
                }
            }
        }
    }

#pragma unroll
    for (int r = 0; r < AR; ++r)
#pragma unroll
        for (int c = 0; c < AC; ++c)
#pragma unroll
            for (int e = 0; e < AE; ++e) {
                int row, col;
                acc_pos<TC>(r, c, e, lane, row, col);
                const int64_t n = nn0 + (wm0 + row), m = mm0 + (wn0 + col);
                if (n < Ni && m < No) {
                    const int64_t i = ((int64_t)p * Ni + n) * No + m;
                    if (partial)
                        partial[(int64_t)split * P * Ni * No + i] = acc[r][c][e];
                    else
                        gw[i] = store<Tout>(acc[r][c][e]);
                }
            }
}

/* gw = sum over the S split partials, in split order. */
template <class C, class Tout>
__global__ void gw_reduce(const C *__restrict__ partial, Tout *__restrict__ gw, int S, int64_t n)
{
    for (int64_t u = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; u < n; u += (int64_t)gridDim.x * blockDim.x) {
        C s = 0;
        for (int k = 0; k < S; ++k)
            s += partial[(int64_t)k * n + u];
        gw[u] = store<Tout>(s);
    }
}

/* ------------------------------------------------------------------------------------ */
/* Launchers. Measurements and the design log: benchmarks/NOTES_FCGP.md, lab in            */
/* benchmarks/lab/fcgp_lab.cu.                                                            */

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }
inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline int grid_for(int64_t n, int threads)
{
    const int64_t b = cdiv(n, threads);
    return (int)(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

template <class K> inline fc_status set_smem(K kernel, size_t bytes)
{
    FC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return FC_OK;
}

/* One algebra, operand type E (what the kernels read), mode, and the caller's type Tio. */
template <int ID, class E, int MODE, class Tio> struct Op {
    using A = AlgebraTraits<ID>;
    using C = typename Compute<E>::type;
    static_assert(std::is_same<C, typename Compute<Tio>::type>::value, "one compute type");
    static constexpr int D = A::D, G = A::G, P = A::P;
    static constexpr bool CONV = !std::is_same<E, Tio>::value; /* fp32 data, bf16 products */
    using F = FwdCfg<ID, E, MODE>;
    using Z = GzCfg<ID, E, MODE>;
    using Wg = GwCfg<ID, E, MODE>;

    struct Layout {
        size_t xc, yc, wc, o, part, go, xg, yg, gwp, wt, stats, bw90, total;
        int S;
        int64_t rows_per_split;
    };

    /* The Hopper forward GEMM (fcgp_sm90a.h) for tf32 / bf16 operands, fp32 o, and outputs in
     * fp32 or (with bf16 operands) bf16. */
    static constexpr bool SM90_TYPES = (MODE == kTF32 || MODE == kBF16) && std::is_same<C, float>::value &&
                                       (std::is_same<Tio, float>::value || std::is_same<Tio, __nv_bfloat16>::value);
    static bool sm90_planned(const fc_args *a)
    {
        if constexpr (SM90_TYPES)
            return sm90::planned(a, MODE, sizeof(E));
        else
            return false;
    }
    /* ... and the Hopper backward (fcgp_sm90a.h: go^T, gW and gz on wgmma), the same types */
    static bool sm90_bwd_planned(const fc_args *a)
    {
        if constexpr (SM90_TYPES)
            return sm90::bwd_planned(a, MODE, sizeof(E));
        else
            return false;
    }

    /* Batch splits of gW: enough blocks for two waves, and few enough rows a split that the
     * xg, yg and go rows of one split (read by every path and tile) stay in L2 (24 MB: half
     * of an H100's) instead of being streamed from memory once per path; at most 8. */
    static int gw_splits(const fc_args *a, int64_t *rows_per_split)
    {
        const int64_t tiles = cdiv(a->N_in, Wg::BMn) * cdiv(a->N_out, Wg::BNm) * P;
        const int64_t want = cdiv(2 * (int64_t)sm_count(a->device), tiles > 0 ? tiles : 1);
        const int64_t row_bytes = (int64_t)D * (2 * a->N_in + a->N_out) * (int64_t)sizeof(E);
        const int64_t l2_rows = std::max<int64_t>(1, (int64_t)(24 << 20) / std::max<int64_t>(1, row_bytes));
        const int64_t kb = cdiv(a->B, Wg::BK);
        int64_t S = std::min<int64_t>(8, std::max<int64_t>(1, std::min(std::max(want, cdiv(a->B, l2_rows)), kb)));
        const int64_t rps = cdiv(kb > 0 ? kb : 1, S) * Wg::BK;
        S = a->B > 0 ? cdiv(a->B, rps) : 1;
        *rows_per_split = rps;
        return (int)S;
    }

    /* The backward forms go from the forward's out (given with the norms), not from a
     * recomputed o. */
    static bool from_out(const fc_args *a) { return a->normalize && a->norms && a->out; }

    static Layout layout(const fc_args *a, bool backward)
    {
        const int64_t B = a->B, Ni = a->N_in, No = a->N_out;
        Layout L{};
        Bump bp;
        if (CONV) {
            L.xc = bp.take((size_t)(D * B * Ni) * sizeof(E));
            L.yc = bp.take((size_t)(D * B * Ni) * sizeof(E));
            L.wc = bp.take((size_t)(P * Ni * No) * sizeof(E));
        }
        const bool o_in_out = !backward && std::is_same<Tio, C>::value;
        const bool recompute = backward && a->normalize && !from_out(a); /* o, as the forward made it */
        const bool gemm = !backward || recompute;                          /* the call runs the product */
        const bool hopper = gemm && sm90_planned(a);
        if (a->normalize && gemm) {
            if (!o_in_out)
                L.o = bp.take((size_t)(D * B * No) * sizeof(C));
            const int64_t parts = std::max(cdiv(No, F::BN), hopper ? sm90::colblocks(a) : 0);
            L.part = bp.take((size_t)(parts * B * G) * sizeof(C));
        }
        if (hopper)
            L.wt = bp.take(sm90::workspace_bytes(a, MODE, sizeof(E)));
        if (backward && sm90_bwd_planned(a)) {
            if (a->normalize) /* the norm backward's row statistics (norm_stats) */
                L.stats = bp.take((size_t)(B * 2 * G) * sizeof(C));
            if constexpr (SM90_TYPES)
                L.bw90 = bp.take(sm90::bwd_workspace_bytes(a, MODE, sizeof(E)));
        } else if (backward) {
            if ((a->normalize && !(recompute && std::is_same<E, C>::value)) || (!a->normalize && CONV))
                L.go = bp.take((size_t)(D * B * No) * sizeof(E));
            else
                L.go = L.o; /* in place over the recomputed o, or unused (go = grad_out) */
            /* xg, yg: the mma.sync gW's operands (the gz kernel forms them from x, y; without the
             * gate they are x, y themselves) */
            if (a->gate) {
                L.xg = bp.take((size_t)(D * B * Ni) * sizeof(E));
                L.yg = bp.take((size_t)(D * B * Ni) * sizeof(E));
            }
            L.S = gw_splits(a, &L.rows_per_split);
            if (L.S > 1)
                L.gwp = bp.take((size_t)L.S * (size_t)(P * Ni * No) * sizeof(C));
        }
        L.total = bp.off;
        return L;
    }

    static fc_status check_ws(const fc_args *a, const Layout &L)
    {
        if (L.total > 0 && (a->workspace == nullptr || a->workspace_bytes < L.total)) {
            fc_set_error("fcgp: workspace of %zu bytes given, %zu needed", a->workspace_bytes, L.total);
            return FC_ERR_VALUE;
        }
        return FC_OK;
    }

    static fc_status convert(const Tio *s, E *d, int64_t n, cudaStream_t st)
    {
        if (n <= 0)
            return FC_OK;
        convert_kernel<Tio, E><<<grid_for(n, 256), 256, 0, st>>>(s, d, n);
        FC_LAUNCH_CHECK(st);
        return FC_OK;
    }

    /* o (or out) = the GEMM; NORM also writes the partial norms when partial != NULL. */
    template <class DstT, bool NORM>
    static fc_status gemm(const E *x, const E *y, const E *w, DstT *dst, C *partial, const fc_args *a, cudaStream_t st)
    {
        const int64_t B = a->B, Ni = a->N_in, No = a->N_out;
        auto kern = fwd_kernel<ID, E, MODE, DstT, NORM>;
        fc_status s = set_smem(kern, F::SMEM);
        if (s != FC_OK)
            return s;
        const dim3 grid((unsigned)(cdiv(B, F::BM) * cdiv(No, F::BN)));
        const int vx = aligned16(x) && aligned16(y) && (Ni * (int64_t)sizeof(E)) % 16 == 0;
        const int vw = aligned16(w) && (No * (int64_t)sizeof(E)) % 16 == 0;
        kern<<<grid, kThreads, F::SMEM, st>>>(x, y, w, dst, partial, B, Ni, No, vx, vw, a->gate, Plans<ID>::pair);
        FC_LAUNCH_CHECK(st);
        return FC_OK;
    }

    /* kind: what it writes (sm90::FwdOut), o and part (kO, kNorm), out (kOut, kNorm), norms (kNorm) */
    static fc_status sm90_gemm(const E *x, const E *y, const E *w, void *wt, sm90::FwdOut::Kind kind, C *o, C *part,
                               void *out, C *norms, const fc_args *a, cudaStream_t st)
    {
        if constexpr (SM90_TYPES)
            return sm90::forward_gemm(a, MODE, x, y, w, wt, {o, part, out, (int)sizeof(Tio), norms, kind}, st);
        else
            return FC_ERR_TYPE; /* sm90_planned() is false for these types */
    }

    /* o (fp32, D x B x N_out) and, when part != NULL, its grade-norm partials (*parts column
     * blocks of them): the Hopper GEMM where it is planned and the pointers suit the copy
     * engine, else the mma.sync / FMA one. */
    static fc_status o_gemm(const E *x, const E *y, const E *w, C *o, C *part, char *ws, const Layout &L,
                            const fc_args *a, cudaStream_t st, int64_t *parts)
    {
        if (sm90_planned(a) && sm90::aligned(x, y, o)) {
            *parts = sm90::colblocks(a);
            return sm90_gemm(x, y, w, ws + L.wt, sm90::FwdOut::kO, o, part, nullptr, nullptr, a, st);
        }
        *parts = cdiv(a->N_out, F::BN);
        return gemm<C, true>(x, y, w, o, part, a, st); /* part may be NULL: then no partials */
    }

    static fc_status forward(const fc_args *a, cudaStream_t st)
    {
        const int64_t B = a->B, Ni = a->N_in, No = a->N_out;
        const Layout L = layout(a, false);
        fc_status s = check_ws(a, L);
        if (s != FC_OK)
            return s;
        char *ws = (char *)a->workspace;
        if (B == 0)
            return FC_OK;
        if (No == 0) { /* no features: only the norms, r = sqrt(eps) */
            if (a->normalize && a->norms) {
                fwd_finalize<ID, C, Tio><<<(unsigned)B, 128, 0, st>>>(nullptr, (Tio *)nullptr, (C *)a->norms,
                                                                      nullptr, 0, B, 0);
                FC_LAUNCH_CHECK(st);
            }
            return FC_OK;
        }
        const E *x = (const E *)a->x, *y = (const E *)a->y, *w = (const E *)a->weight;
        if (CONV) {
            E *xc = (E *)(ws + L.xc), *yc = (E *)(ws + L.yc), *wc = (E *)(ws + L.wc);
            if ((s = convert((const Tio *)a->x, xc, D * B * Ni, st)) != FC_OK ||
                (s = convert((const Tio *)a->y, yc, D * B * Ni, st)) != FC_OK ||
                (s = convert((const Tio *)a->weight, wc, P * Ni * No, st)) != FC_OK)
                return s;
            x = xc, y = yc, w = wc;
        }
        const bool hopper = sm90_planned(a) && sm90::aligned(x, y, a->out);
        if (!a->normalize) { /* out = o in the data type */
            if (hopper)
                return sm90_gemm(x, y, w, ws + L.wt, sm90::FwdOut::kOut, nullptr, nullptr, a->out, nullptr, a, st);
            return gemm<Tio, false>(x, y, w, (Tio *)a->out, nullptr, a, st);
        }
        C *o = std::is_same<Tio, C>::value ? (C *)a->out : (C *)(ws + L.o);
        C *part = (C *)(ws + L.part);
        if (hopper && sm90::aligned(x, y, o) && sm90::fused_norm()) /* the norm in the GEMM's epilogue */
            return sm90_gemm(x, y, w, ws + L.wt, sm90::FwdOut::kNorm, o, part, a->out, (C *)a->norms, a, st);
        int64_t parts = 0;
        if ((s = o_gemm(x, y, w, o, part, ws, L, a, st, &parts)) != FC_OK)
            return s;
        fwd_finalize<ID, C, Tio><<<(unsigned)B, 128, 0, st>>>(o, (Tio *)a->out, (C *)a->norms, part, (int)parts, B,
                                                              No);
        FC_LAUNCH_CHECK(st);
        return FC_OK;
    }

    /* the norm backward's row statistics of rows [b0, b0 + n) (norm_stats), from v (out, or the
     * recomputed o with the forward's partials), for sm90::BwdInputs::stats_rows */
    struct StatsJob {
        const fc_args *a;
        const void *v;
        const C *part;
        int parts;
        C *stats;
    };
    template <class Tv, bool FROM_OUT>
    static fc_status stats_rows(const void *ctx, int64_t b0, int64_t n, cudaStream_t st, bool chained)
    {
        const StatsJob &j = *(const StatsJob *)ctx;
        constexpr int V = stats_run<Tv, Tio>();
        const bool vec = j.a->N_out % V == 0 && (uintptr_t)j.v % (V * sizeof(Tv)) == 0 &&
                         (uintptr_t)j.a->grad_out % (V * sizeof(Tio)) == 0;
        auto k = vec ? norm_stats<ID, C, Tv, Tio, FROM_OUT, true> : norm_stats<ID, C, Tv, Tio, FROM_OUT, false>;
        FC_CUDA_CHECK(pdl::launch(chained, k, dim3((unsigned)n), dim3(128), 0, st, (const Tv *)j.v,
                                  (const Tio *)j.a->grad_out, (const C *)j.a->norms, j.part, j.parts, j.a->B,
                                  j.a->N_out, j.stats, b0));
        FC_LAUNCH_CHECK(st);
        return FC_OK;
    }

    /* The Hopper backward: with the norm, v is out (or o recomputed as the forward made it) and
     * the norm's row statistics come from norm_stats, which sm90::backward runs slice by slice just
     * before go^T's transpose of each slice (stats_rows), then the three gradients. */
    static fc_status sm90_backward(const fc_args *a, const E *x, const E *y, const E *w, const Layout &L, char *ws,
                                   cudaStream_t st)
    {
        if constexpr (SM90_TYPES) {
            sm90::BwdInputs in{x, y, w, nullptr, 0, nullptr, nullptr, nullptr};
            StatsJob job{a, nullptr, nullptr, 0, (C *)(ws + L.stats)};
            if (from_out(a)) {
                job.v = a->out;
                in.v = a->out, in.v_bytes = (int)sizeof(Tio), in.stats_rows = stats_rows<Tio, true>;
            } else if (a->normalize) {
                C *o = (C *)(ws + L.o);
                job.part = a->norms ? nullptr : (C *)(ws + L.part);
                int64_t parts = 0;
                const fc_status s = o_gemm(x, y, w, o, (C *)job.part, ws, L, a, st, &parts);
                if (s != FC_OK)
                    return s;
                job.v = o, job.parts = (int)parts;
                in.v = o, in.v_bytes = (int)sizeof(C), in.stats_rows = stats_rows<C, false>;
            }
            if (in.stats_rows) {
                in.stats = job.stats, in.stats_ctx = &job;
                in.norms = (const float *)a->norms, in.partial = job.part, in.nparts = job.parts;
                in.from_out = from_out(a);
            }
            return sm90::backward(a, MODE, in, ws + L.bw90, st);
        } else {
            return FC_ERR_TYPE; /* sm90_bwd_planned() is false for these types */
        }
    }

    static fc_status backward(const fc_args *a, cudaStream_t st)
    {
        const int64_t B = a->B, Ni = a->N_in, No = a->N_out;
        const bool need_x = a->grad_x, need_y = a->grad_y, need_w = a->grad_weight;
        const Layout L = layout(a, true);
        fc_status s = check_ws(a, L);
        if (s != FC_OK)
            return s;
        char *ws = (char *)a->workspace;
        if (need_w && (B == 0 || Ni == 0 || No == 0) && P * Ni * No > 0)
            FC_CUDA_CHECK(cudaMemsetAsync(a->grad_weight, 0, (size_t)(P * Ni * No) * sizeof(Tio), st));
        if (No == 0 && B * Ni > 0) {
            if (need_x)
                FC_CUDA_CHECK(cudaMemsetAsync(a->grad_x, 0, (size_t)(D * B * Ni) * sizeof(Tio), st));
            if (need_y)
                FC_CUDA_CHECK(cudaMemsetAsync(a->grad_y, 0, (size_t)(D * B * Ni) * sizeof(Tio), st));
        }
        if (B == 0 || Ni == 0 || No == 0 || (!need_x && !need_y && !need_w))
            return FC_OK;

        const E *x = (const E *)a->x, *y = (const E *)a->y, *w = (const E *)a->weight;
        if (CONV) {
            E *xc = (E *)(ws + L.xc), *yc = (E *)(ws + L.yc), *wc = (E *)(ws + L.wc);
            if ((s = convert((const Tio *)a->x, xc, D * B * Ni, st)) != FC_OK ||
                (s = convert((const Tio *)a->y, yc, D * B * Ni, st)) != FC_OK ||
                (s = convert((const Tio *)a->weight, wc, P * Ni * No, st)) != FC_OK)
                return s;
            x = xc, y = yc, w = wc;
        }
        if (sm90_bwd_planned(a))
            return sm90_backward(a, x, y, w, L, ws, st);

        const E *xg = x, *yg = y;
        if (a->gate && need_w) {
            E *xgw = (E *)(ws + L.xg), *ygw = (E *)(ws + L.yg);
            gelu_prepass<ID, E><<<grid_for(2 * B * Ni, 256), 256, 0, st>>>(x, y, xgw, ygw, B * Ni);
            FC_LAUNCH_CHECK(st);
            xg = xgw, yg = ygw;
        }

        const E *go;
        if (from_out(a)) {
            E *gob = (E *)(ws + L.go);
            norm_bwd<ID, C, Tio, E, Tio, true><<<(unsigned)B, 128, 0, st>>>(
                (const Tio *)a->out, (const Tio *)a->grad_out, (const C *)a->norms, nullptr, 0, gob, B, No);
            FC_LAUNCH_CHECK(st);
            go = gob;
        } else if (a->normalize) {
            C *o = (C *)(ws + L.o), *part = a->norms ? nullptr : (C *)(ws + L.part);
            E *gob = (E *)(ws + L.go);
            /* o recomputed exactly as the forward computed it (raw inputs, the same kernel and
             * gate arithmetic), so that it matches the norms the forward saved: with few output
             * features the norm's gradient amplifies any difference (a recompute from the
             * prepass's separately rounded xg, yg failed bf16 at N_out = 1) */
            int64_t parts = 0;
            if ((s = o_gemm(x, y, w, o, part, ws, L, a, st, &parts)) != FC_OK)
                return s;
            norm_bwd<ID, C, C, E, Tio, false><<<(unsigned)B, 128, 0, st>>>(o, (const Tio *)a->grad_out,
                                                                            (const C *)a->norms, part, (int)parts,
                                                                            gob, B, No);
            FC_LAUNCH_CHECK(st);
            go = gob;
        } else if (CONV) {
            E *gob = (E *)(ws + L.go);
            if ((s = convert((const Tio *)a->grad_out, gob, D * B * No, st)) != FC_OK)
                return s;
            go = gob;
        } else {
            go = (const E *)a->grad_out;
        }
        const int vgo = aligned16(go) && (No * (int64_t)sizeof(E)) % 16 == 0;

        if (need_w) {
            auto kern = gw_kernel<ID, E, MODE, Tio>;
            if ((s = set_smem(kern, Wg::SMEM)) != FC_OK)
                return s;
            C *part = L.S > 1 ? (C *)(ws + L.gwp) : nullptr;
            const dim3 grid((unsigned)(cdiv(Ni, Wg::BMn) * cdiv(No, Wg::BNm)), (unsigned)P, (unsigned)L.S);
            const int vx = aligned16(xg) && aligned16(yg) && (Ni * (int64_t)sizeof(E)) % 16 == 0;
            kern<<<grid, kThreads, Wg::SMEM, st>>>(xg, yg, go, (Tio *)a->grad_weight, part, B, Ni, No,
                                                   L.rows_per_split, vx, vgo, Plans<ID>::path);
            FC_LAUNCH_CHECK(st);
            if (part) {
                const int64_t n = P * Ni * No;
                gw_reduce<C, Tio><<<grid_for(n, 256), 256, 0, st>>>(part, (Tio *)a->grad_weight, L.S, n);
                FC_LAUNCH_CHECK(st);
            }
        }
        if (need_x || need_y) {
            auto kern = gz_kernel<ID, E, MODE, Tio>;
            if ((s = set_smem(kern, Z::SMEM)) != FC_OK)
                return s;
            const dim3 grid((unsigned)(cdiv(B, Z::BM) * cdiv(Ni, Z::BN)));
            const int vw = aligned16(w) && (No * (int64_t)sizeof(E)) % 16 == 0;
            kern<<<grid, kThreads, Z::SMEM, st>>>(go, w, x, y, (Tio *)a->grad_x, (Tio *)a->grad_y, B, Ni, No, vgo,
                                                  vw, a->gate, Plans<ID>::pair);
            FC_LAUNCH_CHECK(st);
        }
        return FC_OK;
    }
};

/* Grid limits the kernels assume: (row blocks x column blocks) in grid.x, gW tiles too. */
inline fc_status check_shape(const fc_args *a)
{
    const int64_t lim = 0x7fffffffLL;
    if (a->B < 0 || a->N_in < 0 || a->N_out < 0 || cdiv(a->B, 32) * cdiv(a->N_out, 16) > lim ||
        cdiv(a->B, 32) * cdiv(a->N_in, 8) > lim || cdiv(a->N_in, 128) * cdiv(a->N_out, 128) > lim) {
        fc_set_error("fcgp: shape B=%lld N_in=%lld N_out=%lld beyond the CUDA grid", (long long)a->B,
                     (long long)a->N_in, (long long)a->N_out);
        return FC_ERR_VALUE;
    }
    return FC_OK;
}

/* Run f(Op<ID, E, MODE, Tio>{}) for the args' algebra, dtype and precision. */
template <class R, class Fn> R dispatch(const fc_args *a, R bad, Fn &&f)
{
    auto by_type = [&](auto idc) -> R {
        constexpr int ID = decltype(idc)::value;
        switch (a->dtype) {
        case FC_F64:
            return f(Op<ID, double, kFMA, double>{});
        case FC_F32:
            if (a->precision == FC_PREC_TF32)
                return f(Op<ID, float, kTF32, float>{});
            if (a->precision == FC_PREC_BF16)
                return f(Op<ID, __nv_bfloat16, kBF16, float>{});
            return f(Op<ID, float, kFMA, float>{});
        case FC_BF16:
            return f(Op<ID, __nv_bfloat16, kBF16, __nv_bfloat16>{});
        case FC_F16:
            return f(Op<ID, __half, kF16, __half>{});
        }
        return bad;
    };
    switch (a->alg->id) {
#define FC_CASE(id_, ...) \
    case id_:             \
        return by_type(std::integral_constant<int, id_>{});
        FC_ALGEBRA_LIST(FC_CASE)
#undef FC_CASE
    }
    return bad;
}

inline bool uses_mma(const fc_args *a)
{
    return a->dtype == FC_BF16 || a->dtype == FC_F16 || (a->dtype == FC_F32 && a->precision != FC_PREC_HIGHEST);
}

template <class Body> fc_status run(const fc_args *a, Body &&body)
{
    fc_status s = check_shape(a);
    if (s != FC_OK)
        return s;
    DeviceGuard guard(a->device);
    if (guard.status != FC_OK)
        return guard.status;
    if (uses_mma(a)) {
        int major = 0;
        FC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, a->device));
        if (major < 8) {
            fc_set_error("fcgp: tf32/bf16/fp16 matrix products need compute capability 8.0+, device %d has %d.x",
                         a->device, major);
            return FC_ERR_VALUE;
        }
    }
    return dispatch<fc_status>(a, FC_ERR_TYPE, body);
}

} // namespace fcgp
} // namespace fc

extern "C" {

size_t fc_fcgp_forward_workspace_cuda(const fc_args *a)
{
    return fc::fcgp::dispatch<size_t>(a, 0, [&](auto op) { return decltype(op)::layout(a, false).total; });
}

size_t fc_fcgp_backward_workspace_cuda(const fc_args *a)
{
    return fc::fcgp::dispatch<size_t>(a, 0, [&](auto op) { return decltype(op)::layout(a, true).total; });
}

fc_status fc_fcgp_forward_cuda(const fc_args *a, void *stream)
{
    return fc::fcgp::run(a, [&](auto op) { return decltype(op)::forward(a, (cudaStream_t)stream); });
}

fc_status fc_fcgp_backward_cuda(const fc_args *a, void *stream)
{
    return fc::fcgp::run(a, [&](auto op) { return decltype(op)::backward(a, (cudaStream_t)stream); });
}

} // extern "C"
