/* fcgp_wgmma_gw_pseq.cuh — the Hopper (sm_90a) FCGP weight gradient one path at a time: gW[p]
 * (N_in x N_out) = sum_j z_{j,p}^T go_j over tiles of 128 rows of N_in x 256 columns of N_out.
 *
 * gw_tma_kernel (fcgp_wgmma_gw.cuh) holds a path group's 10 paths over a 64 x 48 tile: every pair
 * fragment it forms (LDS of x and y, HMUL2 / HFMA2 or FFMA) feeds one wgmma of N = 48, and it is
 * bound by that forming, not by its copies (NOTES_FCGP.md session 41: as fast with no yg^T copied,
 * or nothing copied). Here a block's unit is one path p over a wide tile: its consumer warpgroups
 * (64 rows each) form only p's pairs and each fragment feeds a wgmma of N = 256 into one
 * accumulator set (128 fp32 a thread), about five times fewer fragments formed a flop at about
 * the same tile bytes a flop (~64 flop/B against 59). A ring step brings the path's x components'
 * and y components' tiles (128 rows x 32 bytes, xg^T in stage order: two adjacent 64-row tiles)
 * and its outputs' go^T tiles (256 rows x 32 bytes of a step panel, already swizzled) as 1-D bulk
 * copies, the bytes the path needs (the stage holds the largest path's). The session-41 lab
 * (benchmarks/lab/gw_pseq.cu) ran this loop at 510-690 TF/s bf16 with its copies, where
 * gw_tma_kernel runs at ~360 (H200); this kernel runs Cl(3,0)'s three-pair paths at ~610 since its
 * producer chooses the path once a unit (NOTES_FCGP.md session 42), and the backward takes it
 * wherever the shapes allow (use_pseq, fcgp_sm90a.cu).
 *
 * Units (path, 128-row block, 256-column block), the paths with the most pairs first, are shared
 * out as gw_tma_kernel's tiles are (fcgp_gw_sched.h): whole units in rounds, the rest in batch
 * segments summed in a fixed order through slots, so results are deterministic and written once;
 * or, where that costs less by their paths' step costs (PseqSched; not under the setting 3): one
 * to three rounds' worth of units whole, heaviest first, each to the least-loaded block, and
 * fewer units than blocks in one round, each cut into as many segments as its cost asks.
 * Where N_in is not a multiple of 128 or N_out of 256 the backward keeps gw_tma_kernel (the tiles
 * here read whole blocks). The backward's chunks add the earlier chunks' fp32 sum as there.
 */
#pragma once

#include "fcgp_gw_sched.h"
#include "fcgp_wgmma_gw.cuh"

