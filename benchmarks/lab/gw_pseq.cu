/* gw_pseq.cu — a lab for another weight-gradient tile (NOTES_FCGP.md session 41): one path at a
 * time over a wide tile, before any of it goes into the library.
 *
 * The question: gw_tma_kernel (fcgp_wgmma_gw.cuh) holds a path group's 10 paths over a 64 x 48
 * tile, so each pair fragment it forms (LDS of x and y, HMUL2/HFMA2) feeds one wgmma of N = 48.
 * Session 41 measured it bound by its consumers, not its copies (gW as fast with no yg^T copied,
 * or with nothing copied at all) and not by either warpgroup's wgmma count. Would a tile of one
 * path, 128 rows of N_in x NT = 256 columns of N_out, run faster? Its fragments feed N = 256
 * (about five times fewer formed a flop), at about the same tile bytes a flop (65 flop/B against
 * 59), so it would move the bound from the consumers to the copies.
 *
 * Each block (one an SM; a producer warpgroup and two consumer warpgroups, as gw_tma_kernel)
 * works through `rounds` units; a unit is one path's tile over `steps` sub-steps of 16 batch
 * positions. A sub-step brings, for each of the path's NQ pairs, its x and y components' tiles
 * (128 rows x 32 bytes, 4 KB each) and its go component's tile (NT rows x 32 bytes) as 1-D bulk
 * copies from arrays laid out as the library's stage-order xg^T / go^T panels (a tile's bytes
 * contiguous). Each consumer warpgroup forms its 64 rows' pair fragments (LDS.64, HMUL2) and
 * issues NQ wgmmas m64 x NT x 16 into one accumulator set (NT / 2 fp32 a thread), the next
 * sub-step's fragments formed while these run (two register sets, wait<1>, as gw_step); a unit
 * ends with its fp32 tile stored (128 KB), as the library's epilogue would. The data are
 * constant bytes, then random values (the tensor cores' power depends on the data): the result is
 * not checked, only the rate.
 *   COPIES false: the producer arrives with no bytes (the loop's own ceiling).
 * pseq_mix: gw_pseq_kernel's first round at Cl(3,0), three-pair units beside one-pair ones that
 * read as many components, against the three-pair units alone.
 * pseq_ip (session 54, for session 55; `./gw_pseq inplace`): the same units with x, y read in
 * place at bf16, as a gW without gelu_transpose would (NOTES_FCGP.md session 54): x, y as stored
 * (D, B, N_in) and the gate product g (B, N_in) come as tensor boxes of 16 batch rows x 64 columns
 * (128 bytes, the 128-byte swizzle), a grade's three components in one 3-D box, each consumer
 * warpgroup reading the boxes of its own 64 rows of N_in; the A fragments by ldmatrix.x4.trans
 * (one a component: rows of N_in, K the batch), a pair sum_terms x_i y_k (HFMA2) times g (HMUL2).
 * The same flops, 4 KB more a step (g), as many copies. Against pseq_mix's three-pair and one-pair
 * units on today's layout (xg^T in stage order): what reading in place costs the loop.
 * Build and run (sm_90a):
 *   nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a benchmarks/lab/gw_pseq.cu \
 *       -o gw_pseq && ./gw_pseq [mix | inplace]
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../../csrc/cuda/common.cuh"
#include "../../csrc/cuda/fcgp_wgmma.cuh" /* kSplitThreads, the register split */
#include "../../csrc/cuda/mma_ptx.cuh"    /* ldsm_x4_t */
#include "../../csrc/cuda/tma.cuh"        /* encode_3d, load_3d */
#include "../../csrc/cuda/tma_ring.cuh"
#include "lab_timing.cuh"

using namespace fc;
using namespace fc::fcgp;
using namespace fc::fcgp::sm90;

constexpr int kD = 8;            /* components of each array (Cl(3,0)) */
constexpr int kRows = 128;       /* rows of N_in a tile: 64 a consumer warpgroup */
constexpr int kXT = kRows * 32;  /* one component's x (or y) tile a sub-step */
constexpr int kNi = 512, kNo = 512;

