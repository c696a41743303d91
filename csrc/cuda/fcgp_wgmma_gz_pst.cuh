/* fcgp_wgmma_gz_pst.cuh — the Hopper FCGP input gradient (gz, fcgp_wgmma_gz.cuh) in persistent
 * CTAs, for one-CTA tiles (GROUPS 1: Cl(2,0), and Cl(3,0) with bf16 products).
 *
 * gz_tma_kernel is one CTA a tile of eight to sixteen ring steps: each tile's ring starts empty
 * (its first stage waits a whole L2 round trip), each CTA sets up its barriers and registers, and
 * the tile's staging and epilogue leave the copy engine idle. Timed apart at Cl(2,0) bf16 (B 4096,
 * N 512, H200), its K loop alone took 72.6 us, the same K loop in persistent CTAs 58.7, the
 * wgmmas alone 53.7 against 41.4 (NOTES_FCGP.md session 40). Here each CTA (grid: at most one an
 * SM) works through tiles blockIdx.x, + gridDim.x, ... in gz_tma_kernel's order within a tile (K
 * loop, G staged, then the epilogue), one ring carried across its tiles: the producer issues the
 * next tile's first stages while this tile's G is staged and finished. G is staged beside the
 * ring, not over it, rows swizzled instead of padded: fp32 with tf32 products (112 KB at Cl(2,0),
 * three stages of KK 2 beside it), rounded to bf16 with bf16 products (56 KB at Cl(2,0), 88 KB at
 * Cl(3,0)). The producer warpgroup only issues the copies; the two consumer warpgroups run the
 * epilogue, two adjacent columns a thread (so N_in is even and x, y, gx, gy are aligned to two
 * elements: the launcher checks), and bring the next tile's x, y into L2 before it.
 * Each accumulator takes gz_tma_kernel's wgmmas in the same order and each position its
 * arithmetic, so with tf32 products the gradients are bitwise gz_tma_kernel's; with bf16 products
 * they differ by G's rounding to bf16, of the order of the bf16 gradients' own rounding.
 * The tile loop compiled without spills only with the measures marked below (opaque, the
 * predicated release, the shuffled warpgroup index, the accumulators zeroed by asm; ptxas -v,
 * NOTES_FCGP.md session 40).
 */
#pragma once

#include "fcgp_wgmma_gz.cuh"

