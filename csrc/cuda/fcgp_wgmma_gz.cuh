/* fcgp_wgmma_gz.cuh — the Hopper (sm_90a) FCGP input gradients on warpgroup MMA, device side:
 * G_{j,p} = go_j W[p]^T (B x N_in, K = N_out) for every pair (j, p), then at each position
 * gxg_i = sum over the terms of s yg_k G_{j,p} and gyg_k = sum s xg_i G_{j,p}, then the MVGELU
 * backward (gate_backward).
 *
 * A = go_j straight from its tile, which has the forward's x-tile layout with K = N_out (64
 * batch rows x 32 bytes x D components): loaded (and tf32-rounded), no pairs to form. B = W[p]
 * as stored (rows of N_in, N_out contiguous) in a prepared copy with N_out permuted inside each
 * step as the A loads read go (phys_col) and tf32-rounded (prep_wz of fcgp_sm90a.cu), brought
 * in the 32-byte swizzle. A block owns 64 batch rows x BN columns of N_in; warpgroup w owns go's
 * components [w D/2, (w+1) D/2) and so the pairs of those j (Plans' pairs are ordered by j: 22
 * + 22 for Cl(3,0), 7 + 7 for Cl(2,0)), every pair's accumulators at the same positions: QW x
 * BN / 2 fp32 a thread (BN 16 at D = 8: 176; 32 at D = 4: 112). After the K loop the
 * accumulators go to shared memory as G[pair][position] (over the ring, whose copies have all
 * landed and been read) and each thread finishes a few positions as fcgp.cu's gz_kernel does,
 * forming xg, yg from x, y there (no gated copies in memory).
 */
#pragma once

#include "fcgp_wgmma.cuh"
#include "tma_ring.cuh"