template <int NT, int NQ, int KK> struct Shape {
    static constexpr int GT = NT * 32;                /* a go component's tile a sub-step */
    static constexpr int SUB = NQ * (2 * kXT + GT);   /* a sub-step's tiles */
    static constexpr int STAGE = KK * SUB;
    static constexpr int STAGES = (220 * 1024) / STAGE < 5 ? (220 * 1024) / STAGE : 5;
    static constexpr int SMEM = STAGES * STAGE + 1024 + 2 * STAGES * 8;
    static_assert(STAGES >= 2, "two stages fit");
};

/* the components of pair q of path p (synthetic, distinct within a path) */
__device__ __forceinline__ int comp_x(int p, int q) { return (p + q) % kD; }
__device__ __forceinline__ int comp_y(int p, int q) { return (p + 3 * q + 1) % kD; }
__device__ __forceinline__ int comp_g(int p, int q) { return (2 * p + q + 2) % kD; }

/* unit u: path, row tile, column tile (column tiles fastest, then rows, as the blocks of a round
 * share x, y tiles) */
template <int NT> __device__ __forceinline__ void unit_of(int u, int &p, int &nb, int &m)
{
    constexpr int NM = kNo / NT, NB = kNi / kRows;
    m = u % NM, nb = u / NM % NB, p = u / (NM * NB);
}

template <int NT, int NQ, int KK, bool COPIES>
__global__ void __launch_bounds__(kSplitThreads, 1)
    pseq(const unsigned char *xs, const unsigned char *ys, const unsigned char *gs, float *out, int rounds, int steps)
{
    using S = Shape<NT, NQ, KK>;
    constexpr int ST = S::STAGES;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *smem = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, g = (tid % 32) / 4, t = tid % 4;
    const int ring_steps = steps / KK;
    tma::Ring<ST> ring((uint64_t *)(smem + ST * S::STAGE), rounds * ring_steps, kConsumerThreads);
    constexpr int NB = kNi / kRows, NM = kNo / NT;
    if (wgi == 2) { /* the producer: one thread issues every step of every unit */
        wg::setmaxnreg_dec<kProducerRegs>();
        if (tid == 256) {
            ring.produce([&](int s, uint64_t *bar) {
                const int r = s / ring_steps, k0 = (s % ring_steps) * KK;
                int p, nb, m;
                unit_of<NT>(r * gridDim.x + blockIdx.x, p, nb, m);
                unsigned char *buf = smem + (s % ST) * S::STAGE;
                tma::mbar_arrive_expect_tx(bar, COPIES ? S::STAGE : 0);
                for (int kk = 0; COPIES && kk < KK; ++kk) /* COPIES false: no bytes to wait for */
                    for (int q = 0; q < NQ; ++q, buf += 2 * kXT + S::GT) {
                        const size_t sx = ((size_t)comp_x(p, q) * steps + k0 + kk) * NB + nb;
                        const size_t sy = ((size_t)comp_y(p, q) * steps + k0 + kk) * NB + nb;
                        const size_t sg = ((size_t)comp_g(p, q) * steps + k0 + kk) * NM + m;
                        tma::bulk_load(buf, xs + sx * kXT, kXT, bar);
                        tma::bulk_load(buf + kXT, ys + sy * kXT, kXT, bar);
                        tma::bulk_load(buf + 2 * kXT, gs + sg * S::GT, S::GT, bar);
                    }
            });
        }
        return;
    }
    wg::setmaxnreg_inc<kConsumerRegs>();
    const int r0 = 64 * wgi + 16 * warp + g; /* this thread's rows r0, r0 + 8 of the tile */
    for (int r = 0; r < rounds; ++r) {
        float acc[NT / 2];
        zero_all(acc);
        uint32_t a[2][NQ][4];
        ring.consume_fed(r * ring_steps, (r + 1) * ring_steps, [&](int s) {
            const unsigned char *buf = smem + (s % ST) * S::STAGE;
            static_for<KK>([&](auto kk) {
                constexpr int K = decltype(kk)::value, b = K % 2;
                const unsigned char *sub = buf + K * S::SUB;
                static_for<NQ>([&](auto qq) {
                    constexpr int q = decltype(qq)::value;
                    const unsigned char *tq = sub + q * (2 * kXT + S::GT);
                    const uint2 x0 = *(const uint2 *)(tq + r0 * 32 + 8 * t), x1 = *(const uint2 *)(tq + (r0 + 8) * 32 + 8 * t);
                    const uint2 y0 = *(const uint2 *)(tq + kXT + r0 * 32 + 8 * t);
                    const uint2 y1 = *(const uint2 *)(tq + kXT + (r0 + 8) * 32 + 8 * t);
                    auto mul = [](uint32_t u, uint32_t v) {
                        const __nv_bfloat162 h = __hmul2(*(const __nv_bfloat162 *)&u, *(const __nv_bfloat162 *)&v);
                        return *(const uint32_t *)&h;
                    };
                    a[b][q][0] = mul(x0.x, y0.x), a[b][q][1] = mul(x1.x, y1.x);
                    a[b][q][2] = mul(x0.y, y0.y), a[b][q][3] = mul(x1.y, y1.y);
                });
                wg::fence();
                static_for<NQ>([&](auto qq) {
                    constexpr int q = decltype(qq)::value;
                    const uint32_t go = smem_u32(sub + q * (2 * kXT + S::GT) + 2 * kXT);
                    wg::MmaRS<kBF16, NT>::run(acc, a[b][q], wg::desc_kmajor_swz<32>(go), 1);
                });
                wg::commit();
                if constexpr (K > 0) {
                    wg::wait<1>();
                    wg::fence_operands(a[1 - b]);
                }
            });
            wg::wait<0>();
            wg::fence_operands(a[(KK - 1) % 2]);
        });
        wg::fence_operands(acc);
        /* the unit's tile, fp32, as an epilogue would store it */
        int p, nb, m;
        unit_of<NT>(r * gridDim.x + blockIdx.x, p, nb, m);
        float2 *dst = (float2 *)(out + (size_t)blockIdx.x * kRows * NT);
#pragma unroll
        for (int i = 0; i < NT / 4; ++i)
            __stcg(dst + i * 256 + tid, make_float2(acc[2 * i], acc[2 * i + 1]));
    }
}

