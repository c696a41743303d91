/* fcgp_wgmma_gw.cuh — the Hopper (sm_90a) FCGP weight gradient on warpgroup MMA, device side:
 * gW[p] (N_in x N_out) = sum_j z_{j,p}^T go_j, K = the batch.
 *
 * The forward's machinery, transposed. A = z_{j,p}^T (N_in x batch) is formed in registers, as
 * the forward forms z, from tiles of the raw inputs x, y (and the gate product g of
 * gate_product: z = g sum s x_i y_k, SPEC's MVGELU) read across: a tile holds KS batch rows x
 * 64 columns of N_in a component, in the copy engine's 128-byte swizzle, and each thread loads
 * its fragments down the columns (load_frags_t: two 4-byte loads a fragment pair in tf32, one
 * transposing ldmatrix a component in bf16). No transposed copies of x and y in memory. go_j^T
 * (prep_wt of fcgp_sm90a.cu on go: (D, N_out, B), the batch in tf32 permuted inside each step as
 * the fragments read it, phys_col) is the K-major B operand (32-byte swizzle, as the forward's W^T).
 *
 * A block owns 64 rows of N_in x NT = 48 columns of N_out of one path group's gradients: the
 * paths split into GROUPS groups by the grade of their x component (Cl(3,0): paths 0-9 read x's
 * grades 0, 1, paths 10-19 grades 2, 3; Cl(2,0): one group), so a block brings only its group's
 * x components (XC of D) and forms only its group's pairs. Warpgroup w owns half the group's
 * paths, PH x NT / 2 = 120 fp32 accumulators a thread (the paths, not the components, index the
 * accumulators here). For each of its paths it forms the A fragments of that path's pairs (one
 * per output component j) and issues one wgmma a pair on go_j's tile. Split in groups, a pair
 * formed feeds a wgmma of N = 48 (the whole paths' block took N = 24 at Cl(3,0)): half the
 * fragment forming and wgmmas a flop, and 7% fewer tile bytes.
 * The batch is split over gridDim.z; each split writes its own fp32 partial (P, N_in, N_out),
 * summed in split order afterwards (deterministic, no atomics).
 */
#pragma once

#include "fcgp_wgmma.cuh"
#include "tma_ring.cuh"