namespace fc {
namespace fcgp {
namespace sm90 {

template <int ID, int MODE> struct GzCfg {
    static constexpr int D = AlgebraTraits<ID>::D, P = AlgebraTraits<ID>::P, NP = Plans<ID>::pair.np, JW = D / 2;
    static constexpr int BM = 64, BN = D == 4 ? 32 : 16, THREADS = 256, STAGES = 6;
    static constexpr int KS = MODE == kTF32 ? 8 : 16;                   /* N_out a step: 32 bytes */
    static constexpr int OB = D * BM * 32, WB = P * BN * 32, STAGE = OB + WB; /* go tile, W tiles */
    static constexpr int POS = BM * BN, Q0 = Plans<ID>::pair.jbegin[JW]; /* warpgroup 1's first pair */
    static constexpr int QW = Q0 > NP - Q0 ? Q0 : NP - Q0;               /* pairs a warpgroup, at most */
    static constexpr int RING = STAGES * STAGE, SG = NP * POS * 4;      /* the stages; G staged */
    static constexpr int BARS = RING > SG ? RING : SG, SMEM = BARS + 1024 + 2 * STAGES * 8;
    static_assert(STAGE % 256 == 0 && (BN * 32) % 256 == 0, "swizzle tiles aligned");
    static_assert(SMEM <= 227 * 1024, "the stages and G fit");
};

/* One warpgroup's step: the A fragments of its components of go, then one wgmma a pair on
 * W[p]'s tile into that pair's accumulators, all in flight together. */
template <int ID, int MODE, int WG>
__device__ __forceinline__ void gz_step(float (&acc)[GzCfg<ID, MODE>::QW][GzCfg<ID, MODE>::BN / 2],
                                        const unsigned char *gos, uint32_t w_smem, int r0, int t)
{
    using C = GzCfg<ID, MODE>;
    constexpr int j0 = WG * C::JW, q0 = WG ? C::Q0 : 0, q1 = WG ? C::NP : C::Q0;
    uint32_t a[C::JW][4];
    static_for<C::JW>([&](auto jj) {
        constexpr int j = j0 + decltype(jj)::value;
        const uint2 lo = *(const uint2 *)(gos + (j * C::BM + r0) * 32 + t * 8);
        const uint2 hi = *(const uint2 *)(gos + (j * C::BM + r0 + 8) * 32 + t * 8);
        /* the A order of form_pair: rows g, g + 8 of .x, then of .y */
        const uint32_t v[4] = {lo.x, hi.x, lo.y, hi.y};
#pragma unroll
        for (int r = 0; r < 4; ++r)
            a[decltype(jj)::value][r] = MODE == kTF32 ? to_tf32(__uint_as_float(v[r])) : v[r];
    });
    wg::fence();
    static_for<q1 - q0>([&](auto u) {
        constexpr int q = q0 + decltype(u)::value, j = Plans<ID>::pair.pj[q], p = Plans<ID>::pair.pp[q];
        wg::MmaRS<MODE, C::BN>::run(acc[decltype(u)::value], a[j - j0],
                                    wg::desc_kmajor_sw32(w_smem + p * C::BN * 32, 256), 1);
    });
    wg::commit();
    wg::wait<0>();
}

/* gomap over go (N_out, B, D); wmap over the prepared W (Nop, N_in, P), 32-byte swizzle. x, y
 * (D, B, N_in): the inputs, whose MVGELU (xg, yg) and its backward the epilogue forms at each
 * position; gx, gy: NULL when not wanted. */
template <int ID, int MODE, class Tio>
__global__ void __launch_bounds__(256, 1)
    gz_tma_kernel(const __grid_constant__ CUtensorMap gomap, const __grid_constant__ CUtensorMap wmap,
                  const Elem<MODE> *__restrict__ x, const Elem<MODE> *__restrict__ y, Tio *__restrict__ gx,
                  Tio *__restrict__ gy, int B, int Ni, int No, int gate)
{
    using C = GzCfg<ID, MODE>;
    using E = Elem<MODE>;
    using A = AlgebraTraits<ID>;
    constexpr int D = C::D, S = C::STAGES;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *smem = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, g = (tid % 32) / 4, t = tid % 4;
    const int n0 = blockIdx.x * C::BN, m0 = blockIdx.y * C::BM, steps = (No + C::KS - 1) / C::KS;
    tma::Ring<S> ring((uint64_t *)(smem + C::BARS), steps, 2);
    auto issue = [&](int s, uint64_t *bar) { /* thread 0: step s into buffer s % S */
        unsigned char *buf = smem + (s % S) * C::STAGE;
        tma::mbar_arrive_expect_tx(bar, C::STAGE);
        tma::load_3d(buf, &gomap, s * C::KS, m0, 0, bar);
        tma::load_3d(buf + C::OB, &wmap, s * C::KS, n0, 0, bar);
    };

    float acc[C::QW][C::BN / 2];
    zero(acc);
    ring.consume(issue, [&](int s) {
        const unsigned char *buf = smem + (s % S) * C::STAGE;
        if (wgi == 0)
            gz_step<ID, MODE, 0>(acc, buf, smem_u32(buf + C::OB), 16 * warp + g, t);
        else
            gz_step<ID, MODE, 1>(acc, buf, smem_u32(buf + C::OB), 16 * warp + g, t);
    });
#pragma unroll
    for (int ql = 0; ql < C::QW; ++ql)
        wg::fence_operands(acc[ql]);
    /* G[pair][row BN + column]: acc[ql][4c + 2h + e] is pair q0 + ql at row 16 warp + g + 8h,
     * column 8c + 2t + e */
    float *sG = (float *)smem;
    const int q0 = wgi ? C::Q0 : 0, nq = wgi ? C::NP - C::Q0 : C::Q0;
    __syncthreads(); /* both warpgroups are past their last step */
#pragma unroll
    for (int ql = 0; ql < C::QW; ++ql)
        if (ql < nq)
#pragma unroll
            for (int c = 0; c < C::BN / 8; ++c)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        sG[(q0 + ql) * C::POS + (16 * warp + g + 8 * h) * C::BN + 8 * c + 2 * t + e] =
                            acc[ql][4 * c + 2 * h + e];
    __syncthreads();
    const int64_t BNi = (int64_t)B * Ni;
    for (int pos = tid; pos < C::POS; pos += C::THREADS) {
        const int64_t b = m0 + pos / C::BN, n = n0 + pos % C::BN;
        if (b >= B || n >= Ni)
            continue;
        const int64_t off = b * Ni + n;
        float xv[D], yv[D], tx[D] = {}, ty[D] = {};
        gelu_at(gate, x + off, BNi, xv); /* xg, yg */
        gelu_at(gate, y + off, BNi, yv);
        static_for<A::T>([&](auto tc) {
            constexpr fc_term e = A::table.term[decltype(tc)::value];
            const float gv = sG[Plans<ID>::pair.term_pair[decltype(tc)::value] * C::POS + pos];
            tx[e.i] += float(e.sign) * yv[e.k] * gv;
            ty[e.k] += float(e.sign) * xv[e.i] * gv;
        });
        if (gx)
            gate_backward(gate, tx, x + off, gx + off, BNi);
        if (gy)
            gate_backward(gate, ty, y + off, gy + off, BNi);
    }
}

} // namespace sm90
} // namespace fcgp
} // namespace fc