namespace fc {
namespace fcgp {
namespace sm90 {

template <int ID, int MODE> struct PseqCfg {
    static constexpr int D = AlgebraTraits<ID>::D, P = AlgebraTraits<ID>::P;
    static constexpr int BM = 128, NT = 256, KS = MODE == kTF32 ? 8 : 16; /* batch rows a step: 32 bytes */
    static constexpr int XT = BM * 32, GT = NT * 32; /* an x (or y) component's tile; a go one */
    /* a path's bytes a step, and the largest path's (the stage) */
    __host__ __device__ static constexpr int bytes(int p)
    {
        return (Plans<ID>::path.nx[p] + Plans<ID>::path.ny[p]) * XT + Plans<ID>::path.nj[p] * GT;
    }
    __host__ __device__ static constexpr int most()
    {
        int m = 0;
        for (int p = 0; p < P; ++p)
            m = bytes(p) > m ? bytes(p) : m;
        return m;
    }
    static constexpr int STAGE = most(), STAGES = stages_that_fit(STAGE, 5);
    static constexpr int SMEM = STAGES * STAGE + 1024 + 2 * STAGES * 8;
    static constexpr int SLOT = 256 * NT / 2; /* floats a segment slot: both warpgroups' accumulators */
    static_assert(STAGES >= 3, "three stages fit");
    static_assert(SMEM <= 227 * 1024, "the stages fit");
};

/* The paths in unit order: by pair count, most first (stable), so that the rounds of whole units
 * take the heavy ones and the segments the light ones. */
template <int ID> struct PseqOrder {
    unsigned char path[FC_MAX_P];
};
template <int ID> __host__ __device__ constexpr PseqOrder<ID> make_pseq_order()
{
    constexpr int P = AlgebraTraits<ID>::P;
    PseqOrder<ID> o{};
    int n = 0;
    for (int c = FC_MAX_D; c >= 1; --c)
        for (int p = 0; p < P; ++p)
            if (Plans<ID>::path.nj[p] == c)
                o.path[n++] = (unsigned char)p;
    return o;
}
template <int ID> struct PseqPlan {
    static constexpr PseqOrder<ID> order = make_pseq_order<ID>();
};

/* A step's cost for the schedule (PseqSched, fcgp_gw_sched.h), path p: its copies (3 a 4-KB
 * tile of an x or y component, 6 a go^T tile) or its wgmmas (10 a pair), whichever is more; about
 * 110 and 370 clock cycles at the rates measured (the three-pair paths' 48 KB and three wgmmas a
 * step took ~0.68 us on an H200, NOTES_FCGP.md session 42; a Cl(2,0) two-pair unit's 128 steps
 * ~50 us). The same in tf32: a step holds the same bytes and half the flops at half the rate. */
template <int ID> constexpr int pseq_step_cost(int p)
{
    const int nx = Plans<ID>::path.nx[p], ny = Plans<ID>::path.ny[p], nj = Plans<ID>::path.nj[p];
    const int copies = 3 * (nx + ny + 2 * nj), mmas = 10 * nj;
    return copies > mmas ? copies : mmas;
}
/* a 128-KB slot written or read back, in those units (~32 tiles' copies) */
constexpr int kPseqHand = 96;
/* every path's step cost, in unit order (PseqOrder): the w of make_pseq_sched */
template <int ID> struct PseqCosts {
    int w[AlgebraTraits<ID>::P];
};
template <int ID> constexpr PseqCosts<ID> pseq_costs()
{
    PseqCosts<ID> c{};
    for (int i = 0; i < AlgebraTraits<ID>::P; ++i)
        c.w[i] = pseq_step_cost<ID>(PseqPlan<ID>::order.path[i]);
    return c;
}

/* The schedule of a chunk: upp units a path (row blocks x column blocks), kb steps each, on at
 * most sms blocks; lpt: the lists by cost (whole units, or one round of weighted segments) where
 * that is cheaper, else in rounds of units (a slot's read-back four steps, as measured in session 41). Each thread keeps
 * its last two answers: a training loop asks the same questions at every call (the workspace's
 * size, then each chunk's launch), and the answer weighs every unit on every block. */
template <int ID> inline PseqSched pseq_sched(int upp, int kb, int sms, bool lpt)
{
    constexpr int P = AlgebraTraits<ID>::P;
    struct Last {
        bool valid, lpt;
        int upp, kb, sms;
        PseqSched sched;
    };
    static thread_local Last last[2] = {}; /* a backward's chunks have at most two sizes */
    static thread_local int next = 0;
    for (const Last &l : last)
        if (l.valid && l.upp == upp && l.kb == kb && l.sms == sms && l.lpt == lpt)
            return l.sched;
    constexpr PseqCosts<ID> c = pseq_costs<ID>();
    Last &l = last[next];
    next ^= 1;
    l = Last{true, lpt, upp, kb, sms, make_pseq_sched(c.w, P, upp, kb, sms, kPseqHand, 4, lpt)};
    return l.sched;
}

/* f(path as a compile-time constant) for unit order index i (a run-time value) */
template <int ID, class F> __device__ __forceinline__ void with_path(int i, F &&f)
{
    static_for<AlgebraTraits<ID>::P>([&](auto ic) {
        if (decltype(ic)::value == i)
            f(std::integral_constant<int, PseqPlan<ID>::order.path[decltype(ic)::value]>{});
    });
}

/* The weight gradient of one batch chunk, one path a unit (this file's header). xgt, ygt: xg^T,
 * yg^T in stage order (xgt_offset, components dcs apart); got: go^T's step panels (got_offset,
 * components gcs apart, Nor rows a panel); the schedule's tiles are units, in order index x row
 * block x column block, column blocks fastest, of ring steps of one KS-row step each, its pieces a
 * block's in order (PseqSched::begin, at). The rest as gw_tma_kernel. */
template <int ID, int MODE, class Tout>
__global__ void __launch_bounds__(kSplitThreads, 1)
    gw_pseq_kernel(const Elem<MODE> *__restrict__ xgt, const Elem<MODE> *__restrict__ ygt, int64_t dcs,
                   const Elem<MODE> *__restrict__ got, int64_t gcs, int Nor, const __grid_constant__ PseqSched sch,
                   float *slots, int *flags, int epoch, const float *prev, float *stash, Tout *gw, int Ni, int No)
{
    using C = PseqCfg<ID, MODE>;
    constexpr int S = C::STAGES, NT = C::NT, KS = C::KS;
    using PP = Plans<ID>;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *smem = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, g = (tid % 32) / 4, t = tid % 4;
    pdl::waiting(); /* go^T, xg^T and yg^T of the chunk, and the earlier chunks' sum */
    const int NM = No / NT, NB = Ni / C::BM, nbm = NM * NB, NB64 = Ni / 64, b = blockIdx.x;
    tma::Ring<S> ring((uint64_t *)(smem + S * C::STAGE), sch.steps(b), kConsumerThreads);
    if (wgi == 2) { /* the producer warpgroup: one thread issues every step of every unit */
        wg::setmaxnreg_dec<kProducerRegs>();
        if (tid != 256)
            return;
        /* The path is chosen once a unit, outside its steps: chosen a step (a 20-way branch chain
         * ahead of each step's copies) the one thread took longer a step than the consumers'
         * wgmmas, and the consumers waited on their full barrier a third of the time
         * (NOTES_FCGP.md session 42). */
        int s0 = 0;
        sch.each(b, [&](const GwUnit &w) {
            if (w.tile < 0)
                return;
            const int ii = w.tile / nbm, inb = w.tile % nbm / NM, im = w.tile % NM, s1 = s0 + (w.k1 - w.k0);
            int ik = w.k0;
            with_path<ID>(ii, [&](auto pc) {
                constexpr int p = decltype(pc)::value;
                constexpr int NX = PP::path.nx[p], NY = PP::path.ny[p], NJ = PP::path.nj[p];
                ring.produce_range(s0, s1, [&](int s, uint64_t *bar) {
                    unsigned char *buf = smem + (s % S) * C::STAGE;
                    tma::mbar_arrive_expect_tx(bar, C::bytes(p));
                    /* 128 rows of step ik: the two 64-row tiles (ik NB64 + 2 inb, + 1) of xgt_offset;
                     * go^T's 256 rows of its step panel (offsets formed a step: the producer has 24
                     * registers) */
                    const int64_t xo = ((int64_t)ik * NB64 + 2 * inb) * 64 * KS, go = (int64_t)ik * Nor * KS + (int64_t)im * NT * KS;
                    static_for<NX>([&](auto c) {
                        constexpr int cc = decltype(c)::value, comp = PP::path.xc[p][cc];
                        tma::bulk_load(buf + cc * C::XT, xgt + comp * dcs + xo, C::XT, bar);
                    });
                    static_for<NY>([&](auto c) {
                        constexpr int cc = decltype(c)::value, comp = PP::path.yc[p][cc];
                        tma::bulk_load(buf + (NX + cc) * C::XT, ygt + comp * dcs + xo, C::XT, bar);
                    });
                    static_for<NJ>([&](auto c) {
                        constexpr int cc = decltype(c)::value, comp = PP::path.jc[p][cc];
                        tma::bulk_load(buf + (NX + NY) * C::XT + cc * C::GT, got + comp * gcs + go, C::GT, bar);
                    });
                    ++ik;
                });
            });
            s0 = s1;
        });
        return;
    }
    wg::setmaxnreg_inc<kConsumerRegs>();

    const int r0 = 64 * wgi + 16 * warp + g; /* this thread's rows r0, r0 + 8 of the unit's 128 */
    int s0 = 0;
    GwUnit w;
    for (int j = sch.begin(b); sch.at(b, j, w); ++j) {
        if (w.tile < 0)
            continue;
        const int ui = w.tile / nbm, n0 = w.tile % nbm / NM * C::BM, m0 = w.tile % NM * NT;
        float acc[NT / 2];
        zero_all(acc);
        int path = 0;
        with_path<ID>(ui, [&](auto pc) {
            constexpr int p = decltype(pc)::value, NQ = PP::path.nj[p], NX = PP::path.nx[p], NY = PP::path.ny[p];
            path = p;
            ring.consume_fed(s0, s0 + (w.k1 - w.k0), [&](int s) {
                const unsigned char *buf = smem + (s % S) * C::STAGE;
                /* the path's x, y fragments (components outside it stay unset: its pairs never read them) */
                Frags<C::D> f;
                const uint32_t base = smem_u32(buf) + r0 * 32 + t * 8;
                static_for<NX>([&](auto c) {
                    constexpr int cc = decltype(c)::value, comp = PP::path.xc[p][cc];
                    f.x[comp][0] = lds_b64(base + cc * C::XT);
                    f.x[comp][1] = lds_b64(base + cc * C::XT + 8 * 32);
                });
                static_for<NY>([&](auto c) {
                    constexpr int cc = decltype(c)::value, comp = PP::path.yc[p][cc];
                    f.y[comp][0] = lds_b64(base + (NX + cc) * C::XT);
                    f.y[comp][1] = lds_b64(base + (NX + cc) * C::XT + 8 * 32);
                });
                uint32_t a[NQ][4];
                static_for<NQ>([&](auto u) { form_pair<ID, MODE, path_pair<ID>(p, decltype(u)::value), false, false>(a[decltype(u)::value], f); });
                wg::fence();
                const uint32_t go_smem = smem_u32(buf) + (NX + NY) * C::XT;
                /* the path's u-th pair (pairs by j) is its u-th output: go^T tile u */
                static_for<NQ>([&](auto u) {
                    wg::MmaRS<MODE, NT>::run(acc, a[decltype(u)::value], wg::desc_kmajor_swz<32>(go_smem + decltype(u)::value * C::GT), 1);
                });
                wg::commit();
                wg::wait<0>();
                wg::fence_operands(a);
            });
        });
        s0 += w.k1 - w.k0;
        wg::fence_operands(acc);

        /* acc[4c + 2h + e]: row n0 + r0 + 8h, column m0 + 8c + 2t + e; in a slot, value pair
         * i = 2c + h of thread tid at float2 i 256 + tid */
        auto pairs = [&](auto &&f) {
#pragma unroll
            for (int c = 0; c < NT / 8; ++c)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    f(acc[4 * c + 2 * h], acc[4 * c + 2 * h + 1], 2 * c + h, c, h);
        };
        if (gw_segment(w, slots, C::SLOT, flags, epoch, tid, pairs))
            continue; /* a segment before the last: handed off */
        /* the unit: the earlier chunks' sum added, to the stash or to gw (whole blocks: no bounds) */
        auto each = [&](auto &&f) {
            pairs([&](float &v0, float &v1, int, int c, int h) {
                f(v0, v1, ((size_t)path * Ni + n0 + r0 + 8 * h) * No + m0 + 8 * c + 2 * t);
            });
        };
        if (prev)
            each([&](float &v0, float &v1, size_t o) {
                const float2 old = *(const float2 *)(prev + o);
                v0 += old.x, v1 += old.y;
            });
        if (stash)
            each([&](float &v0, float &v1, size_t o) { store_two(stash + o, v0, v1, true, true); });
        else
            each([&](float &v0, float &v1, size_t o) { store_two(gw + o, v0, v1, true, true); });
    }
}

} // namespace sm90
} // namespace fcgp
} // namespace fc