namespace fc {
namespace fcgp {
namespace sm90 {

/* Whether every term of a path of group g (paths [g P / G, (g + 1) P / G)) reads an x component
 * of [g D / G, (g + 1) D / G): then a group's block needs only those components of x. */
template <int ID> constexpr bool x_split_by_paths(int groups)
{
    const AlgebraTable &tb = AlgebraTraits<ID>::table;
    for (int t = 0; t < tb.T; ++t) {
        const int g = tb.term[t].path / (tb.P / groups);
        if (tb.term[t].i < g * (tb.D / groups) || tb.term[t].i >= (g + 1) * (tb.D / groups))
            return false;
    }
    return tb.P % (2 * groups) == 0;
}

template <int ID, int MODE> struct GwCfg {
    static constexpr int D = AlgebraTraits<ID>::D, P = AlgebraTraits<ID>::P;
    static constexpr int GROUPS = D == 8 ? 2 : 1, PG = P / GROUPS, PH = PG / 2, XC = D / GROUPS;
    static constexpr int BM = 64, NT = 48, THREADS = 256, STAGES = 5;
    static constexpr int KS = MODE == kTF32 ? 8 : 16; /* batch rows a step: 32 bytes */
    /* x, y, g tiles: boxes of 128-byte rows (the 128-byte swizzle's widest), so 64 columns of
     * N_in take two boxes in tf32 (HALVES), one in bf16; CB: one component's box */
    static constexpr int HALVES = MODE == kTF32 ? 2 : 1, BOXN = BM / HALVES, CB = KS * 128;
    static constexpr int XB = HALVES * XC * CB, YB = HALVES * D * CB, GTB = HALVES * CB; /* x (the group's), y, g */
    static constexpr int GB = D * NT * 32;                                               /* go^T tiles */
    static constexpr int STAGE = XB + YB + GTB + GB, SMEM = STAGES * STAGE + 1024 + 2 * STAGES * 8;
    static_assert(x_split_by_paths<ID>(GROUPS), "a group's paths read only its x components");
    static_assert(BOXN * (MODE == kTF32 ? 4 : 2) == 128, "a box row is the swizzle's 128 bytes");
    static_assert(XB % 1024 == 0 && YB % 1024 == 0 && GTB % 1024 == 0 && STAGE % 1024 == 0,
                  "128-byte swizzle boxes on 1024-byte boundaries");
    static_assert((NT * 32) % 256 == 0, "go^T swizzle tiles aligned");
    static_assert(SMEM <= 227 * 1024, "the stages fit");
};

/* The pairs of path p (Plans' pair order is by j, then p): how many, and the u-th. */
template <int ID> __host__ __device__ constexpr int path_pairs(int p)
{
    int n = 0;
    for (int q = 0; q < Plans<ID>::pair.np; ++q)
        n += Plans<ID>::pair.pp[q] == p;
    return n;
}
template <int ID> __host__ __device__ constexpr int path_pair(int p, int u)
{
    for (int q = 0; q < Plans<ID>::pair.np; ++q)
        if (Plans<ID>::pair.pp[q] == p && u-- == 0)
            return q;
    return -1;
}

/* The most pairs of any of the paths [P0, P0 + N). */
template <int ID, int P0, int N> __host__ __device__ constexpr int max_path_pairs()
{
    int m = 0;
    for (int p = P0; p < P0 + N; ++p)
        m = path_pairs<ID>(p) > m ? path_pairs<ID>(p) : m;
    return m;
}

/* One warpgroup's step (path group GR): path by path, the A fragments of the path's pairs, then their wgmmas
 * on the go_j^T tiles. A path has only ~2 pairs of narrow (N = NT) wgmmas, too little work to
 * wait on alone: the fragments alternate between two register sets, so a path forms its
 * fragments while the previous path's wgmmas run, and waits (wait<1>) only for that one. */
template <int ID, int MODE, int GR, int WG>
__device__ __forceinline__ void gw_step(float (&acc)[GwCfg<ID, MODE>::PH][GwCfg<ID, MODE>::NT / 2],
                                        const Frags<AlgebraTraits<ID>::D> &f, uint32_t go_smem)
{
    using C = GwCfg<ID, MODE>;
    constexpr int P0 = GR * C::PG + WG * C::PH, NQ = max_path_pairs<ID, P0, C::PH>();
    uint32_t a[2][NQ][4];
    static_for<C::PH>([&](auto pl) {
        constexpr int L = decltype(pl)::value, p = P0 + L, nq = path_pairs<ID>(p), b = L % 2;
        static_for<nq>([&](auto u) { form_pair<ID, MODE, path_pair<ID>(p, decltype(u)::value)>(a[b][decltype(u)::value], f); });
        wg::fence();
        static_for<nq>([&](auto u) {
            constexpr int j = Plans<ID>::pair.pj[path_pair<ID>(p, decltype(u)::value)];
            wg::MmaRS<MODE, C::NT>::run(acc[L], a[b][decltype(u)::value],
                                        wg::desc_kmajor_sw32(go_smem + j * C::NT * 32, 256), 1);
        });
        wg::commit();
        if constexpr (L > 0) {
            wg::wait<1>();                  /* path L - 1 is done ... */
            wg::fence_operands(a[1 - b]);   /* ... and only now may its registers be reused */
        }
    });
    wg::wait<0>();
    wg::fence_operands(a[(C::PH - 1) % 2]);
}

/* Byte offset of byte `col` of row r in a box of 128-byte rows in the copy engine's 128-byte
 * swizzle: the 16-byte chunks of row r are permuted by r % 8. */
__device__ __forceinline__ int swz128(int r, int col) { return r * 128 + ((((col >> 4) ^ r) & 7) << 4) + (col & 15); }

/* Where this thread's A fragments lie in a component's box(es) of a tile read across
 * (GwCfg's x, y, g tiles): tf32, off[h][e] for rows r0 + 8h of A (columns of the tile) and its
 * K column t + 4e, i.e. batch row 2t + e (phys_col); the box of columns [32 hb, 32 hb + 32)
 * lies hb * NC components further. bf16, off[0][0] for lane L's row of the transposing
 * ldmatrix: matrix L / 8 covers A rows 16 warp + 8 ((L / 8) % 2) .. + 8 and K 8 (L / 16) .. + 8
 * (batch rows in order; go^T unpermuted). */
template <int MODE, int NC> struct TOffsets {
    int off[2][2];
    __device__ __forceinline__ TOffsets(int warp, int g, int t, int lane)
    {
        if constexpr (MODE == kTF32) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int m = 16 * warp + g + 8 * h, hb = m >> 5;
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    off[h][e] = hb * NC * (8 * 128) + swz128(2 * t + e, (m & 31) * 4);
            }
        } else {
            const int i = lane >> 3;
            off[0][0] = swz128((lane & 7) + 8 * (i >> 1), (16 * warp + 8 * (i & 1)) * 2);
            off[0][1] = off[1][0] = off[1][1] = 0;
        }
    }
};

/* One component's fragments [row half] (Frags layout: .x K column t / (2t, 2t + 1), .y t + 4 /
 * (2t + 8, 2t + 9)) from its box at shared address `box` (CB bytes a component). */
template <int MODE, int NC>
__device__ __forceinline__ void load_t(uint2 (&v)[2], uint32_t box, const TOffsets<MODE, NC> &o)
{
    if constexpr (MODE == kTF32) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            v[h].x = lds_b32(box + o.off[h][0]);
            v[h].y = lds_b32(box + o.off[h][1]);
        }
    } else {
        uint32_t r[4];
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(box + o.off[0][0]));
        v[0].x = r[0], v[1].x = r[1], v[0].y = r[2], v[1].y = r[3];
    }
}