/* Cl(3,0)'s round of whole units as gw_pseq_kernel runs it: blocks [0, heavy) take three-pair
 * units (three x and three y components, three go tiles, two terms a pair: 48 KB a step), the rest
 * one-pair units that read as many x and y components (three terms: 32 KB a step for a third of
 * the flops), each block one unit of `steps` steps, KK 1, 4 stages of 48 KB. Against the heavy
 * blocks alone: whether the light units' bytes slow the heavy ones (the L2 feeds ~9.5 TB/s). */
template <int NQ, int TERMS>
__device__ __forceinline__ void mix_loader(unsigned char *buf, const unsigned char *xs, const unsigned char *ys,
                                           const unsigned char *gs, int p, int nb, int m, int k, int steps,
                                           uint64_t *bar)
{
    constexpr int NB = kNi / kRows, NM = kNo / 256, GT = 256 * 32;
    tma::mbar_arrive_expect_tx(bar, 6 * kXT + NQ * GT);
    for (int c = 0; c < 3; ++c) {
        tma::bulk_load(buf + c * kXT, xs + (((size_t)comp_x(p, c) * steps + k) * NB + nb) * kXT, kXT, bar);
        tma::bulk_load(buf + (3 + c) * kXT, ys + (((size_t)comp_y(p, c) * steps + k) * NB + nb) * kXT, kXT, bar);
    }
    for (int q = 0; q < NQ; ++q)
        tma::bulk_load(buf + 6 * kXT + q * GT, gs + (((size_t)comp_g(p, q) * steps + k) * NM + m) * GT, GT, bar);
}
/* a pair's A fragment (registers a0-a3) of NQ pairs: sum over TERMS terms of x_i y_k (bf16 HFMA2),
 * synthetic components i, k of three */