namespace fc {
namespace fcgp {
namespace sm90 {

template <int ID, int MODE, int KK> struct GzPstCfg {
    using C = GzCfg<ID, MODE, KK>;
    static constexpr bool G16 = MODE == kBF16;            /* G staged in bf16 */
    static constexpr int UB = G16 ? 4 : 8;                /* bytes a unit: two adjacent columns */
    static constexpr int RU = C::BN / 2;                  /* units a row of a pair's G */
    static constexpr int RP = 128 / (RU * UB) > 0 ? 128 / (RU * UB) : 1; /* rows in 128 bytes */
    static constexpr int NG = RU / 4;                     /* groups of 4 units a row */
    static constexpr int GB = C::QG * C::BM * RU * UB;    /* every pair's G of a tile */
    static constexpr int STAGES = [] {
        int n = 6;
        while (n > 0 && n * C::STAGE + GB + 1024 + 2 * n * 8 > 227 * 1024)
            --n;
        return n;
    }();
    static constexpr int RING = STAGES * C::STAGE, SMEM = RING + GB + 1024 + 2 * STAGES * 8;
    /* the epilogue takes two adjacent columns a thread (x, y, gx, gy moved two at a time, each
     * G unit read once for both) */
    static constexpr int NR = C::POS / 2 / kConsumerThreads; /* a consumer thread's pairs a tile */
    /* every pair's x, y loaded before G is complete (gz_tma_kernel's order) at D 4; at D 8 those
     * 2 NR 2 D = 64 values beside the K loop spilled, so there each pair's come after G */
    static constexpr bool EARLY = C::D <= 4;
    /* one CTA a tile; rows of 16 or 32 columns (the swizzle); whole runs for every consumer */
    static constexpr bool ok = C::GROUPS == 1 && (C::BN == 16 || C::BN == 32) && RU * UB <= 128 &&
                               C::POS % (2 * kConsumerThreads) == 0 && STAGES >= 2;
};

/* mbarrier.arrive under a predicate rather than a branch around it: a branch inside the K loop
 * (the ring's consume_fed) between the wgmma steps made ptxas serialize them in the tile loop */
__device__ __forceinline__ void mbar_arrive_if(uint64_t *bar, int pred)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(
                     smem_u32(bar)),
                 "r"(pred)
                 : "memory");
}

/* v, opaque to the compiler: addresses formed from it inside the tile loop stay there (hoisted
 * out of it, each staging and epilogue address held a register through the K loop, which spilled) */
__device__ __forceinline__ uint32_t opaque(uint32_t v)
{
    asm volatile("mov.b32 %0, %0;\n" : "+r"(v));
    return v;
}

/* The byte offset of unit u (columns 2u, 2u + 1) of row r of pair q's staged G: the groups of 4
 * units XORed by (r / RP) % NG, so that a warp's staging stores (rows g of 8, units 4 c + t) and a
 * warp's epilogue reads (two or four rows, every unit) fall on distinct banks, without padding
 * (no room for it beside the ring). */
template <class O> __device__ __forceinline__ uint32_t gz_pst_at(int q, int r, int u)
{
    const int key = (r / O::RP) % O::NG;
    return (uint32_t)(((q * 64 + r) * O::RU + (((u >> 2) ^ key) << 2) + (u & 3)) * O::UB);
}

/* gomap, wmap, x, y, gx, gy, B, Ni, No, cs, gate as gz_tma_kernel's for KK. Launched in the
 * backward's programmatic chain, as gz_tma_kernel. */
template <int ID, int MODE, class Tio, int KK>
__global__ void __launch_bounds__(kSplitThreads, 1)
    gz_pst_kernel(const __grid_constant__ CUtensorMap gomap, const __grid_constant__ CUtensorMap wmap,
                  const Elem<MODE> *__restrict__ x, const Elem<MODE> *__restrict__ y, Tio *__restrict__ gx,
                  Tio *__restrict__ gy, int B, int Ni, int No, int64_t cs, int gate)
{
    using C = GzCfg<ID, MODE, KK>;
    using O = GzPstCfg<ID, MODE, KK>;
    static_assert(O::ok, "one CTA a tile of 16 or 32 columns, whole column pairs for each consumer thread");
    static_assert(C::BM == 64, "gz_pst_at's rows");
    constexpr int D = C::D, S = O::STAGES, NR = O::NR;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *smem = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, g = (tid % 32) / 4, t = tid % 4;
    pdl::waiting(); /* as gz_tma_kernel's */
    const int ntn = (Ni + C::BN - 1) / C::BN, tiles = ntn * ((B + C::BM - 1) / C::BM);
    const int steps = (No + C::KS - 1) / C::KS;
    const int mine = (int)blockIdx.x < tiles ? (tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    auto tile_at = [&](int k, int &m0, int &n0) { /* this CTA's k-th tile: column tiles fastest */
        const int tt = (int)blockIdx.x + k * (int)gridDim.x;
        n0 = tt % ntn * C::BN, m0 = tt / ntn * C::BM;
    };
    tma::Ring<S> ring((uint64_t *)(smem + O::RING + O::GB), mine * steps, 2);

    if (wgi == 2) { /* the producer warpgroup: one thread issues every step of every tile */
        wg::setmaxnreg_dec<kProducerRegs>();
        if (tid == 256)
            for (int k = 0, gs = 0; k < mine; ++k) {
                int m0, n0;
                tile_at(k, m0, n0);
                for (int s = 0; s < steps; ++s, ++gs) {
                    if (gs >= S)
                        tma::mbar_wait(&ring.empty[gs % S], ((gs - S) / S) & 1);
                    uint64_t *bar = &ring.full[gs % S];
                    unsigned char *buf = smem + (gs % S) * C::STAGE;
                    tma::mbar_arrive_expect_tx(bar, C::STAGE);
                    tma::load_4d(buf, &gomap, 0, s * (C::KS / 8), m0 / C::KSB, 0, bar); /* go^T's panels */
                    tma::load_3d(buf + C::OB, &wmap, s * C::KS, n0, 0, bar);
                }
            }
        return; /* the consumers' barriers below count their own 256 threads alone */
    }
    wg::setmaxnreg_inc<kConsumerRegs>();
    const uint32_t sg = smem_u32(smem + O::RING);
    const int lead = tid % 128 == 0; /* releases a buffer for its warpgroup: predicated, not branched */

    /* a tile's x, y rows (BN columns of each of its rows and components) into L2, one line run a
     * consumer thread at a time: the first and the last element of each, so that a run across two
     * lines brings both (gz_tma_kernel's prefetch_share, there by the producer's warp a ring's depth
     * before its K loop ends; here a whole tile ahead) */
    auto prefetch_tile = [&](int m0, int n0) {
        constexpr int RUNS = C::BM * D * 2;
        const int nl = min(C::BN, Ni - n0) - 1;
        for (int l = tid; l < RUNS; l += kConsumerThreads) {
            const int r = l / (2 * D), c = l / 2 % D, b = m0 + r;
            if (b >= B)
                continue;
            const Elem<MODE> *p = (l % 2 ? y : x) + c * cs + (int64_t)b * Ni + n0;
            asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
            asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p + nl));
        }
    };
    /* one tile's K loop and G's staging for warpgroup WG (its own accumulators, cut into its own
     * components' runs as in gz_tma_kernel) */
    auto kloop_stage = [&](auto wg, int k) {
        constexpr int WG = decltype(wg)::value;
        constexpr int j0 = WG * C::JW, q0 = Plans<ID>::pair.jbegin[j0], nq = pairs_of<ID>(j0, C::JW);
        float acc[C::QW][C::BN / 2];
        /* zeroed by asm: plain zeros flowed into the first step's wgmmas as register moves ptxas
         * fenced with warpgroup.arrive of its own (C7519, C7517) */
#pragma unroll
        for (int i = 0; i < C::QW; ++i)
#pragma unroll
            for (int e = 0; e < C::BN / 2; ++e)
                asm volatile("mov.b32 %0, 0;\n" : "=f"(acc[i][e]));
        for (int gs = k * steps; gs < (k + 1) * steps; ++gs) {
            tma::mbar_wait(&ring.full[gs % S], (gs / S) & 1);
            const unsigned char *buf = smem + (gs % S) * C::STAGE;
            gz_step<ID, MODE, KK, 0, WG>(acc, smem_u32(buf), smem_u32(buf + C::OB), warp, tid % 32);
            mbar_arrive_if(&ring.empty[gs % S], lead);
        }
#pragma unroll
        for (int ql = 0; ql < C::QW; ++ql)
            wg::fence_operands(acc[ql]);
        /* every consumer is past the last tile's epilogue, which read the staged G (barrier 1 over
         * the 256 consumer threads, reached from each warpgroup's own code: the non-.aligned form) */
        asm volatile("barrier.sync 1, 256;\n" ::: "memory");
        /* row 16 warp + g + 8 h, unit 4 c + t; in bf16 the two columns rounded as one word (low half
         * the first). Rows g and g + 8 share a swizzle key ((RP, NG) is (1, 4), (2, 4) or (4, 2), and
         * 8 is a multiple of RP NG). The group bases are formed here, from opaque(sg), and the pair
         * and h offsets are constants: hoisted out of the tile loop, every staging address was a
         * register held through the K loop, which spilled */
        const int r0 = 16 * warp + g, key = (r0 / O::RP) % O::NG;
        uint32_t gbase[O::NG];
#pragma unroll
        for (int c = 0; c < O::NG; ++c)
            gbase[c] = opaque(sg) + (uint32_t)((r0 * O::RU + ((c ^ key) << 2) + t) * O::UB);
        each_pair<C::QW, C::BN, nq>(acc, [&](int ql, int c, int h, float v0, float v1) {
            const uint32_t at = gbase[c] + (uint32_t)(((q0 + ql) * 64 + 8 * h) * O::RU * O::UB);
            if constexpr (O::G16) {
                const __nv_bfloat162 v = __floats2bfloat162_rn(v0, v1);
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(pack_bf16x2(v.x, v.y)) : "memory");
            } else {
                sts_f32x2(at, v0, v1);
            }
        });
    };
    /* one tile's positions from its staged G, two adjacent columns a thread at a time: pair j is
     * (row, col), (row, col + 1) with 2 (j 256 + tid) = row BN + col, so a warp's lanes take
     * adjacent pairs. x, y are loaded before the barrier that waits for every G (gz_tma_kernel's
     * order) where that fits (EARLY) */
    auto epilogue = [&](int m0_, int n0) {
        /* m0 and tid through opaque, after the staging's stores: the x, y loads (read-only, so free
         * to move) went above the staging, their values held beside the accumulators, which spilled */
        const int m0 = (int)opaque((uint32_t)m0_), me = (int)opaque((uint32_t)tid);
        float xr[NR][2][D], yr[NR][2][D];
        auto load_pair = [&](int j, int64_t at) {
            load_comps2(x + at, cs, xr[j]);
            load_comps2(y + at, cs, yr[j]);
        };
        if constexpr (O::EARLY)
#pragma unroll
            for (int j = 0; j < NR; ++j) {
                const int pl = j * kConsumerThreads + me, row = 2 * pl / C::BN, col = 2 * pl % C::BN;
                const int64_t b = m0 + row, n = n0 + col; /* n even, so n + 1 < N_in with n */
                if (b < B && n < Ni)
                    load_pair(j, b * Ni + n);
            }
        asm volatile("barrier.sync 1, 256;\n" ::: "memory"); /* every G of the tile staged */
#pragma unroll
        for (int j = 0; j < NR; ++j) {
            const int pl = j * kConsumerThreads + me, row = 2 * pl / C::BN, col = 2 * pl % C::BN;
            const int64_t b = m0 + row, n = n0 + col;
            if (b >= B || n >= Ni)
                continue;
            if constexpr (!O::EARLY)
                load_pair(j, b * Ni + n);
            /* every pair's G at both positions, one unit a pair (its offsets constants from at0) */
            const uint32_t at0 = opaque(sg) + gz_pst_at<O>(0, row, col / 2);
            float2 gq[C::NP];
            static_for<C::NP>([&](auto q) {
                constexpr int Q = decltype(q)::value;
                const uint32_t at = at0 + (uint32_t)(Q * 64 * O::RU * O::UB);
                if constexpr (O::G16) {
                    const uint32_t v = lds_b32(at);
                    gq[Q] = make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
                } else {
                    const uint2 v = lds_b64(at);
                    gq[Q] = make_float2(__uint_as_float(v.x), __uint_as_float(v.y));
                }
            });
            float gxv[2][D], gyv[2][D];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float tx[D], ty[D];
                gz_terms<ID, Tio>(gate, xr[j][e], yr[j][e], [&](int q) { return e ? gq[q].y : gq[q].x; }, tx, ty);
                gate_backward_vals<Tio>(gate, tx, xr[j][e], gxv[e]);
                gate_backward_vals<Tio>(gate, ty, yr[j][e], gyv[e]);
            }
            const int64_t off = b * Ni + n;
#pragma unroll
            for (int a = 0; a < D; ++a) {
                if (gx)
                    store2(gx + off + a * cs, gxv[0][a], gxv[1][a]);
                if (gy)
                    store2(gy + off + a * cs, gyv[0][a], gyv[1][a]);
            }
        }
    };
    auto tiles_of = [&](auto wg) {
        for (int k = 0; k < mine; ++k) {
            int m0, n0;
            tile_at(k, m0, n0);
            if (k == 0)
                prefetch_tile(m0, n0);
            kloop_stage(wg, k);
            if (k + 1 < mine) { /* the next tile's x, y into L2 while this one finishes */
                int m1, n1;
                tile_at(k + 1, m1, n1);
                prefetch_tile(m1, n1);
            }
            epilogue(m0, n0);
        }
    };
    /* the warpgroup index through a shuffle, so that ptxas knows the branch warp-uniform (without,
     * it serialized the wgmmas: C7520) */
    if (__shfl_sync(0xffffffffu, wgi, 0) == 0)
        tiles_of(std::integral_constant<int, 0>{});
    else
        tiles_of(std::integral_constant<int, 1>{});
}

} // namespace sm90
} // namespace fcgp
} // namespace fc
