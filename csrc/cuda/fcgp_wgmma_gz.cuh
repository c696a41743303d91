/* fcgp_wgmma_gz.cuh — the Hopper (sm_90a) FCGP input gradients on warpgroup MMA, device side:
 * G_{j,p} = go_j W[p]^T (B x N_in, K = N_out) for every pair (j, p), then at each position
 * gxg_i = sum over the terms of s yg_k G_{j,p} and gyg_k = sum s xg_i G_{j,p}, then the MVGELU
 * backward (gate_backward).
 *
 * A = go_j, loaded down the batch from a tile of go^T (the one copy of go the backward makes, which
 * gW reads too, in step panels: got_offset; 64 batch rows x a step's KK x 32 bytes of N_out rows x
 * components): tf32 an 8-byte load a fragment pair (go^T's batch order puts a thread's rows g,
 * g + 8 side by side, got_row), bf16 read by the wgmma from shared memory as it lies (an MN-major
 * operand); no pairs to form. B = W[p] as stored (rows of N_in, N_out contiguous) in a prepared
 * copy, tf32-rounded, and the paths in slot order (PathSlots: by output grade) (prep_wz of
 * fcgp_sm90a.cu), brought in rows of a step's KK x 32 bytes in the swizzle of that width. A step
 * holds KK wgmma K chunks, with one barrier wait, one wgmma wait and one release (KK = 1 spent most
 * of each step on those: NOTES_FCGP.md session 17). The paths of an output component j are all
 * those of its grade, so in slot order their tiles lie side by side and one wgmma of N = (j's
 * pairs) x BN computes all of j's G at once (N = 64 to 192).
 *
 * A tile of 64 batch rows x BN columns of N_in needs every pair's G (44 for Cl(3,0)): one CTA
 * holds them all over BN = 16 columns (Cl(3,0) bf16) or 32 (Cl(2,0)). For Cl(3,0) tf32 a
 * cluster of GROUPS = 2 CTAs shares a 32-column tile instead: CTA r computes the pairs of
 * components [r D/2, (r+1) D/2) (grades 0, 1 or 2, 3), bringing only those components of go and
 * only its grades' paths of W (8 + 10 KB a step where one CTA over 16 columns and all pairs
 * brought 16 + 10), then both stage their G in shared memory and each finishes half the tile's
 * positions reading the other's G through distributed shared memory. Inside a CTA, warpgroup w
 * takes half its components and their pairs, every pair's accumulators at the same positions,
 * BN / 2 fp32 a pair and thread. Each thread finishes positions as fcgp.cu's gz_kernel does,
 * forming xg, yg from x, y there (no gated copies in memory). A third, producer warpgroup
 * issues the copies (as in the forward and gW), the two computing ones at kConsumerRegs; once
 * G is staged all three share the registers (kEpilogueRegs) and the epilogue's positions.
 */
#pragma once

#include "fcgp_wgmma.cuh"
#include "pdl.cuh"
#include "tma_ring.cuh"