/* The weight gradient's partial of batch split blockIdx.z for path group blockIdx.x % GROUPS:
 * xmap, ymap over x, y (N_in, B, D; boxes of BOXN columns x KS rows x XC or D components), gmap
 * over the gate product g (N_in, B, 1; read when gate), all in the 128-byte swizzle; gomap over
 * go^T (Bp, N_out, D) in the 32-byte swizzle; partial (splits, P, N_in, N_out). xoff, yoff:
 * where x's and y's columns start in their maps (the maps begin at the 16-byte boundary at or
 * before them, as the copy engine needs).
 * rows_per_split is a multiple of KS, so no step crosses into the next split; the copy engine
 * fills the rows past B (and go^T's past Bp) with zeros. Thread 0 also produces, polling as
 * the forward does. */
template <int ID, int MODE>
__global__ void __launch_bounds__(256, 1)
    gw_tma_kernel(const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap ymap,
                  const __grid_constant__ CUtensorMap gmap, const __grid_constant__ CUtensorMap gomap,
                  float *partial, int B, int Ni, int No, int rows_per_split, int gate, int xoff, int yoff)
{
    using C = GwCfg<ID, MODE>;
    constexpr int D = C::D, P = C::P, S = C::STAGES;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *smem = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, g = (tid % 32) / 4, t = tid % 4;
    const int grp = blockIdx.x % C::GROUPS, m0 = blockIdx.x / C::GROUPS * C::NT, n0 = blockIdx.y * C::BM,
              b0 = blockIdx.z * rows_per_split;
    const int rows = min(B - b0, rows_per_split), steps = rows > 0 ? (rows + C::KS - 1) / C::KS : 0;
    tma::Ring<S> ring((uint64_t *)(smem + S * C::STAGE), steps, 2);
    auto issue = [&](int s, uint64_t *bar) { /* thread 0: step s into buffer s % S */
        unsigned char *buf = smem + (s % S) * C::STAGE;
        tma::mbar_arrive_expect_tx(bar, gate ? C::STAGE : C::STAGE - C::GTB);
        const int k0 = b0 + s * C::KS;
#pragma unroll
        for (int hb = 0; hb < C::HALVES; ++hb) {
            const int n = n0 + hb * C::BOXN;
            tma::load_3d(buf + hb * C::XC * C::CB, &xmap, n + xoff, k0, grp * C::XC, bar);
            tma::load_3d(buf + C::XB + hb * D * C::CB, &ymap, n + yoff, k0, 0, bar);
            if (gate)
                tma::load_3d(buf + C::XB + C::YB + hb * C::CB, &gmap, n, k0, 0, bar);
        }
        tma::load_3d(buf + C::XB + C::YB + C::GTB, &gomap, k0, m0, 0, bar);
    };

    const TOffsets<MODE, C::XC> xo(warp, g, t, tid % 32);
    const TOffsets<MODE, D> yo(warp, g, t, tid % 32);
    const TOffsets<MODE, 1> gto(warp, g, t, tid % 32);
    float acc[C::PH][C::NT / 2];
    zero(acc);
    /* the step of path group GR, a compile-time constant (its paths index the fragments) */
    auto step = [&](auto gr, const unsigned char *buf) {
        constexpr int GR = decltype(gr)::value;
        Frags<D> f; /* x's components outside the group stay unset: its pairs never read them */
        const uint32_t sb = smem_u32(buf);
#pragma unroll
        for (int c = 0; c < D; ++c)
            load_t<MODE, D>(f.y[c], sb + C::XB + c * C::CB, yo);
#pragma unroll
        for (int c = 0; c < C::XC; ++c)
            load_t<MODE, C::XC>(f.x[GR * C::XC + c], sb + c * C::CB, xo);
        if (gate) { /* x times g: every pair's z then carries the gate once */
            uint2 gf[2];
            load_t<MODE, 1>(gf, sb + C::XB + C::YB, gto);
            scale_frags<MODE, C::XC>(*reinterpret_cast<uint2(*)[C::XC][2]>(&f.x[GR * C::XC]), gf);
        }
        const uint32_t go_smem = smem_u32(buf + C::XB + C::YB + C::GTB);
        if (wgi == 0)
            gw_step<ID, MODE, GR, 0>(acc, f, go_smem);
        else
            gw_step<ID, MODE, GR, 1>(acc, f, go_smem);
    };
    ring.consume(issue, [&](int s) {
        const unsigned char *buf = smem + (s % S) * C::STAGE;
        if constexpr (C::GROUPS == 1)
            step(std::integral_constant<int, 0>{}, buf);
        else if (grp == 0)
            step(std::integral_constant<int, 0>{}, buf);
        else
            step(std::integral_constant<int, 1>{}, buf);
    });
#pragma unroll
    for (int pl = 0; pl < C::PH; ++pl)
        wg::fence_operands(acc[pl]);
    /* acc[pl][4c + 2h + e]: path grp PG + wgi PH + pl, row n0 + 16 warp + g + 8h, column m0 + 8c + 2t + e */
    float *part = partial + (size_t)blockIdx.z * P * Ni * No;
    /* a thread's two adjacent columns in one 8-byte store where they are aligned (N_out even):
     * four threads then fill each 32-byte sector */
#pragma unroll
    for (int pl = 0; pl < C::PH; ++pl)
#pragma unroll
        for (int c = 0; c < C::NT / 8; ++c)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int n = n0 + 16 * warp + g + 8 * h, m = m0 + 8 * c + 2 * t;
                if (n >= Ni || m >= No)
                    continue;
                float *dst = part + ((size_t)(grp * C::PG + wgi * C::PH + pl) * Ni + n) * No + m;
                if (No % 2 == 0) {
                    *(float2 *)dst = make_float2(acc[pl][4 * c + 2 * h], acc[pl][4 * c + 2 * h + 1]);
                } else {
                    dst[0] = acc[pl][4 * c + 2 * h];
                    if (m + 1 < No)
                        dst[1] = acc[pl][4 * c + 2 * h + 1];
                }
            }
}

} // namespace sm90
} // namespace fcgp
} // namespace fc