template <int NQ, int TERMS>
__device__ __forceinline__ void lab_pairs(uint32_t (&a)[NQ][4], const uint32_t (&x)[3][4], const uint32_t (&y)[3][4])
{
    auto fma2 = [](uint32_t u, uint32_t v, uint32_t w) {
        const __nv_bfloat162 h =
            __hfma2(*(const __nv_bfloat162 *)&u, *(const __nv_bfloat162 *)&v, *(const __nv_bfloat162 *)&w);
        return *(const uint32_t *)&h;
    };
    static_for<NQ>([&](auto qq) {
        constexpr int q = decltype(qq)::value;
        for (int e = 0; e < 4; ++e)
            a[q][e] = 0;
        static_for<TERMS>([&](auto uu) {
            constexpr int i = (q + decltype(uu)::value) % 3, k = (q + 2 * decltype(uu)::value) % 3;
            for (int e = 0; e < 4; ++e)
                a[q][e] = fma2(x[i][e], y[k][e], a[q][e]);
        });
    });
}
template <int NQ, int TERMS, int ST>
__device__ __forceinline__ void mix_unit(tma::Ring<ST> &ring, unsigned char *smem, int stage, int steps, int r0, int t,
                                         float (&acc)[128])
{
    ring.consume_fed(0, steps, [&](int s) {
        const unsigned char *buf = smem + (s % ST) * stage;
        uint32_t x[3][4], y[3][4]; /* a0-a3: rows r0, r0 + 8 of columns 8t .. 8t + 7 (bytes), halves */
        for (int c = 0; c < 3; ++c)
            for (int h = 0; h < 2; ++h) {
                const uint2 xv = *(const uint2 *)(buf + c * kXT + (r0 + 8 * h) * 32 + 8 * t);
                const uint2 yv = *(const uint2 *)(buf + (3 + c) * kXT + (r0 + 8 * h) * 32 + 8 * t);
                x[c][h] = xv.x, x[c][2 + h] = xv.y, y[c][h] = yv.x, y[c][2 + h] = yv.y;
            }
        uint32_t a[NQ][4];
        lab_pairs<NQ, TERMS>(a, x, y);
        wg::fence();
        static_for<NQ>([&](auto qq) {
            constexpr int q = decltype(qq)::value;
            wg::MmaRS<kBF16, 256>::run(acc, a[q], wg::desc_kmajor_swz<32>(smem_u32(buf + 6 * kXT + q * 256 * 32)), 1);
        });
        wg::commit();
        wg::wait<0>();
        wg::fence_operands(a);
    });
}
/* One block of pseq_mix or pseq_ip: one unit of `steps` steps (three-pair if blockIdx.x < heavy)
 * through a ring of ST stages of STAGE bytes; load(buf, heavy, p, nb, m, step, bar) fills a stage,
 * unit(ring, smem, heavy, wgi, warp, lane, acc) consumes them; the tile stored as an epilogue would. */
template <int ST, int STAGE, class Load, class Unit>
__device__ __forceinline__ void units_block(float *out, int steps, int heavy, Load &&load, Unit &&unit)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *smem = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32;
    /* consume_fed releases a buffer once a warp (8 arrivals, since 7f9ef1e in session 43); until
     * session 55 this lab still made its rings with a count of 2, one a warpgroup, so a step
     * completed the empty barrier's phase four times and the producer passed only if it polled
     * between arrivals: the lab hung in its first run since (session 55 call A). Its figures in the
     * journal (sessions 41-42) predate 7f9ef1e. The ring now takes the consumers' threads. */
    tma::Ring<ST> ring((uint64_t *)(smem + ST * STAGE), steps, kConsumerThreads);
    const bool hv = (int)blockIdx.x < heavy;
    int p, nb, m;
    unit_of<256>(blockIdx.x, p, nb, m);
    if (wgi == 2) {
        wg::setmaxnreg_dec<kProducerRegs>();
        if (tid == 256)
            ring.produce([&](int s, uint64_t *bar) { load(smem + (s % ST) * STAGE, hv, p, nb, m, s, bar); });
        return;
    }
    wg::setmaxnreg_inc<kConsumerRegs>();
    float acc[128];
    zero_all(acc);
    unit(ring, smem, hv, wgi, warp, tid % 32, acc);
    wg::fence_operands(acc);
    float2 *dst = (float2 *)(out + (size_t)blockIdx.x * kRows * 256);