namespace fc {
namespace fcgp {
namespace sm90 {

/* How many pairs the components [j0, j0 + n) have. */
template <int ID> __host__ __device__ constexpr int pairs_of(int j0, int n)
{
    return Plans<ID>::pair.jbegin[j0 + n] - Plans<ID>::pair.jbegin[j0];
}

/* KK: wgmma K chunks (32 bytes of N_out each) a ring step: one full-barrier wait, wgmma wait and
 * release a step however many chunks it holds; the W tile's rows are 32 KK bytes, in the swizzle
 * of that width. */
template <int ID, int MODE, int KK = 1> struct GzCfg {
    static constexpr int D = AlgebraTraits<ID>::D, P = AlgebraTraits<ID>::P, NP = Plans<ID>::pair.np;
    /* CTAs a cluster: 2 for Cl(3,0) tf32 (981 -> 939 us at B 4096, N 512, NOTES_FCGP.md session
     * 12); bf16's steps carry twice the flops, and there one CTA over 16 columns and all pairs ran
     * as fast or faster (521-541 us, against 543-552 for the pair) */
    static constexpr int GROUPS = D == 8 && MODE == kTF32 ? 2 : 1;
    static constexpr int JG = D / GROUPS, JW = JG / 2;      /* components: a CTA, a warpgroup */
    static constexpr int PS = P / GROUPS, QG = NP / GROUPS;  /* a CTA's paths (slots) and pairs */
    static constexpr int BM = 64, BN = D == 4 || GROUPS == 2 ? 32 : 16;
    static constexpr int THREADS = kSplitThreads; /* kConsumerThreads compute */
    static constexpr int KC = MODE == kTF32 ? 8 : 16; /* N_out a wgmma: 32 bytes */
    static constexpr int KSB = KC;                     /* batch positions a row of go^T's panels */
    static constexpr int KS = KC * KK, RB = 32 * KK;  /* N_out a step; its bytes */
    static constexpr int OB = JG * BM * RB, WB = PS * BN * RB, STAGE = OB + WB; /* go tile, W tiles */
    static constexpr int STAGES = stages_that_fit(STAGE, 6);
    /* G staged a row GS floats apart: BN + 8 makes the accumulators' float2 stores free of bank
     * conflicts, where that fits beside the alignment slack and barriers (not at 44 pairs x 16
     * columns) */
    static constexpr int POS = BM * BN, GS = QG * BM * (BN + 8) * 4 + 2048 <= 227 * 1024 ? BN + 8 : BN;
    static constexpr int QW = [] { /* pairs a warpgroup, at most */
        int m = 0;
        for (int u = 0; u < 2 * GROUPS; ++u)
            m = pairs_of<ID>(u * JW, JW) > m ? pairs_of<ID>(u * JW, JW) : m;
        return m;
    }();
    static constexpr int RING = STAGES * STAGE, SG = QG * BM * GS * 4;  /* the stages; G staged */
    static constexpr int BARS = RING > SG ? RING : SG, SMEM = BARS + 1024 + 2 * STAGES * 8;
    static constexpr PathSlots slots = make_path_slots<ID>();
    static constexpr bool grouped = [] { /* CTA r's pairs: [r QG, (r+1) QG), on slots [r PS, (r+1) PS) */
        bool ok = NP % GROUPS == 0 && P % GROUPS == 0 && JG % 2 == 0;
        for (int r = 0; r < GROUPS; ++r)
            for (int q = Plans<ID>::pair.jbegin[r * JG]; q < Plans<ID>::pair.jbegin[(r + 1) * JG]; ++q)
                ok = ok && q / QG == r && slots.slot[Plans<ID>::pair.pp[q]] / PS == r;
        return ok;
    }();
    static_assert(slots.ok, "each output component's paths are consecutive in slot order");
    static_assert(grouped, "each CTA of the cluster computes a contiguous share of pairs and paths");
    static_assert(KK == 1 || KK == 2 || KK == 4, "rows of 32, 64 or 128 bytes");
    static_assert(STAGE % 1024 == 0 && OB % 2048 == 0 && BN % 8 == 0 && STAGES >= 2, "swizzle tiles aligned");
    static_assert(SMEM <= 227 * 1024, "the stages and G fit");
};

/* tf32: this thread's A fragment of go_j for component jl and K chunk kk of the CTA's go^T tile,
 * a box of go^T's panels (got_offset): [component][64 / 8 steps of the batch][KS N_out rows][32
 * bytes], a row's 16-byte halves swapped in rows 4-7 of every 8 (the panels' swizzle); warp w's
 * batch rows are 16 w .. 16 w + 15 of the tile. A order: (g, t), (g + 8, t), (g, t + 4), (g + 8,
 * t + 4). Positions 2g, 2g + 1 (got_row) hold rows g, g + 8, so each column is one 8-byte load;
 * columns t and t + 4 are N_out rows t and t + 4 of the chunk, so a half warp's loads cover the
 * 32 banks once. (bf16 reads the same panels as an MN-major shared-memory operand: gz_step.) */
template <int KS>
__device__ __forceinline__ void go_frag_tf32(uint32_t (&a)[4], uint32_t tile, int jl, int kk, int warp, int lane)
{
    constexpr int PANEL = 64 / 8; /* steps a tile, 8 positions a panel row */
    auto row = [&](int step, int n) { return tile + ((jl * PANEL + step) * KS + n) * 32; };
    const int g = lane / 4, t = lane % 4, step = 2 * warp + g / 4, e = (2 * g) % 8; /* position 2g */
    const uint2 lo = lds_b64(row(step, kk * 8 + t) + e * 4);             /* column t: rows 0-3 unswapped */
    const uint2 hi = lds_b64(row(step, kk * 8 + t + 4) + (e ^ 4) * 4); /* column t + 4: swapped */
    a[0] = lo.x, a[1] = lo.y, a[2] = hi.x, a[3] = hi.y;
}

/* One warpgroup's step (CTA group GR, warpgroup WG): one wgmma a K chunk and component j of go on
 * the side-by-side W tiles of j's paths into j's pairs' accumulators (adjacent: pairs are ordered
 * by j, then by path, which is slot order within a grade), all in flight together, then waited
 * for. tf32 forms its A fragments in registers first (tf32 has no MN-major operand). */
template <int ID, int MODE, int KK, int GR, int WG>
__device__ __forceinline__ void gz_step(float (&acc)[GzCfg<ID, MODE, KK>::QW][GzCfg<ID, MODE, KK>::BN / 2],
                                        uint32_t go_smem, uint32_t w_smem, int warp, int lane)
{
    using C = GzCfg<ID, MODE, KK>;
    constexpr int jl0 = WG * C::JW, j0 = GR * C::JG + jl0, q0 = Plans<ID>::pair.jbegin[j0];
    uint32_t a[KK][C::JW][4]; /* tf32 only */
    if constexpr (MODE == kTF32)
        static_for<KK>([&](auto kk) {
            static_for<C::JW>([&](auto u) { /* go^T is tf32-rounded already */
                go_frag_tf32<C::KS>(a[decltype(kk)::value][decltype(u)::value], go_smem, jl0 + decltype(u)::value,
                                    decltype(kk)::value, warp, lane);
            });
        });
    wg::fence();
    static_for<KK>([&](auto kk) {
        static_for<C::JW>([&](auto u) {
            constexpr int j = j0 + decltype(u)::value, qa = Plans<ID>::pair.jbegin[j];
            constexpr int N = (Plans<ID>::pair.jbegin[j + 1] - qa) * C::BN;
            constexpr int w_off = (C::slots.first[j] - GR * C::PS) * C::BN * C::RB + 32 * decltype(kk)::value;
            float(&d)[N / 2] = *reinterpret_cast<float(*)[N / 2]>(&acc[qa - q0][0]);
            const uint64_t b = wg::desc_kmajor_swz<C::RB>(w_smem + w_off);
            if constexpr (MODE == kTF32) {
                wg::MmaRS<MODE, N>::run(d, a[decltype(kk)::value][decltype(u)::value], b, 1);
            } else {
                /* bf16: A read by the wgmma from go^T's panels as they lie (MN-major, the 32-byte
                 * swizzle): 16 batch positions a panel row, the tile's 4 panels KS rows of 32
                 * bytes apart, K chunk kk at row 16 kk. No ldmatrix, no A registers: gz -2.8% at
                 * Cl(3,0) bf16 (303.6 -> 295.2 us), -1.2% at Cl(2,0) (H200, B 4096, N 512,
                 * NOTES_FCGP.md session 39; each step's wgmmas left in flight through the next
                 * step's issue measured no faster) */
                constexpr int a_off =
                    ((jl0 + decltype(u)::value) * (64 / C::KSB) * C::KS + 16 * decltype(kk)::value) * 32;
                wg::MmaSS<MODE, N>::run(d, wg::desc_mn_sw32(go_smem + a_off, C::KS * 32, 256), b, 1);
            }
        });
    });
    wg::commit();
    wg::wait<0>();
    if constexpr (MODE == kTF32) {
#pragma unroll
        for (int kk = 0; kk < KK; ++kk) /* the A registers stay unused until the wgmmas reading them retire */
            wg::fence_operands(a[kk]);
    }
}

/* The registers of every warpgroup in gz's epilogue, which all three share: the launch's, evenly. */
constexpr int kEpilogueRegs = 168;
static_assert(3 * kEpilogueRegs == kProducerRegs + 2 * kConsumerRegs, "the registers the K loop held");

/* Named barrier 2 over all 384 threads: the consumers arrive once their setmaxnreg.dec has given
 * their registers back, and the producer waits there before its setmaxnreg.inc. Without it a
 * producer warp could take back at its inc the registers its first dec had just released, before
 * the consumers' inc at the start was served. The consumers then wait for registers that never
 * come, the producer for stages they never release: a hang that depends on scheduling, the likely
 * cause of a chain run and a racecheck run that never finished (NOTES_FCGP.md session 28). PTX also
 * requires a warpgroup to synchronize explicitly between two of its setmaxnreg. The non-.aligned
 * forms, since the two sides arrive from different code. */
__device__ __forceinline__ void regs_returned_arrive()
{
    asm volatile("barrier.arrive 2, %0;\n" ::"n"(kSplitThreads) : "memory");
}
__device__ __forceinline__ void regs_returned_wait() { asm volatile("barrier.sync 2, %0;\n" ::"n"(kSplitThreads) : "memory"); }

/* The x, y rows of a CTA's share of gz's epilogue (rows [grp SHARE / BN, (grp + 1) SHARE / BN) of
 * the tile, columns [n0, n0 + BN), every component) into L2 by the producer's warp (lane i of 32)
 * once it has issued the last step, a ring's depth before the K loop ends: the epilogue loads
 * them straight after it, and from HBM that latency sat before the barrier that waits for every
 * G (H100, B 4096, N 512: gz 461 -> 447 us at Cl(3,0) tf32, 143 -> 127 Cl(2,0) bf16; prefetched
 * as the tile started, they measured slower in tf32: NOTES_FCGP.md session 27). The first and
 * last element of each row run, so that a run across two lines brings both. */
template <class C, class E>
__device__ __forceinline__ void prefetch_share(const E *x, const E *y, int64_t cs, int B, int Ni, int m0, int n0, int grp,
                                               int i)
{
    constexpr int R = C::POS / C::GROUPS / C::BN, LINES = R * C::D * 2;
    const int nl = min(C::BN, Ni - n0) - 1;
    for (int l = i; l < LINES; l += 32) {
        const int r = l / (2 * C::D), c = l / 2 % C::D, b = m0 + grp * R + r;
        if (b >= B)
            continue;
        const E *p = (l % 2 ? y : x) + c * cs + (int64_t)b * Ni + n0;
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p + nl));
    }
}

/* Two adjacent positions' D components of bf16 data as loaded (one 2-element load a component, x
 * 2-element aligned, cs even), widened by widen2 where they are used: a conversion placed before a
 * barrier makes the thread wait there for its own loads (load_comps2 widens at once). */
template <int D>
__device__ __forceinline__ void load_raw2(const __nv_bfloat16 *__restrict__ x, int64_t cs, __nv_bfloat162 (&w)[D])
{
#pragma unroll
    for (int a = 0; a < D; ++a)
        w[a] = *(const __nv_bfloat162 *)(x + a * cs);
}
template <int D> __device__ __forceinline__ void widen2(const __nv_bfloat162 (&w)[D], float (&v)[2][D])
{
#pragma unroll
    for (int a = 0; a < D; ++a) {
        const float2 f = __bfloat1622float2(w[a]);
        v[0][a] = f.x, v[1][a] = f.y;
    }
}

/* A position's gate Phi(x_0) and its derivative phi(x_0) for MVGELU and its backward, of the data
 * type Tio (gate_of, gate_grad_of: bf16 data the short erf and the hardware exp, as fwd_prep's gate
 * product), each evaluated once (gate_backward_with takes them): gelu_of and gate_backward_vals
 * evaluated Phi each under its own test of the gate, and the compiler kept both (PTX: four
 * divisions and exponentials a position where two are needed; NOTES_FCGP.md session 51). The
 * same operations, so the same bits. */
struct GateAt {
    float ph, dph;
};
template <class Tio> __device__ __forceinline__ GateAt gate_at(int gate, float x0)
{
    if (!gate)
        return {1.f, 0.f};
    return {gate_of<Tio>(x0), gate_grad_of<Tio>(x0)};
}

/* One position's dL/dxg, dL/dyg (tx, ty) through the product's terms, from its x, y (xr, yr; xg, yg
 * formed here with their gates gxs, gys) and its G of pair q, g(q). */
template <int ID, int D, class GOf>
__device__ __forceinline__ void gz_terms(const GateAt &gxs, const GateAt &gys, const float (&xr)[D],
                                         const float (&yr)[D], GOf g, float (&tx)[D], float (&ty)[D])
{
    using A = AlgebraTraits<ID>;
    float xv[D], yv[D];
#pragma unroll
    for (int a = 0; a < D; ++a)
        xv[a] = xr[a] * gxs.ph, yv[a] = yr[a] * gys.ph; /* gelu_of */
#pragma unroll
    for (int a = 0; a < D; ++a)
        tx[a] = ty[a] = 0.f;
    static_for<A::T>([&](auto tc) {
        constexpr fc_term e = A::table.term[decltype(tc)::value];
        constexpr int q = Plans<ID>::pair.term_pair[decltype(tc)::value];
        const float gv = g(q);
        tx[e.i] += float(e.sign) * yv[e.k] * gv;
        ty[e.k] += float(e.sign) * xv[e.i] * gv;
    });
}

/* gomap over go^T's panels (got_offset) of a chunk of B rows (4-D: 8 rows of a panel, row groups,
 * panels, components), boxes of a step's KS / 8 row groups x 64 batch positions x JG components;
 * wmap over the prepared W (Nop, N_in, P slots), boxes
 * of a step x BN x PS slots, in the swizzle of RB bytes. x, y (D, B, N_in; components cs apart): the inputs, whose MVGELU
 * (xg, yg) and its backward the epilogue forms at each position; gx, gy (the same layout): NULL
 * when not wanted. Clusters of GROUPS CTAs along x: blockIdx.x / GROUPS is the column tile, the
 * rank the group. */
template <int ID, int MODE, class Tio, int KK>
__global__ void __cluster_dims__(GzCfg<ID, MODE, KK>::GROUPS, 1, 1) __launch_bounds__(kSplitThreads, 1)
    gz_tma_kernel(const __grid_constant__ CUtensorMap gomap, const __grid_constant__ CUtensorMap wmap,
                  const Elem<MODE> *__restrict__ x, const Elem<MODE> *__restrict__ y, Tio *__restrict__ gx,
                  Tio *__restrict__ gy, int B, int Ni, int No, int64_t cs, int gate)
{
    using C = GzCfg<ID, MODE, KK>;
    using A = AlgebraTraits<ID>;
    constexpr int D = C::D, S = C::STAGES;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *smem = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, g = (tid % 32) / 4, t = tid % 4;
    pdl::waiting(); /* go^T, and the chunk's rows of grad_x, grad_y once gW has read xg^T, yg^T there */
    const int grp = C::GROUPS == 1 ? 0 : (int)tma::cluster_rank();
    const int n0 = blockIdx.x / C::GROUPS * C::BN, m0 = blockIdx.y * C::BM, steps = (No + C::KS - 1) / C::KS;
    tma::Ring<S> ring((uint64_t *)(smem + C::BARS), steps, kConsumerThreads);
    auto issue = [&](int s, uint64_t *bar) { /* the producer: step s into buffer s % S */
        unsigned char *buf = smem + (s % S) * C::STAGE;
        tma::mbar_arrive_expect_tx(bar, C::STAGE);
        tma::load_4d(buf, &gomap, 0, s * (C::KS / 8), m0 / C::KSB, grp * C::JG, bar); /* go^T's panels */
        tma::load_3d(buf + C::OB, &wmap, s * C::KS, n0, grp * C::PS, bar);
    };
    float *sG = (float *)smem; /* after the K loop, over the ring: G[pair - grp QG][row GS + column] */
    const uint32_t sg = smem_u32(sG);

    /* the K loop and the staging of G for one (group, warpgroup): each has its own accumulator
     * array, cut into its own components' runs (one wgmma's accumulators are one run of registers) */
    auto run = [&](auto gr, auto wg) {
        constexpr int GR = decltype(gr)::value, WG = decltype(wg)::value;
        constexpr int j0 = GR * C::JG + WG * C::JW, q0 = Plans<ID>::pair.jbegin[j0], nq = pairs_of<ID>(j0, C::JW);
        float acc[C::QW][C::BN / 2];
        zero_all(acc);
        ring.consume_fed(0, steps, [&](int s) {
            const unsigned char *buf = smem + (s % S) * C::STAGE;
            gz_step<ID, MODE, KK, GR, WG>(acc, smem_u32(buf), smem_u32(buf + C::OB), warp, tid % 32);
        });
#pragma unroll
        for (int ql = 0; ql < C::QW; ++ql)
            wg::fence_operands(acc[ql]);
        /* both warpgroups are past their last step (and so every copy has landed and been read):
         * barrier 1 over the CTA's 256 threads, each warpgroup reaching it from its own code, so
         * the non-.aligned form (bar.sync is barrier.sync.aligned: one instruction for all) */
        asm volatile("barrier.sync 1, 256;\n" ::: "memory");
        /* pair q0 + ql of this warpgroup's nq (the array holds QW, the most of either warpgroup);
         * tf32 stores by shared-window address (sts_f32x2: gz -3.2% at Cl(3,0), -0.9% Cl(2,0)),
         * bf16 keeps the generic ones (with sts_f32x2 gz measured +1.0% at Cl(3,0), +0.1% Cl(2,0);
         * H200, B 4096, N 512: NOTES_FCGP.md session 38) */
        each_pair<C::QW, C::BN, nq>(acc, [&](int ql, int c, int h, float v0, float v1) {
            const int at = ((q0 - GR * C::QG + ql) * C::BM + 16 * warp + g + 8 * h) * C::GS + 8 * c + 2 * t;
            if constexpr (MODE == kTF32)
                sts_f32x2(sg + at * 4, v0, v1);
            else
                *(float2 *)&sG[at] = make_float2(v0, v1);
        });
    };
    using I0 = std::integral_constant<int, 0>;
    using I1 = std::integral_constant<int, 1>;
    if (wgi == 2) { /* the producer warpgroup: one thread issues every step */
        wg::setmaxnreg_dec<kProducerRegs>();
        if (tid == 256)
            ring.produce(issue);
        __syncwarp();
        if (tid < kConsumerThreads + 32)
            prefetch_share<C>(x, y, cs, B, Ni, m0, n0, grp, tid - kConsumerThreads);
        /* then it joins the epilogue, with the registers the consumers give back after staging,
         * once they have given them */
        regs_returned_wait();
        wg::setmaxnreg_inc<kEpilogueRegs>();
    } else {
        wg::setmaxnreg_inc<kConsumerRegs>();
        if (grp == 0) {
            if (wgi == 0)
                run(I0{}, I0{});
            else
                run(I0{}, I1{});
        } else if constexpr (C::GROUPS > 1) {
            if (wgi == 0)
                run(I1{}, I0{});
            else
                run(I1{}, I1{});
        }
        wg::setmaxnreg_dec<kEpilogueRegs>(); /* the accumulators are staged */
        regs_returned_arrive();
    }
    /* this CTA's share of the tile's positions, in rounds of all three warpgroups (the producer's
     * idled through the epilogue, a quarter of the consumers' time; with it gz measured 470 ->
     * 463 us at Cl(3,0) tf32, 152 -> 142 Cl(2,0) bf16: NOTES_FCGP.md session 27).
     * Their x, y are loaded here, before the barriers that wait for every G to be staged: loaded
     * in each round after its G, they were three trips to memory a round, one after another (x
     * and y, x again in the gate's backward), a quarter of the epilogue's stall samples (H100,
     * B 4096, N 512, NOTES_FCGP.md session 25: gz 215 -> 192 us at Cl(2,0) tf32, 478 -> 471
     * Cl(3,0)) */
    constexpr int SHARE = C::POS / C::GROUPS, ROUNDS = (SHARE + kSplitThreads - 1) / kSplitThreads;
    const int64_t BNi = cs;
    /* Two adjacent columns a thread (PAIRS: bf16, one CTA, where the rounds' count does not grow:
     * Cl(2,0)), so each component's x, y load and gx, gy store moves two values, each G read two
     * (LDS.64), and every thread carries two positions' chains at once; where N_in is even and
     * x, y, gx, gy are aligned to two elements, else one position a thread as below. gz -4% at
     * Cl(2,0) bf16 (173 -> 166 us); in tf32 it measured 1% slower, so tf32 keeps one a thread
     * (NOTES_FCGP.md session 37) */
    constexpr int ROUNDS2 = (SHARE / 2 + kSplitThreads - 1) / kSplitThreads;
    constexpr bool PAIRS = MODE == kBF16 && C::GROUPS == 1 && C::BN % 2 == 0 && 2 * ROUNDS2 <= ROUNDS;
    if constexpr (PAIRS) {
        if (Ni % 2 == 0 && fc::aligned(x, 2 * sizeof(*x)) && fc::aligned(y, 2 * sizeof(*y)) &&
            fc::aligned(gx, 2 * sizeof(Tio)) && fc::aligned(gy, 2 * sizeof(Tio))) {
            /* as loaded (bf16 pairs), widened after the barrier: widened before it, each thread
             * waited there for its own loads (NOTES_FCGP.md session 51) */
            __nv_bfloat162 xw[ROUNDS2][D], yw[ROUNDS2][D];
#pragma unroll
            for (int i = 0; i < ROUNDS2; ++i) {
                const int pl = i * kSplitThreads + tid, row = 2 * pl / C::BN, col = 2 * pl % C::BN;
                const int64_t b = m0 + row, n = n0 + col; /* n even, so n + 1 < N_in with n */
                if (pl < SHARE / 2 && b < B && n < Ni) {
                    load_raw2(x + b * Ni + n, BNi, xw[i]);
                    load_raw2(y + b * Ni + n, BNi, yw[i]);
                }
            }
            __syncthreads(); /* every G staged */
#pragma unroll
            for (int i = 0; i < ROUNDS2; ++i) {
                const int pl = i * kSplitThreads + tid, row = 2 * pl / C::BN, col = 2 * pl % C::BN;
                const int64_t b = m0 + row, n = n0 + col;
                if (pl >= SHARE / 2 || b >= B || n >= Ni)
                    continue;
                float xr2[1][2][D], yr2[1][2][D];
                widen2(xw[i], xr2[0]);
                widen2(yw[i], yr2[0]);
                float2 gq[C::NP];
                static_for<C::NP>([&](auto q) {
                    constexpr int Q = decltype(q)::value; /* GS and col even: 8-byte aligned */
                    const uint2 v = lds_b64(sg + ((Q * C::BM + row) * C::GS + col) * 4);
                    gq[Q] = make_float2(__uint_as_float(v.x), __uint_as_float(v.y));
                });
                float gxv[2][D], gyv[2][D];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float tx[D], ty[D];
                    const GateAt gxs = gate_at<Tio>(gate, xr2[0][e][0]), gys = gate_at<Tio>(gate, yr2[0][e][0]);
                    gz_terms<ID>(gxs, gys, xr2[0][e], yr2[0][e], [&](int q) { return e ? gq[q].y : gq[q].x; }, tx, ty);
                    gate_backward_with(gate, gxs.ph, gxs.dph, tx, xr2[0][e], gxv[e]);
                    gate_backward_with(gate, gys.ph, gys.dph, ty, yr2[0][e], gyv[e]);
                }
                const int64_t off = b * Ni + n;
#pragma unroll
                for (int a = 0; a < D; ++a) {
                    if (gx)
                        store2(gx + off + a * BNi, gxv[0][a], gxv[1][a]);
                    if (gy)
                        store2(gy + off + a * BNi, gyv[0][a], gyv[1][a]);
                }
            }
            return;
        }
    }
    using E = Elem<MODE>; /* x, y as loaded, widened after the barrier (as above) */
    E xe[ROUNDS][D], ye[ROUNDS][D];
#pragma unroll
    for (int i = 0; i < ROUNDS; ++i) {
        const int pl = i * kSplitThreads + tid, pos = grp * SHARE + pl, row = pos / C::BN, col = pos % C::BN;
        const int64_t b = m0 + row, n = n0 + col;
        if (pl < SHARE && b < B && n < Ni) {
#pragma unroll
            for (int a = 0; a < D; ++a) {
                xe[i][a] = x[b * Ni + n + a * BNi];
                ye[i][a] = y[b * Ni + n + a * BNi];
            }
        }
    }
    if constexpr (C::GROUPS > 1)
        tma::cluster_sync(); /* every CTA's G staged and visible across the cluster */
    else
        __syncthreads(); /* every G staged */

    /* each position from the G of every pair: group r's from CTA r's shared memory (distributed
     * shared memory; this CTA's own too) */
    uint32_t gbase[C::GROUPS];
#pragma unroll
    for (int r = 0; r < C::GROUPS; ++r)
        gbase[r] = C::GROUPS == 1 ? 0u : tma::cluster_addr(sG, r);
#pragma unroll
    for (int i = 0; i < ROUNDS; ++i) {
        const int pl = i * kSplitThreads + tid, pos = grp * SHARE + pl, row = pos / C::BN, col = pos % C::BN;
        const int64_t b = m0 + row, n = n0 + col;
        if (pl >= SHARE || b >= B || n >= Ni)
            continue;
        float gq[C::NP];
        static_for<C::NP>([&](auto q) {
            constexpr int Q = decltype(q)::value;
            if constexpr (C::GROUPS == 1) {
                gq[Q] = __uint_as_float(lds_b32(sg + ((Q * C::BM + row) * C::GS + col) * 4));
            } else {
                constexpr int r = Q / C::QG;
                gq[Q] = tma::ld_cluster_f32(gbase[r] + (((Q - r * C::QG) * C::BM + row) * C::GS + col) * 4);
            }
        });
        const int64_t off = b * Ni + n;
        float xr[D], yr[D], tx[D], ty[D];
#pragma unroll
        for (int a = 0; a < D; ++a)
            xr[a] = load<E>(xe[i][a]), yr[a] = load<E>(ye[i][a]);
        const GateAt gxs = gate_at<Tio>(gate, xr[0]), gys = gate_at<Tio>(gate, yr[0]);
        gz_terms<ID>(gxs, gys, xr, yr, [&](int q) { return gq[q]; }, tx, ty);
        float v[D];
        if (gx) {
            gate_backward_with(gate, gxs.ph, gxs.dph, tx, xr, v);
#pragma unroll
            for (int a = 0; a < D; ++a)
                gx[off + a * BNi] = store<Tio>(v[a]);
        }
        if (gy) {
            gate_backward_with(gate, gys.ph, gys.dph, ty, yr, v);
#pragma unroll
            for (int a = 0; a < D; ++a)
                gy[off + a * BNi] = store<Tio>(v[a]);
        }
    }
    if constexpr (C::GROUPS > 1)
        tma::cluster_sync(); /* the other CTA has read this one's G: its shared memory may go */
}

} // namespace sm90
} // namespace fcgp
} // namespace fc