#pragma unroll
    for (int i = 0; i < 64; ++i)
        __stcg(dst + i * 256 + tid, make_float2(acc[2 * i], acc[2 * i + 1]));
}
__global__ void __launch_bounds__(kSplitThreads, 1)
    pseq_mix(const unsigned char *xs, const unsigned char *ys, const unsigned char *gs, float *out, int steps, int heavy)
{
    constexpr int ST = 4, STAGE = 48 * 1024;
    units_block<ST, STAGE>(
        out, steps, heavy,
        [&](unsigned char *buf, bool hv, int p, int nb, int m, int s, uint64_t *bar) {
            if (hv)
                mix_loader<3, 2>(buf, xs, ys, gs, p, nb, m, s, steps, bar);
            else
                mix_loader<1, 3>(buf, xs, ys, gs, p, nb, m, s, steps, bar);
        },
        [&](tma::Ring<ST> &ring, unsigned char *smem, bool hv, int wgi, int warp, int lane, float(&acc)[128]) {
            const int r0 = 64 * wgi + 16 * warp + lane / 4, t = lane % 4;
            if (hv)
                mix_unit<3, 2, ST>(ring, smem, STAGE, steps, r0, t, acc);
            else
                mix_unit<1, 3, ST>(ring, smem, STAGE, steps, r0, t, acc);
        });
}

/* In place: a stage holds x's and y's grade boxes (two 64-column halves x 16 rows x 3 components,
 * 6 KB each), g's (two halves x 16 rows, 2 KB each), then the NQ go^T tiles, as gw_pseq_kernel's
 * go^T. Units as pseq_mix's: blocks [0, heavy) three-pair units (two terms a pair), the rest
 * one-pair units (three terms), both reading three x and three y components. */
constexpr int kIpBox = 16 * 128, kIpX = 2 * 3 * kIpBox, kIpG = 2 * kIpBox, kIpGo = 256 * 32;
__host__ __device__ constexpr int ip_stage(int nq) { return 2 * kIpX + kIpG + nq * kIpGo; }
template <int NQ>
__device__ __forceinline__ void ip_loader(unsigned char *buf, const CUtensorMap *xm, const CUtensorMap *ym,
                                          const CUtensorMap *gm, const unsigned char *gs, int p, int nb, int m, int k,
                                          int steps, uint64_t *bar)
{
    constexpr int NM = kNo / 256;
    const int c0 = 1 + p % 2 * 3; /* a grade's three components: 1-3 or 4-6 */
    tma::mbar_arrive_expect_tx(bar, ip_stage(NQ));
    for (int h = 0; h < 2; ++h) {
        tma::load_3d(buf + h * 3 * kIpBox, xm, nb * kRows + 64 * h, 16 * k, c0, bar);
        tma::load_3d(buf + kIpX + h * 3 * kIpBox, ym, nb * kRows + 64 * h, 16 * k, c0, bar);
        tma::load_3d(buf + 2 * kIpX + h * kIpBox, gm, nb * kRows + 64 * h, 16 * k, 0, bar);
    }
    for (int q = 0; q < NQ; ++q)
        tma::bulk_load(buf + 2 * kIpX + kIpG + q * kIpGo, gs + (((size_t)comp_g(p, q) * steps + k) * NM + m) * kIpGo,
                       kIpGo, bar);
}
/* this thread's A fragment from one 16-row x 64-column box (128-byte swizzle: 16-byte chunk c of
 * row b at c ^ (b % 8)): rows 16 warp .. + 15 of the warpgroup's 64 columns of N_in, K the box's 16
 * batch rows; lane L gives the address of batch row L % 8 + 8 (L / 16), chunk 2 warp + (L / 8) % 2,
 * so the four matrices are the fragment's a0-a3 */
__device__ __forceinline__ void ip_frag(uint32_t (&r)[4], uint32_t box, int warp, int lane)
{
    const int b = lane % 8 + 8 * (lane / 16), c = 2 * warp + (lane / 8) % 2;
    ldsm_x4_t(r, box + b * 128 + ((c ^ (b % 8)) * 16));
}
template <int NQ, int TERMS, int ST>
__device__ __forceinline__ void ip_unit(tma::Ring<ST> &ring, unsigned char *smem, int steps, int wgi, int warp,
                                        int lane, float (&acc)[128])
{
    constexpr int STAGE = ip_stage(3);
    auto mul = [](uint32_t u, uint32_t v) {
        const __nv_bfloat162 h = __hmul2(*(const __nv_bfloat162 *)&u, *(const __nv_bfloat162 *)&v);
        return *(const uint32_t *)&h;
    };
    ring.consume_fed(0, steps, [&](int s) {
        const unsigned char *buf = smem + (s % ST) * STAGE;
        const uint32_t base = smem_u32(buf) + wgi * 3 * kIpBox; /* this warpgroup's half */
        uint32_t x[3][4], y[3][4], gf[4];
        for (int c = 0; c < 3; ++c) {
            ip_frag(x[c], base + c * kIpBox, warp, lane);
            ip_frag(y[c], base + kIpX + c * kIpBox, warp, lane);
        }
        ip_frag(gf, smem_u32(buf) + 2 * kIpX + wgi * kIpBox, warp, lane);
        uint32_t a[NQ][4];
        lab_pairs<NQ, TERMS>(a, x, y);
        for (int q = 0; q < NQ; ++q) /* times g */
            for (int e = 0; e < 4; ++e)
                a[q][e] = mul(a[q][e], gf[e]);
        wg::fence();
        static_for<NQ>([&](auto qq) {
            constexpr int q = decltype(qq)::value;
            const uint32_t go = smem_u32(buf + 2 * kIpX + kIpG + q * kIpGo);
            wg::MmaRS<kBF16, 256>::run(acc, a[q], wg::desc_kmajor_swz<32>(go), 1);
        });
        wg::commit();
        wg::wait<0>();
        wg::fence_operands(a);
    });
}
__global__ void __launch_bounds__(kSplitThreads, 1)
    pseq_ip(const __grid_constant__ CUtensorMap xm, const __grid_constant__ CUtensorMap ym,
            const __grid_constant__ CUtensorMap gm, const unsigned char *gs, float *out, int steps, int heavy)
{
    constexpr int ST = 4, STAGE = ip_stage(3);
    units_block<ST, STAGE>(
        out, steps, heavy,
        [&](unsigned char *buf, bool hv, int p, int nb, int m, int s, uint64_t *bar) {
            if (hv)
                ip_loader<3>(buf, &xm, &ym, &gm, gs, p, nb, m, s, steps, bar);
            else
                ip_loader<1>(buf, &xm, &ym, &gm, gs, p, nb, m, s, steps, bar);
        },
        [&](tma::Ring<ST> &ring, unsigned char *smem, bool hv, int wgi, int warp, int lane, float(&acc)[128]) {
            if (hv)
                ip_unit<3, 2, ST>(ring, smem, steps, wgi, warp, lane, acc);
            else
                ip_unit<1, 3, ST>(ring, smem, steps, wgi, warp, lane, acc);
        });
}
void run_ip(const char *what, const CUtensorMap &xm, const CUtensorMap &ym, const CUtensorMap &gm,
            const unsigned char *gs, float *out, int grid, int heavy, int steps)
{
    constexpr int SMEM = 4 * ip_stage(3) + 1024 + 64;
    CK(cudaFuncSetAttribute(pseq_ip, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
    const float best = best_ms([&] { pseq_ip<<<grid, kSplitThreads, SMEM>>>(xm, ym, gm, gs, out, steps, heavy); });
    const double flops = 2.0 * 3 * kRows * 256 * 16.0 * steps * heavy;
    printf("%-44s %3d blocks, %3d three-pair: %8.1f us  the three-pair blocks at %6.1f TF/s\n", what, grid, heavy,
           best * 1e3, flops / best / 1e9);
}

/* grid blocks, the first `heavy` of them three-pair units: the time and the heavy blocks' rate */
void run_mix(const char *what, const unsigned char *xs, const unsigned char *ys, const unsigned char *gs, float *out,
             int grid, int heavy, int steps)
{
    constexpr int SMEM = 4 * 48 * 1024 + 1024 + 64;
    CK(cudaFuncSetAttribute(pseq_mix, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
    const float best = best_ms([&] { pseq_mix<<<grid, kSplitThreads, SMEM>>>(xs, ys, gs, out, steps, heavy); });
    const double flops = 2.0 * 3 * kRows * 256 * 16.0 * steps * heavy;
    printf("%-44s %3d blocks, %3d three-pair: %8.1f us  the three-pair blocks at %6.1f TF/s\n", what, grid, heavy,
           best * 1e3, flops / best / 1e9);
}

template <int NT, int NQ, int KK, bool COPIES>
void run(const char *what, const unsigned char *xs, const unsigned char *ys, const unsigned char *gs, float *out,
         int sms, int rounds, int steps)
{
    using S = Shape<NT, NQ, KK>;
    auto k = pseq<NT, NQ, KK, COPIES>;
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, S::SMEM));
    const float best = best_ms([&] { k<<<sms, kSplitThreads, S::SMEM>>>(xs, ys, gs, out, rounds, steps); });
    const double flops = 2.0 * NQ * kRows * NT * 16.0 * steps * rounds * sms;
    const double bytes = (double)S::SUB * steps * rounds * sms;
    printf("%-44s NT %3d NQ %d KK %d stages %d: %8.1f us  %6.1f TF/s  %5.2f TB/s of tiles  %4.1f flop/B\n", what, NT, NQ,
           KK, S::STAGES, best * 1e3, flops / best / 1e9, COPIES ? bytes / best / 1e9 : 0.0, flops / bytes);
}

/* ./gw_pseq [mix]: every shape, or pseq_mix's three runs alone (one to profile) */
int main(int argc, char **argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0); /* each line out before a hang or a kill */
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    /* a batch chunk of 2048 rows: 128 sub-steps of 16; two units a block */
    const int steps = 128, rounds = 2;
    const size_t xy = (size_t)kD * steps * (kNi / kRows) * kXT, gb = (size_t)kD * steps * kNo * 32;
    unsigned char *xs, *ys, *gs;
    float *out;
    CK(cudaMalloc(&xs, xy));
    CK(cudaMalloc(&ys, xy));
    CK(cudaMalloc(&gs, gb));
    CK(cudaMalloc(&out, (size_t)sms * kRows * 256 * sizeof(float)));
    CK(cudaMemset(xs, 0x3c, xy)); /* bf16 0x3c3c, about 0.0115 */
    CK(cudaMemset(ys, 0x3c, xy));
    CK(cudaMemset(gs, 0x3c, gb));
    printf("gW one path a tile (128 rows x NT), bf16, %d blocks x %d units x %d sub-steps of 16\n", sms, rounds, steps);
    const bool mix_only = argc > 1 && strcmp(argv[1], "mix") == 0;
    if (argc > 1 && strcmp(argv[1], "inplace") == 0) { /* pseq_ip against pseq_mix, random values */
        const size_t xyn = (size_t)kD * steps * 16 * kNi; /* x, y as stored: (D, B, N_in) bf16 */
        __nv_bfloat16 *xn, *yn, *gn;
        CK(cudaMalloc(&xn, xyn * 2));
        CK(cudaMalloc(&yn, xyn * 2));
        CK(cudaMalloc(&gn, xyn * 2 / kD));
        fill_random<<<1024, 256>>>((__nv_bfloat16 *)xs, xy / 2, 1u);
        fill_random<<<1024, 256>>>((__nv_bfloat16 *)ys, xy / 2, 2u);
        fill_random<<<1024, 256>>>((__nv_bfloat16 *)gs, gb / 2, 3u);
        fill_random<<<1024, 256>>>(xn, xyn, 4u);
        fill_random<<<1024, 256>>>(yn, xyn, 5u);
        fill_random<<<1024, 256>>>(gn, xyn / kD, 6u);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        CUtensorMap xm, ym, gm;
        const uint64_t rows = (uint64_t)steps * 16;
        const CUtensorMapSwizzle sw = CU_TENSOR_MAP_SWIZZLE_128B;
        const CUtensorMapDataType bf = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
        if (tma::encode_3d(&xm, xn, bf, 2, kNi, rows, kD, 64, 16, 3, sw) != CUDA_SUCCESS ||
            tma::encode_3d(&ym, yn, bf, 2, kNi, rows, kD, 64, 16, 3, sw) != CUDA_SUCCESS ||
            tma::encode_3d(&gm, gn, bf, 2, kNi, rows, 1, 64, 16, 1, sw) != CUDA_SUCCESS) {
            printf("tensor map encoding failed\n");
            return 1;
        }
        printf("in place (x, y, g as stored, tensor boxes, ldmatrix.trans) against xg^T in stage order:\n");
        for (int rep = 0; rep < 2; ++rep) {
            run_mix("xg^T: all three-pair units", xs, ys, gs, out, sms, sms, steps);
            run_ip("in place: all three-pair units", xm, ym, gm, gs, out, sms, sms, steps);
            run_mix("xg^T: all one-pair units", xs, ys, gs, out, sms, 0, steps);
            run_ip("in place: all one-pair units", xm, ym, gm, gs, out, sms, 0, steps);
            run_mix("xg^T: Cl(3,0)'s first round (96 + 36)", xs, ys, gs, out, sms, sms * 96 / 132, steps);
            run_ip("in place: Cl(3,0)'s first round", xm, ym, gm, gs, out, sms, sms * 96 / 132, steps);
        }
        CK(cudaFree(xn));
        CK(cudaFree(yn));
        CK(cudaFree(gn));
        return 0;
    }

    for (int data = mix_only ? 1 : 0; data < 2; ++data) {
        if (data == 1) { /* the same shapes on random values */
            fill_random<<<1024, 256>>>((__nv_bfloat16 *)xs, xy / 2, 1u);
            fill_random<<<1024, 256>>>((__nv_bfloat16 *)ys, xy / 2, 2u);
            fill_random<<<1024, 256>>>((__nv_bfloat16 *)gs, gb / 2, 3u);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            printf("random values in [-1, 1):\n");
        } else {
            printf("constant values (0x3c3c):\n");
        }
        if (mix_only)
            break;
        run<256, 2, 2, true>("two pairs a path, copies", xs, ys, gs, out, sms, rounds, steps);
        run<256, 2, 2, false>("two pairs a path, copy-free", xs, ys, gs, out, sms, rounds, steps);
        run<256, 3, 1, true>("three pairs a path (Cl(3,0)'s 12 of 20), copies", xs, ys, gs, out, sms, rounds, steps);
        run<256, 3, 1, false>("three pairs a path, copy-free", xs, ys, gs, out, sms, rounds, steps);
        run<256, 1, 2, true>("one pair a path (Cl(3,0)'s 8 of 20), copies", xs, ys, gs, out, sms, rounds, steps);
        run<256, 1, 2, false>("one pair a path, copy-free", xs, ys, gs, out, sms, rounds, steps);
        if (data == 0)
            run<128, 2, 2, true>("two pairs a path, NT 128, copies", xs, ys, gs, out, sms, rounds, steps);
    }
    /* Cl(3,0)'s first round in gw_pseq_kernel: 96 three-pair units beside 36 one-pair ones (random data) */
    const int heavy = sms * 96 / 132;
    run_mix("three-pair units alone", xs, ys, gs, out, heavy, heavy, steps);
    run_mix("three-pair units beside one-pair units", xs, ys, gs, out, sms, heavy, steps);
    run_mix("all three-pair units", xs, ys, gs, out, sms, sms, steps);
    run_mix("three-pair units alone, 24 blocks", xs, ys, gs, out, 24, 24, steps);
    CK(cudaFree(xs));
    CK(cudaFree(ys));
    CK(cudaFree(gs));
    CK(cudaFree(out));
    return 0;
}
