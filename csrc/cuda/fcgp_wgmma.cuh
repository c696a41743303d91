/* fcgp_wgmma.cuh — the Hopper (sm_90a) FCGP forward on warpgroup MMA, device side: a block
 * owns 64 rows x NT = 512 / D output columns of all D components and has two warpgroups;
 * warpgroup w owns components [w D/2, (w+1) D/2) (D/2 x NT/2 = 128 fp32 accumulators a
 * thread); at Cl(3,0), by default, a block owns half the components over NT = 128 instead (Cfg's
 * component groups, CG = 2). K (N_in) streams in steps of 32 bytes a row (8 tf32, 16 bf16). Each thread loads
 * its x, y fragments once a step (one 8-byte load per component and row: the K order inside a
 * step is permuted so a thread's two A columns are adjacent in memory, and W^T is stored in
 * the same permuted order, phys_col), forms z_{j,p} for one component's pairs in the A
 * registers, fences and issues that component's wgmmas on W[p] tiles in shared memory.
 *
 * fwd_tma_kernel brings the tiles by TMA (tma.cuh) from a producer warpgroup of its own (the
 * block's third), optionally over a cluster with multicast,
 * applies MVGELU as fragments load (GATE: x scaled by the gate product of gate_product) and
 * ends in one of the epilogues of FwdEpi (o with the grade-norm partials; out in the data type;
 * or the whole grade norm, each tile scaling its own output once its row block's partial sums
 * are in; a bf16 out goes through shared memory by TMA tensor stores, store_out_tma). Developed
 * and measured in
 * benchmarks/lab/wgmma_lab.cu (NOTES_FCGP.md); the library launches it from fcgp_sm90a.cu.
 * Needs an sm_90a target (wgmma.cuh, tma.cuh trap elsewhere).
 */
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>

#include "fcgp_plans.cuh"
#include "pdl.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

namespace fc {
namespace fcgp {
namespace sm90 {

template <int MODE> using Elem = std::conditional_t<MODE == kTF32, float, __nv_bfloat16>;

/* Two bf16 values as one 32-bit word, lo in the low half (the order of a bf16x2 register and of
 * memory). */
__device__ __forceinline__ uint32_t pack_bf16x2(__nv_bfloat16 lo, __nv_bfloat16 hi)
{
    return (uint32_t)__bfloat16_as_ushort(lo) | (uint32_t)__bfloat16_as_ushort(hi) << 16;
}

/* Shared-memory loads by 32-bit shared-window address. Through a stage pointer the compiler
 * issued generic loads (LD.E, the longer path through the L1) for the fragment loads of every
 * kernel here (ncu, NOTES_FCGP.md session 14). Volatile: kept after the barrier wait. */
__device__ __forceinline__ uint32_t lds_b32(uint32_t a)
{
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(a));
    return v;
}
__device__ __forceinline__ uint2 lds_b64(uint32_t a)
{
    uint2 v;
    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(a));
    return v;
}
/* ... and a store of two floats: through a pointer into the ring the compiler issued a generic
 * ST.E.64 (gz's staging of G, 4.4% of its stall samples at Cl(2,0) bf16: NOTES_FCGP.md session 37) */
__device__ __forceinline__ void sts_f32x2(uint32_t a, float v0, float v1)
{
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(a), "f"(v0), "f"(v1) : "memory");
}

/* Logical K position L (0 .. KS-1) inside a step -> the physical column it is read from. */
__host__ __device__ constexpr int phys_col(int mode, int L)
{
    return mode == kTF32 ? (L < 4 ? 2 * L : 2 * (L - 4) + 1)
                         : (L < 8 ? 4 * (L / 2) + (L & 1) : 4 * ((L - 8) / 2) + 2 + (L & 1));
}
/* The physical column c (0 .. KS-1) of a step -> the logical K position read from it. */
__host__ __device__ constexpr int logical_col(int mode, int c)
{
    return mode == kTF32 ? (c % 2 ? c / 2 + 4 : c / 2) : (c % 4 < 2 ? 2 * (c / 4) + c % 4 : 8 + 2 * (c / 4) + c % 4 - 2);
}

/* The Hopper backward's batch order inside each block of kBatchBlock rows (NOTES_FCGP.md session
 * 15). go^T (got_offset) is gz's A operand, read down the batch, and gW's B operand, read
 * along it: in tf32 position 2g holds row g and 2g + 1 row g + 8, so that a thread's two A rows
 * (g, g + 8) are one 8-byte load; in bf16 the rows are in order (gz's wgmma reads the panels
 * as an MN-major operand, 16 consecutive positions a row). xg^T and yg^T hold at physical
 * column phys_col(k) of each gW step the row go^T holds at k, so that gW's A and B operands
 * agree on the batch row of every K position. */
constexpr int kBatchBlock = 16;
/* go^T: position q of a block -> the row stored there */
__host__ __device__ constexpr int got_row(int mode, int q) { return mode == kTF32 ? q / 2 + 8 * (q % 2) : q; }
/* xg^T, yg^T: position q of a block -> the row stored there */
__host__ __device__ constexpr int xgt_row(int mode, int q)
{
    constexpr int ks_tf32 = 8;
    return mode == kTF32 ? got_row(mode, q / ks_tf32 * ks_tf32 + logical_col(mode, q % ks_tf32))
                         : got_row(mode, logical_col(mode, q));
}
/* go^T in step panels (session 22): for each component, the batch in steps of KS positions (32
 * bytes), each step a panel of Nor = N_out rounded up to 8 rows of 32 bytes, rows 4-7 of every
 * 8 with their 16-byte halves swapped (the 32-byte swizzle wgmma reads, applied in memory). A
 * tile of 8 rows x one step is 256 contiguous bytes, so gW brings its go^T tile (NT rows of a
 * step) and gz its tile (KS_gz rows x 64 batch positions) in 256-byte rows, where gW's boxes of
 * the transposed array's 32-byte rows filled shared memory at ~60% of that rate. Element offset
 * of (component c, row n, batch position q), components gcs apart (Bp Nor; got_rows of
 * fcgp_sm90a.cu). */
template <int MODE>
__host__ __device__ constexpr int64_t got_offset(int64_t gcs, int64_t Nor, int c, int64_t n, int64_t q)
{
    constexpr int KS = MODE == kTF32 ? 8 : 16;
    return c * gcs + (q / KS) * (Nor * KS) + n * KS + ((q % KS) ^ (((n >> 2) & 1) * (KS / 2)));
}

/* The ring stages of `stage` bytes, at most `most`, that fit in a block's 227 KB of shared memory
 * beside the kernels' 1024 bytes of alignment slack and two 8-byte mbarriers a stage. */
constexpr int stages_that_fit(int stage, int most)
{
    int n = most;
    while (n > 0 && n * stage + 1024 + 2 * n * 8 > 227 * 1024)
        --n;
    return n;
}

/* ------------------------------------------------------------------ 2. fcgp forward */
/* CG: component groups. With CG = 1 a CTA computes every output component of its 64 x NT tile;
 * with CG = 2 (Cl(3,0)) a CTA computes half of them, [g D / 2, (g + 1) D / 2), over twice the
 * columns (NT 128): the same 128 accumulators a thread, the same x and y a step (every output
 * component reads every component of both), W^T of the group's paths alone (those of its output
 * grades: PG = P / 2 slots, one run in slot order), so the same bytes a step for the same flops,
 * issued as half as many wgmmas twice as wide (the copy-free loop 675 -> 749 TF/s at Cl(3,0) bf16,
 * 359 -> 378 tf32: NOTES_FCGP.md session 47). */
template <int ID, int MODE, int NTV = 0, int CG = 1> struct Cfg {
    static constexpr int D = AlgebraTraits<ID>::D, P = AlgebraTraits<ID>::P;
    static constexpr int BM = 64, NT = NTV ? NTV : 512 * CG / D, JW = D / (2 * CG), THREADS = 256, STAGES = 3;
    static constexpr int DG = D / CG, PG = P / CG;         /* a CTA's components and paths (slots) */
    static constexpr int KS = MODE == kTF32 ? 8 : 16;      /* N_in a step: 32 bytes a row */
    static constexpr int XB = D * BM * 32, WB = PG * NT * 32; /* x (or y) tile, the CTA's W tiles */
    static constexpr int STAGE = 2 * XB + WB, SMEM = STAGES * STAGE;
    static constexpr int LBO = 128, SBO = 256; /* W tile: core (nb, kb) at nb * 256 + kb * 128 */
    static constexpr PathSlots slots = make_path_slots<ID>();
    static_assert(SMEM <= 227 * 1024, "three stages fit");
    /* each group's pairs on its own run of slots, and no grade across two groups */
    static constexpr bool grouped = [] {
        if (CG == 1)
            return true;
        bool ok = D % CG == 0 && P % CG == 0 && slots.ok && DG % 2 == 0;
        for (int q = 0; q < Plans<ID>::pair.np; ++q)
            ok = ok && slots.slot[Plans<ID>::pair.pp[q]] / PG == Plans<ID>::pair.pj[q] / DG;
        for (int g = 0; g < AlgebraTraits<ID>::G; ++g)
            ok = ok && AlgebraTraits<ID>::table.grade_start[g] / DG ==
                           (AlgebraTraits<ID>::table.grade_start[g + 1] - 1) / DG;
        return ok;
    }();
    static_assert(grouped, "component groups own whole grades and runs of slots");
    __host__ __device__ static constexpr int max_pairs()
    {
        int m = 0;
        for (int j = 0; j < D; ++j) {
            const int n = Plans<ID>::pair.jbegin[j + 1] - Plans<ID>::pair.jbegin[j];
            m = n > m ? n : m;
        }
        return m;
    }
};

/* The x, y fragments of one thread for one step: [component][row half] = 8 bytes. */
template <int D> struct Frags {
    uint2 x[D][2], y[D][2];
};

/* z_{j,p} of pair q in A-fragment order (see wgmma.cuh) from this thread's fragments. tf32: the
 * fp32 sum goes as it is, and the tensor cores ignore its low 13 bits (truncation, as in
 * cuBLAS's tf32 products of fp32 data); RN rounds it first (cvt.rna, up to session 21), which is
 * three instructions a value: the copy-free loops ran 24-34% faster without it (Cl(3,0) gW 212
 * -> 284 TF/s, forward 299 -> 370; NOTES_FCGP.md session 22), for a relative error still well
 * inside SPEC's tf32 bound. SUM_SIGN (bf16): the terms' signs on the running sum, not on x
 * (below). */
template <int ID, int MODE, int Q, bool RN = false, bool SUM_SIGN = true>
__device__ __forceinline__ void form_pair(uint32_t (&a)[4], const Frags<AlgebraTraits<ID>::D> &f)
{
    constexpr int t0 = Plans<ID>::pair.tbegin[Q], t1 = Plans<ID>::pair.tbegin[Q + 1];
    if constexpr (MODE == kTF32) {
        float z[4] = {0.f, 0.f, 0.f, 0.f};
        static_for<t1 - t0>([&](auto u) {
            constexpr int code = Plans<ID>::pair.code[t0 + decltype(u)::value];
            constexpr int i = code & 15, k = (code >> 4) & 15;
            constexpr float s = (code >> 8) ? -1.f : 1.f;
            /* a0 (g, t) a1 (g + 8, t) a2 (g, t + 4) a3 (g + 8, t + 4); .x holds column t, .y t + 4 */
            z[0] = fmaf(s * __uint_as_float(f.x[i][0].x), __uint_as_float(f.y[k][0].x), z[0]);
            z[1] = fmaf(s * __uint_as_float(f.x[i][1].x), __uint_as_float(f.y[k][1].x), z[1]);
            z[2] = fmaf(s * __uint_as_float(f.x[i][0].y), __uint_as_float(f.y[k][0].y), z[2]);
            z[3] = fmaf(s * __uint_as_float(f.x[i][1].y), __uint_as_float(f.y[k][1].y), z[3]);
        });
#pragma unroll
        for (int r = 0; r < 4; ++r)
            a[r] = RN ? to_tf32(z[r]) : __float_as_uint(z[r]);
    } else {
        /* .x holds columns (2t, 2t + 1), .y (2t + 8, 2t + 9): a0 = row g .x, a1 = row g + 8 .x,
         * a2 = row g .y, a3 = row g + 8 .y */
        /* The terms' signs without a sign-flipped copy of x (such copies cost the Cl(3,0) bf16
         * forward 84 bytes of spills at 240 registers; ptxas, session 32): z = c a, c the sign
         * of the last term taken. A term whose sign s differs from c negates a first, since then z +
         * s x y = c a - c x y = s (x y - a); a negative c negates a at the end. Negation is exact and
         * round-to-nearest symmetric, so the bits are those of the signed chain, up to the sign
         * of an exactly cancelled zero. gW keeps the copies (!SUM_SIGN): there the negations of
         * the sum cost it 5% at Cl(3,0) bf16 (278 -> 293 us, session 33) and it does not spill. */
        constexpr auto sign_at = [](int u) { return (Plans<ID>::pair.code[t0 + u] >> 8) ? -1 : 1; };
        static_for<t1 - t0>([&](auto u) {
            constexpr int uu = decltype(u)::value;
            constexpr int code = Plans<ID>::pair.code[t0 + uu];
            constexpr int i = code & 15, k = (code >> 4) & 15;
            constexpr bool flip = SUM_SIGN && uu > 0 && sign_at(uu) != sign_at(uu - 1);
            constexpr uint32_t neg = !SUM_SIGN && sign_at(uu) < 0 ? 0x80008000u : 0u;
            const uint32_t xs[4] = {f.x[i][0].x ^ neg, f.x[i][1].x ^ neg, f.x[i][0].y ^ neg, f.x[i][1].y ^ neg};
            const uint32_t ys[4] = {f.y[k][0].x, f.y[k][1].x, f.y[k][0].y, f.y[k][1].y};
#pragma unroll
            for (int r = 0; r < 4; ++r)
                a[r] = uu == 0 ? hfma2<kBF16>(xs[r], ys[r], 0x80008000u)
                               : hfma2<kBF16>(xs[r], ys[r], flip ? a[r] ^ 0x80008000u : a[r]);
        });
        if constexpr (SUM_SIGN && sign_at(t1 - t0 - 1) < 0) {
#pragma unroll
            for (int r = 0; r < 4; ++r)
                a[r] ^= 0x80008000u;
        }
    }
}

/* Where path p's W^T tile of a step lies: at w_smem + p * PATH, K chunks LBO apart, 8-row
 * groups SBO apart (cp.async ring: each path's two chunks together); SW32: rows of 32 bytes in
 * the copy engine's 32-byte swizzle (TMA kernel), adjacent (SBO 256), LBO unused. */
template <int PATH, int LBO_, int SBO_, bool SW32 = false> struct WLayout {
    static constexpr int path = PATH, lbo = LBO_, sbo = SBO_, tb = 0;
    static_assert(!SW32 || SBO_ == 256, "swizzled rows are adjacent");
    static __device__ __forceinline__ uint64_t desc(uint32_t addr)
    {
        return SW32 ? wg::desc_kmajor_swz<32>(addr) : wg::desc_kmajor(addr, LBO_, SBO_);
    }
};

/* W as stored, MN-major (the bf16 forward's WMN): a stage's W holds, for each 64-column atom a
 * of the tile and each K group kg of the step (its 8 B rows), every path's 8 rows x 128 bytes
 * (one 1024-byte swizzle atom) at ((2 a + kg) P + p) 1024, in the 128-byte swizzle; the wgmma
 * reads it transposed (MmaRS's TB). B row L of a step is W row phys_col(L), the permuted K order
 * the x fragments are loaded in: wmn_map's boxes bring rows {0, 1, 4, 5, 8, 9, 12, 13} of the
 * step as K group 0 and {2, 3, 6, 7, ...} as K group 1. */
template <int P> struct WLayoutMN {
    static constexpr int path = 1024, tb = 1;
    static __device__ __forceinline__ uint64_t desc(uint32_t addr) { return wg::desc_mn_sw128(addr, 2 * P * 1024, P * 1024); }
};

/* a when FIRST, else b (references of two types, chosen at compile time) */
template <bool FIRST, class A, class B> __device__ __forceinline__ auto &first_if(A &a, B &b)
{
    if constexpr (FIRST)
        return a;
    else
        return b;
}

/* One warpgroup's step: for each of its components, form the A fragments of all its
 * pairs, fence, issue the wgmmas (one per pair) on that component's accumulators, and wait
 * for them before the next component forms its A fragments. PIPE: the A fragments in two
 * register sets, so that each component's are formed while the one before's wgmmas run (at most
 * two components' groups in flight: the wait<1> after a component's commit retires the one
 * before, whose set the component after then overwrites). Each accumulator takes the same
 * wgmmas in the same order either way, so the bits are the same. (Issuing each pair's wgmma as
 * its fragment is formed, a group a pair, measured 3-8% slower at Cl(3,0): NOTES_FCGP.md
 * session 36.) */
template <int ID, int MODE, int NTV, int WG, class WL, bool PIPE = false, int CG = 1, int GRP = 0>
__device__ __forceinline__ void wg_step(float (&acc)[Cfg<ID, MODE, NTV, CG>::JW][Cfg<ID, MODE, NTV, CG>::NT / 2],
                                        const Frags<AlgebraTraits<ID>::D> &f, uint32_t w_smem)
{
    using C = Cfg<ID, MODE, NTV, CG>;
    constexpr int QM = C::max_pairs();
    uint32_t a2[PIPE ? 2 : 1][PIPE ? QM : 1][4]; /* PIPE's two sets */
    static_for<C::JW>([&](auto jj) {
        constexpr int J = decltype(jj)::value, j = GRP * C::DG + WG * C::JW + J;
        constexpr int q0 = Plans<ID>::pair.jbegin[j], nq = Plans<ID>::pair.jbegin[j + 1] - q0;
        uint32_t a1[PIPE ? 1 : nq][4]; /* without PIPE: this component's alone */
        auto &aj = first_if<PIPE>(a2[J % 2], a1);
        static_for<nq>([&](auto u) { form_pair<ID, MODE, q0 + decltype(u)::value>(aj[decltype(u)::value], f); });
        wg::fence();
        static_for<nq>([&](auto u) {
            /* path p's tile: at p in one group, else at its slot within the group's run */
            constexpr int p = Plans<ID>::pair.pp[q0 + decltype(u)::value];
            constexpr int tile = CG == 1 ? p : C::slots.slot[p] - GRP * C::PG;
            wg::MmaRS<MODE, C::NT, WL::tb>::run(acc[J], aj[decltype(u)::value], WL::desc(w_smem + tile * WL::path), 1);
        });
        wg::commit();
        /* without PIPE the A registers are reused by the next component: one component's wgmmas
         * in flight (the other warpgroup keeps the tensor cores busy meanwhile) */
        if constexpr (PIPE && J + 1 < C::JW)
            wg::wait<1>();
        else
            wg::wait<0>();
    });
}
/* This thread's x, y fragments of a step from the stage's x and y tiles ([component][row][32
 * bytes]); the x tile may hold only XC components from X0 on (the weight gradient's path groups). */
template <int D, int BM, int X0 = 0, int XC = D, bool LDS = true>
__device__ __forceinline__ void load_frags(Frags<D> &f, const unsigned char *xs, const unsigned char *ys, int r0, int t)
{
    /* LDS: by shared address, in program order (the forward: 306 -> 288 us, Cl(3,0) bf16; gW,
     * since session 29: 2-4% faster, 472 -> 454 us Cl(3,0) tf32, NOTES_FCGP.md); else generic
     * loads (the labs' comparison) */
    const uint32_t xa = smem_u32(xs) + r0 * 32 + t * 8, ya = smem_u32(ys) + r0 * 32 + t * 8;
    auto ld = [&](const unsigned char *p, uint32_t a, int off) {
        return LDS ? lds_b64(a + off) : *(const uint2 *)(p + r0 * 32 + t * 8 + off);
    };
#pragma unroll
    for (int c = 0; c < XC; ++c)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            f.x[X0 + c][h] = ld(xs, xa, (c * BM + 8 * h) * 32);
#pragma unroll
    for (int c = 0; c < D; ++c)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            f.y[c][h] = ld(ys, ya, (c * BM + 8 * h) * 32);
}

/* MVGELU through one factor a position: every term of z_{j,p} is s xg_i yg_k = s x_i y_k
 * Phi(x_0) Phi(y_0) (SPEC: xg_i = x_i Phi(x_0), Phi from erf), so z_{j,p} = g sum s x_i y_k
 * with g = Phi(x_0) Phi(y_0). fwd_prep (fcgp_sm90a.cu) or gate_product writes g (B, N_in) in the
 * operand type once a call, the TMA kernel brings its tile beside x and y, and scale_frags
 * multiplies x's fragments by it (y stays raw): no erf and half the multiplies in the kernel,
 * and no 2 x (column blocks) recomputation of the gates. */
/* g over the 16-byte piece at element i (x's rows, hence n, are whole pieces: the copy engine's
 * stride rule), with the gate of the data type (gate_of: bf16 the short erf, fp32 erff; session 36:
 * fwd_prep at Cl(2,0) bf16 7.1 -> 6.3 us, NOTES_FCGP.md) */
template <class E> __device__ __forceinline__ void gate_piece(const E *x0, const E *y0, E *g, int64_t i)
{
    constexpr int V = 16 / sizeof(E);
    const uint4 xv = __ldg((const uint4 *)(x0 + i)), yv = __ldg((const uint4 *)(y0 + i));
    const E *xe = (const E *)&xv, *ye = (const E *)&yv;
    alignas(16) E ge[V];
#pragma unroll
    for (int v = 0; v < V; ++v)
        ge[v] = store<E>(gate_of<E>(load<E>(xe[v])) * gate_of<E>(load<E>(ye[v])));
    *(uint4 *)(g + i) = *(const uint4 *)ge;
}
/* ... over all n (component 0 of x and y: their first B x N_in block), block b of `blocks` */
template <class E> __device__ __forceinline__ void gate_pieces(const E *x0, const E *y0, E *g, int64_t n, int64_t b,
                                                               int64_t blocks)
{
    constexpr int V = 16 / sizeof(E);
    for (int64_t i = (b * 256 + threadIdx.x) * V; i < n; i += blocks * 256 * V)
        gate_piece(x0, y0, g, i);
}
template <class E>
__global__ void __launch_bounds__(256) gate_product(const E *__restrict__ x0, const E *__restrict__ y0,
                                                    E *__restrict__ g, int64_t n)
{
    gate_pieces(x0, y0, g, n, blockIdx.x, gridDim.x);
}

/* x's fragments times this thread's g fragments (g[h]: the same positions as v[c][h]); bf16 as
 * one packed fma with -0 a pair of values (a single rounding of x g). */
template <int MODE, int D> __device__ __forceinline__ void scale_frags(uint2 (&v)[D][2], const uint2 (&g)[2])
{
#pragma unroll
    for (int c = 0; c < D; ++c)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if constexpr (MODE == kTF32) {
                v[c][h].x = __float_as_uint(__uint_as_float(v[c][h].x) * __uint_as_float(g[h].x));
                v[c][h].y = __float_as_uint(__uint_as_float(v[c][h].y) * __uint_as_float(g[h].y));
            } else {
                v[c][h].x = hfma2<MODE>(v[c][h].x, g[h].x, 0x80008000u);
                v[c][h].y = hfma2<MODE>(v[c][h].y, g[h].y, 0x80008000u);
            }
        }
}

/* Every accumulator pair of a warpgroup's tile (wgmma's D fragment layout): f(jj, cc, h, v0, v1)
 * with v0, v1 = acc[jj][4 cc + 2 h], acc[jj][4 cc + 2 h + 1] (writable where f takes them by
 * reference), component (or pair, or path) jj of the warpgroup's, row 16 warp + g + 8 h of the
 * tile, columns 8 cc + 2 t and 8 cc + 2 t + 1; over the first JN of the JW only, if JN says so. */
template <int JW, int NT, int JN = JW, class F>
__device__ __forceinline__ void each_pair(float (&acc)[JW][NT / 2], F &&f)
{
    static_assert(JN <= JW, "a prefix of the accumulators");
#pragma unroll
    for (int jj = 0; jj < JN; ++jj)
#pragma unroll
        for (int cc = 0; cc < NT / 8; ++cc)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                f(jj, cc, h, acc[jj][4 * cc + 2 * h], acc[jj][4 * cc + 2 * h + 1]);
}

/* The accumulators of components j0 .. j0 + JW - 1 (D fragment layout) into out (D, B, No) in
 * Tout (fp32, or bf16 rounded to nearest): rows past B and columns past No (a tile's tail) are
 * not written; pairs of columns go as one store when No is even. */
template <class Tout, int JW, int NT>
__device__ __forceinline__ void store_out(float (&acc)[JW][NT / 2], Tout *out, int B, int No, int j0, int row, int n0, int t)
{
#pragma unroll
    for (int j = 0; j < JW; ++j)
        wg::fence_operands(acc[j]);
    each_pair<JW, NT>(acc, [&](int jj, int cc, int h, float v0, float v1) {
        const int r = row + 8 * h, c = n0 + 8 * cc + 2 * t;
        if (r < B && c < No) {
            Tout *o = out + ((size_t)(j0 + jj) * B + r) * No + c;
            if (c + 1 < No && No % 2 == 0) {
                if constexpr (std::is_same<Tout, float>::value)
                    *(float2 *)o = make_float2(v0, v1);
                else
                    *(__nv_bfloat162 *)o = __floats2bfloat162_rn(v0, v1);
            } else {
                o[0] = store<Tout>(v0);
                if (c + 1 < No)
                    o[1] = store<Tout>(v1);
            }
        }
    });
}

/* Grade RMSNorm in the epilogue (SPEC: q_g = mean over features of |sum_{A in g} s_A o_A^2|,
 * out = o / sqrt(q_g + 1e-6)). The block's two warpgroups hold different components at the
 * same positions; a grade split between them (at most one: the split is at D/2) is owned by
 * warpgroup 0, which adds warpgroup 1's share of t from shared memory (or, where the grade's
 * signs agree, its row sums: split_by_rows). The owner sums |t| over its columns into one
 * partial a (row, grade, column block); norm_finalize sums the column blocks in order and
 * scales the output (the one light extra pass). */
/* With component groups (Cfg's CG) the same holds inside the group [J0, J0 + 2 JW): its grades are
 * whole (Cfg::grouped), a grade split between its warpgroups (at J0 + JW) is the lower one's, and
 * the partials are the tile's column block's (cb), whichever group wrote them. */
template <int ID, int J0 = 0, int JW = AlgebraTraits<ID>::D / 2> constexpr int split_grade()
{
    constexpr int G = AlgebraTraits<ID>::G;
    for (int g = 0; g < G; ++g)
        if (AlgebraTraits<ID>::table.grade_start[g] < J0 + JW && J0 + JW < AlgebraTraits<ID>::table.grade_start[g + 1])
            return g;
    return -1;
}
template <int ID, int J0 = 0, int JW = AlgebraTraits<ID>::D / 2> struct GradeSplit {
    static constexpr int split = split_grade<ID, J0, JW>(); /* the grade split between the warpgroups, or -1 */
};

/* sum over this warpgroup's components of grade g of s_A o_A^2 at position pos (the warpgroup's
 * JW components from J0 + WG JW) */
template <int ID, int WG, int GR, int NT, int J0 = 0, int JW>
__device__ __forceinline__ float grade_t(const float (&acc)[JW][NT / 2], int pos)
{
    float t = 0.f;
    static_for<JW>([&](auto jj) {
        constexpr int A = J0 + WG * JW + decltype(jj)::value;
        constexpr int gA = AlgebraTraits<ID>::table.grade[A];
        constexpr float sA = AlgebraTraits<ID>::table.grade_sign[A];
        if constexpr (gA == GR) {
            const float o = acc[decltype(jj)::value][pos];
            t = fmaf(sA * o, o, t);
        }
    });
    return t;
}

/* warpgroup 1's share of the split grade into shared memory ([position][thread]) */
template <int ID, int NT, int J0 = 0, int JW>
__device__ __forceinline__ void norm_share(const float (&acc)[JW][NT / 2], float *tx, int wtid)
{
    constexpr int GS = GradeSplit<ID, J0, JW>::split;
    if constexpr (GS >= 0) {
#pragma unroll
        for (int pos = 0; pos < NT / 2; ++pos)
            tx[pos * 128 + wtid] = grade_t<ID, 1, GS, NT, J0>(acc, pos);
    }
}

/* Where every component of the split grade has a sign s_A of the same side (Cl(2,0)'s vector
 * grade: both +1), |t| at a position is the sum of the warpgroups' |t| shares, so each warpgroup
 * sums its own share over its columns and warpgroup 1 passes one float a row (norm_rows' sx) where
 * norm_share passed its t at every position (64 floats a thread through shared memory, then
 * warpgroup 0 summing two grades while warpgroup 1 summed one: NOTES_FCGP.md session 51). */
template <int ID, int J0 = 0, int JW = AlgebraTraits<ID>::D / 2> __host__ __device__ constexpr bool split_by_rows()
{
    constexpr int GS = GradeSplit<ID, J0, JW>::split;
    if (GS < 0)
        return false;
    bool pos = true, neg = true;
    for (int a = AlgebraTraits<ID>::table.grade_start[GS]; a < AlgebraTraits<ID>::table.grade_start[GS + 1]; ++a) {
        pos = pos && AlgebraTraits<ID>::table.grade_sign[a] >= 0;
        neg = neg && AlgebraTraits<ID>::table.grade_sign[a] <= 0;
    }
    return pos || neg;
}

/* the owned grades' |t| summed over the block's columns, one partial a (row, grade) of the block's
 * column block (blockIdx.x / CG: read here, where a column block passed in, a register held
 * through the K loop, cost the one-group Cl(3,0) bf16 forward 4 / 8 bytes of spills, ptxas).
 * BYROWS (split_by_rows): the split grade's share of each warpgroup over its columns instead,
 * warpgroup 1's into sx (64 rows, shared memory), warpgroup 0's into own (its rows g, g + 8), which
 * norm_rows_finish adds once sx is written; tx is not read. */
template <int ID, int WG, int NT, int J0 = 0, int CG = 1, bool BYROWS = false, int JW>
__device__ __forceinline__ void norm_rows(const float (&acc)[JW][NT / 2], const float *tx, float *partial, int B,
                                          int colblocks, int row0, int wtid, int t, float *sx = nullptr,
                                          float *own = nullptr)
{
    const unsigned cb = blockIdx.x / CG;
    constexpr int G = AlgebraTraits<ID>::G, GS = GradeSplit<ID, J0, JW>::split;
    static_assert(!BYROWS || split_by_rows<ID, J0, JW>(), "the split grade's shares add without cancelling");
    static_for<G>([&](auto gg) {
        constexpr int GR = decltype(gg)::value, start = AlgebraTraits<ID>::table.grade_start[GR];
        constexpr bool mine = start >= J0 && start < J0 + 2 * JW && (start < J0 + JW ? 0 : 1) == WG;
        /* the group's grades only; owner: the lower warpgroup (BYROWS: both sum their share of GS) */
        if constexpr (mine || (BYROWS && GR == GS)) {
            float rs[2] = {0.f, 0.f};
#pragma unroll
            for (int pos = 0; pos < NT / 2; ++pos) {
                float tv = grade_t<ID, WG, GR, NT, J0>(acc, pos);
                if constexpr (GR == GS && !BYROWS)
                    tv += tx[pos * 128 + wtid];
                rs[(pos >> 1) & 1] += fabsf(tv);
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                rs[h] += __shfl_xor_sync(0xffffffffu, rs[h], 1);
                rs[h] += __shfl_xor_sync(0xffffffffu, rs[h], 2);
                if constexpr (BYROWS && GR == GS) {
                    if (WG == 1 && t == 0)
                        sx[wtid / 32 * 16 + wtid % 32 / 4 + 8 * h] = rs[h];
                    if (WG == 0)
                        own[h] = rs[h];
                } else if (t == 0 && row0 + 8 * h < B && (int)cb < colblocks) {
                    partial[((size_t)cb * B + row0 + 8 * h) * G + GR] = rs[h];
                }
            }
        }
    });
}

/* ... BYROWS, warpgroup 0 after a barrier over both: the split grade's partial, its share then
 * warpgroup 1's (one order: the bits are the same whichever tile or pass reads them) */
template <int ID, int CG = 1, int J0 = 0, int JW = AlgebraTraits<ID>::D / 2>
__device__ __forceinline__ void norm_rows_finish(const float *sx, const float (&own)[2], float *partial, int B,
                                                 int colblocks, int row0, int wtid, int t)
{
    constexpr int G = AlgebraTraits<ID>::G, GS = GradeSplit<ID, J0, JW>::split;
    const unsigned cb = blockIdx.x / CG;
#pragma unroll
    for (int h = 0; h < 2; ++h)
        if (t == 0 && row0 + 8 * h < B && (int)cb < colblocks)
            partial[((size_t)cb * B + row0 + 8 * h) * G + GS] = own[h] + sx[wtid / 32 * 16 + wtid % 32 / 4 + 8 * h];
}

/* One block a row: r_g from the column-block partials in order, norms (B, G) = r, out /= r. */
template <int ID>
__global__ void norm_finalize(float *out, float *norms, const float *partial, int B, int No, int colblocks)
{
    constexpr int D = AlgebraTraits<ID>::D, G = AlgebraTraits<ID>::G;
    __shared__ float r[G];
    const int row = blockIdx.x;
    if (threadIdx.x < G) {
        float q = 0.f;
        for (int cb = 0; cb < colblocks; ++cb)
            q += partial[((size_t)cb * B + row) * G + threadIdx.x];
        r[threadIdx.x] = sqrtf(q / (float)No + 1e-6f);
        norms[(size_t)row * G + threadIdx.x] = r[threadIdx.x];
    }
    __syncthreads();
    static_for<D>([&](auto cc) {
        constexpr int c = decltype(cc)::value, gc = AlgebraTraits<ID>::table.grade[c];
        const float rg = r[gc];
        float *o = out + ((size_t)c * B + row) * No;
        for (int n = threadIdx.x; n < No; n += blockDim.x)
            o[n] = o[n] / rg;
    });
}

/* What fwd_tma_kernel's epilogue writes (mode; fcgp_sm90a.h describes them for the host):
 *  kEpiO    o (D, B, N_out) fp32 and, when partial != NULL, the grade-norm partials
 *           (column blocks, B, G) that norm_finalize / fcgp.cu's fwd_finalize complete;
 *  kEpiOut  out = o in Tout (no norm);
 *  kEpiNorm out = o / r_g in Tout and norms = r (B, G; may be NULL). Each tile writes its
 *           partials and counts itself in arrive[its row block]; the row block's tiles run in the
 *           same wave as a rule, so each waits (at most wait_ns) for the count to be whole, then
 *           sums the partials in column-block order and writes its own tile scaled from its
 *           registers: no pass over o. A tile whose wait runs out writes o (fp32) instead and
 *           says so in state[tile]; the tile that arrives last, which never waits for the count,
 *           waits for every other tile's state (all have arrived, so each decides within its
 *           bounded wait) and scales the o of those that gave up (norm_fixup). No block waits
 *           without bound on one that may not be resident. The sums and scalings are the finalize
 *           pass's own: the result is bitwise the same whoever scales a tile. arrive (row
 *           blocks) and state (row blocks x column blocks) are zero at launch. */
enum { kEpiO = 0, kEpiOut = 1, kEpiNorm = 2 };
template <class Tout> struct FwdEpi {
    float *o, *partial;
    Tout *out; /* may be o itself when Tout is float */
    float *norms;
    int *arrive, *state;
    long long wait_ns;
    int mode;
    int tma_out; /* bf16 out (kEpiOut, kEpiNorm) by the copy engine through the kernel's omap (store_out_tma) */
};

/* A barrier over the forward's two consumer warpgroups (threads 0-255), named barrier 1: the
 * producer warpgroup, where there is one, never joins it (and has left by the epilogue). */
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }

/* The accumulators of components j0 .. j0 + JW - 1 (this warpgroup's; wtid its thread, wgi its
 * index) into bf16 out through the copy engine: the warpgroup stages its 64 rows x NT columns at
 * st (free shared memory, 1024-byte aligned) as boxes of 64 columns x 64 rows x JW components,
 * rows of 128 bytes in the copy engine's 128-byte swizzle (16-byte piece k of row r at k ^ r % 8,
 * so that a warp's 4-byte writes of 8 rows x 4 columns hit 32 banks), then one thread stores
 * each box through omap (bf16 (D, B, N_out), boxes (64, 64, JW), SWIZZLE_128B) at column n0 +
 * 64 i, row m0, component j0; the copy engine clips rows past B and columns past N_out. Against
 * store_out: 4 x fewer, whole-line writes to L2 where a warp's 4-byte stores covered 8 rows x 16
 * bytes; the same bits (round to nearest either way). */
template <int JW, int NT>
__device__ __forceinline__ void store_out_tma(float (&acc)[JW][NT / 2], unsigned char *st, const CUtensorMap *omap,
                                              int No, int n0, int m0, int j0, int wgi, int wtid)
{
    constexpr int BOX = JW * 64 * 128;
    static_assert(NT % 64 == 0, "whole boxes of 64 columns");
    const int warp = wtid / 32, g = (wtid % 32) / 4, t = wtid % 4;
#pragma unroll
    for (int j = 0; j < JW; ++j)
        wg::fence_operands(acc[j]);
    const uint32_t base = smem_u32(st);
    each_pair<JW, NT>(acc, [&](int jj, int cc, int h, float v0, float v1) {
        const int r = 16 * warp + g + 8 * h; /* r % 8 == g */
        const __nv_bfloat162 v = __floats2bfloat162_rn(v0, v1);
        const uint32_t a = base + (cc / 8) * BOX + jj * 64 * 128 + r * 128 + ((cc % 8) ^ g) * 16 + 4 * t;
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(pack_bf16x2(v.x, v.y)) : "memory");
    });
    tma::fence_proxy_async_shared();
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wgi) : "memory"); /* the warpgroup's box written */
    if (wtid == 0) {
#pragma unroll
        for (int i = 0; i < NT / 64; ++i)
            if (n0 + 64 * i < No)
                tma::store_3d(omap, st + i * BOX, n0 + 64 * i, m0, j0);
        tma::bulk_commit_wait_read(); /* the CTA's shared memory stays until the copy engine has read it */
    }
}

/* ld.acquire / st.release of a flag at GPU scope: the forward norm's counts and states, and gW's
 * segment hand-off (fcgp_gw_sched.h). */
__device__ __forceinline__ int ld_acquire_gpu(const int *p)
{
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_release_gpu(int *p, int v)
{
    asm volatile("st.release.gpu.global.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_gpu(int *p, int v)
{
    asm volatile("st.relaxed.gpu.global.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
/* the old value; a release of what this thread (and, through a bar.sync before, its CTA) wrote,
 * an acquire of what the earlier adders released (their adds are one release sequence) */
__device__ __forceinline__ int atom_add_acq_rel_gpu(int *p, int v)
{
    int old;
    asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
__device__ __forceinline__ long long global_ns()
{
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    return t;
}

/* The row-block handshake of the forward's epilogue norm (fwd_tma_kernel), by a tile's thread 0
 * after a barrier over the tile's writers of its partials: count the tile into *count of n and,
 * unless it completed the count (kTileLast), wait at most wait_ns for the count to be whole:
 * kTileWhole (its state stored as such: the last tile need not finish it) or kTileGaveUp (the
 * caller releases that state once whatever the last tile needs of it is written). No tile waits
 * without bound on one that may not be resident. The add releases the CTA's partials (the barrier
 * before orders every writer's stores before thread 0's release, as a CUTLASS semaphore's arrive)
 * and acquires the others'; the wait's acquiring loads do the same for a tile that is not last,
 * and a barrier after passes the acquire on to the readers. So no fence: the fence.sc before the
 * add and after the wait, the count read once more after the wait and a release store of Whole
 * were six L2 round trips a tile where this takes two or three (NOTES_FCGP.md session 50). Whole
 * guards no data (the last tile only needs to know that the tile scaled itself): relaxed. */
enum { kTileWhole = 1, kTileGaveUp = 2, kTileLast = 3 };
__device__ __forceinline__ int tile_arrive(int *count, int n, int *state, long long wait_ns)
{
    if (atom_add_acq_rel_gpu(count, 1) == n - 1)
        return kTileLast;
    const long long t0 = global_ns();
    int c;
    while ((c = ld_acquire_gpu(count)) < n && global_ns() - t0 < wait_ns)
        __nanosleep(64);
    if (c < n)
        return kTileGaveUp;
    st_relaxed_gpu(state, kTileWhole);
    return kTileWhole;
}
/* ... and, for the last tile, another tile's state once that one has decided (it has arrived, so
 * it decides within its bounded wait) */
__device__ __forceinline__ int tile_state(const int *state)
{
    int v;
    while ((v = ld_acquire_gpu(state)) == 0)
        __nanosleep(64);
    return v;
}

/* A tile of kEpiNorm, once its row block's partials are all written: inv (64 rows x D
 * components) = 1 / r of the component's grade, r_g = sqrt(sum over the column blocks in order /
 * N_out + eps), as fwd_finalize forms it (rg: 64 x G scratch; both in shared memory); norms
 * written when given (the block's last tile passes them). */
template <int ID>
__device__ void norm_inv(float *inv, float (*rg)[AlgebraTraits<ID>::G], const float *partial, float *norms, int B,
                         int No, int colblocks, int m0, int tid)
{
    using A = AlgebraTraits<ID>;
    constexpr int D = A::D, G = A::G;
    for (int i = tid; i < 64 * G; i += 256) {
        const int r = i / G, gg = i % G, row = m0 + r;
        float q = 0.f;
        if (row < B) {
            for (int cb = 0; cb < colblocks; ++cb)
                q += __ldcg(partial + ((size_t)cb * B + row) * G + gg);
            q /= (float)No;
        }
        const float rr = sqrtf(q + (float)FC_NORM_EPS);
        rg[r][gg] = 1.f / rr;
        if (norms && row < B)
            norms[(size_t)row * G + gg] = rr;
    }
    consumers_sync();
    for (int r = tid; r < 64; r += 256)
        static_for<D>([&](auto ac) {
            constexpr int a = decltype(ac)::value, ga = A::table.grade[a];
            inv[r * D + a] = rg[r][ga];
        });
    consumers_sync();
}

/* ... then out = o inv over columns [c0, c0 + NT) of the row block (a tile that gave up waiting),
 * components [a0, a0 + DG) (the tile's group): o from L2 (.cg, past this SM's L1: other SMs wrote
 * it), V values a thread-item, eight items in flight a thread. */
template <int ID, int NT, int V, int DG = AlgebraTraits<ID>::D, class Tout>
__device__ void norm_fixup(const float *o, Tout *out, const float *inv, int B, int No, int m0, int c0, int a0, int tid)
{
    constexpr int D = AlgebraTraits<ID>::D, U = 8, NV = NT / V, ITEMS = DG * 64 * NV;
    static_assert(NT % V == 0 && ITEMS % (256 * U) == 0, "whole rounds of items");
    for (int base = tid; base < ITEMS; base += 256 * U) {
        float v[U][V];
        int64_t at[U];
        float sc[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int it = base + 256 * u, ra = it / NV, c = c0 + (it % NV) * V, a = a0 + ra / 64, r = ra % 64;
            at[u] = -1;
            if (m0 + r >= B || c >= No)
                continue;
            at[u] = ((int64_t)a * B + m0 + r) * No + c;
            sc[u] = inv[r * D + a];
            if constexpr (V == 4) {
                const float4 w = __ldcg((const float4 *)(o + at[u]));
                v[u][0] = w.x, v[u][1] = w.y, v[u][2] = w.z, v[u][3] = w.w;
            } else {
                v[u][0] = __ldcg(o + at[u]);
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (at[u] < 0)
                continue;
            if constexpr (V == 4 && std::is_same<Tout, float>::value) {
                *(float4 *)(out + at[u]) = make_float4(v[u][0] * sc[u], v[u][1] * sc[u], v[u][2] * sc[u], v[u][3] * sc[u]);
            } else if constexpr (V == 4) {
                __nv_bfloat162 p[2] = {__floats2bfloat162_rn(v[u][0] * sc[u], v[u][1] * sc[u]),
                                       __floats2bfloat162_rn(v[u][2] * sc[u], v[u][3] * sc[u])};
                *(uint2 *)(out + at[u]) = *(const uint2 *)p;
            } else {
                out[at[u]] = store<Tout>(v[u][0] * sc[u]);
            }
        }
    }
}

/* ------------------------------------------------------------------ 2b. TMA and clusters */
/* W^T in stage order, the forward's B operand as its ring stages hold it, so that a stage's
 * W^T is one contiguous run (a component group's, one run of its slots): for column block cb and
 * step s, the P paths' tiles (path numbers, or slots with component groups) of NT rows
 * (columns of the output) x 32 bytes (the step's K, physical column c: phys_col), each row's
 * 16-byte halves swapped in rows 4-7 of every 8 (the copy engine's 32-byte swizzle, which
 * desc_kmajor_swz<32> reads). The element offset of (cb, s, p, n, c); written by fwd_prep
 * (wst_block, fcgp_sm90a.cu), column blocks padded to whole tiles with zeros. */
template <int MODE>
__host__ __device__ constexpr int64_t wst_offset(int P, int NT, int64_t steps, int64_t cb, int64_t s, int p, int n, int c)
{
    constexpr int KS = MODE == kTF32 ? 8 : 16;
    return (((cb * steps + s) * P + p) * NT + n) * KS + (c ^ ((n >> 2) & 1) * (KS / 2));
}

/* A TMA stage: x, y, every path's W^T tile, and (GATE) the gate product's tile (64 rows x 32
 * bytes, after W^T so every tile keeps the alignment its layout needs); the kernel's dynamic
 * shared memory: the stages, 1024 bytes to align them, the full / empty mbarriers and the norm's
 * row sums. */
template <int ID, int MODE, bool GATE, int CG = 1> __host__ __device__ constexpr int tma_stage_bytes()
{
    return Cfg<ID, MODE, 0, CG>::STAGE + (GATE ? Cfg<ID, MODE, 0, CG>::BM * 32 : 0);
}
template <int ID, int MODE, bool GATE, int CG = 1> __host__ __device__ constexpr int tma_smem_bytes()
{
    /* the stages, the alignment slack, the full and empty mbarriers, then the norm's 64 row sums
     * (split_by_rows) */
    return Cfg<ID, MODE, 0, CG>::STAGES * tma_stage_bytes<ID, MODE, GATE, CG>() + 1024 +
           2 * Cfg<ID, MODE, 0, CG>::STAGES * 8 + 64 * 4;
}

/* The same forward with the tiles brought by the copy engine (tma.cuh): x and y one 3-D box
 * each (KS columns, 64 rows, D components: the [component][row][32 bytes] tiles of the ring),
 * W^T two halves of P / 2 paths, in the copy engine's 32-byte swizzle wgmma reads: with wst
 * (stage order: wst_offset) two contiguous runs by 1-D bulk copies, else two boxes of (KS, NT,
 * P / 2) from wmap (W^T (P, N_out, Nip); a step's 32 bytes of K a row). In a CN x CM cluster
 * (CN column blocks share rows, CM row blocks share columns) each tile is copied once and
 * multicast: with CN = 2 one CTA brings x and the other y; with CM = 2 one brings the first
 * half of the paths' W^T and the other the second half; every CTA
 * expects the whole stage on its own "full" mbarrier. A producer warpgroup (threads 256-383,
 * kProducerRegs registers) issues the copies: step s into buffer s % STAGES once every consumer
 * warpgroup of the cluster has arrived on its "empty" mbarrier for the step before that used it;
 * the two consumer warpgroups (kConsumerRegs) only compute, and the epilogue's barriers span them
 * alone (consumers_sync). GATE: MVGELU, x's fragments
 * scaled by the tile of gmap (the gate product g, (B, N_in); multicast with x in a cluster)
 * as they are loaded; gmap is not read otherwise. ep: what the epilogue writes (FwdEpi). */
/* How a consumer warpgroup of a multi-CTA cluster releases a stage to the CTAs whose copies
 * land in it: 0, the CTA-scope remote arrive of CUTLASS's cluster pipelines (default);
 * 1 (-DFC_FCGP_CLUSTER_RELEASE_FENCE=1), the cluster-scope release, a fence each (as the lab
 * measured it in session 9 up to 39be350) */
#ifndef FC_FCGP_CLUSTER_RELEASE_FENCE
#define FC_FCGP_CLUSTER_RELEASE_FENCE 0
#endif
constexpr bool RELEASE_CLUSTER = FC_FCGP_CLUSTER_RELEASE_FENCE;

/* The block of the forward, gW and gz: two consumer warpgroups (threads 0-255, the ones
 * consumers_sync spans) and the producer's. Thread 0 issuing between its own steps (up to session
 * 19) refilled a buffer up to a step late when the warpgroups ran out of phase: the producer
 * warpgroup took the forward kernel from 510 to 464 us at Cl(3,0) tf32, 179 -> 144 Cl(2,0) tf32,
 * 103 -> 87 Cl(2,0) bf16, 268 -> 265 Cl(3,0) bf16 (whose consumers spill 80-96 bytes at 240
 * registers; NOTES_FCGP.md session 20), and gW 1019 -> 615 us at Cl(3,0) tf32 (session 21). */
constexpr int kSplitThreads = 384, kConsumerThreads = 256, kProducerRegs = 24, kConsumerRegs = 240;
static_assert(kSplitThreads == kConsumerThreads + 128, "two consumer warpgroups and the producer's");
static_assert(kProducerRegs + 2 * kConsumerRegs == 3 * 168, "the launch's 65536 registers / 384 threads");

/* WMN (bf16): W as stored, through wmap (wmn_map of fcgp_sm90a.cu: boxes of 64 columns x a K
 * group's 8 permuted rows x P / 2 paths, SWIZZLE_128B; WLayoutMN), read MN-major by the wgmmas:
 * no W^T to prepare. PIPE: wg_step's components in two A register sets, each formed while the
 * one before's wgmmas run. */
template <int ID, int MODE, int CN, int CM, bool GATE, class Tout = float, bool MC = true, bool WMN = false,
          bool PIPE = false, int CG = 1>
__global__ void __launch_bounds__(kSplitThreads, 1)
    fwd_tma_kernel(const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap ymap,
                   const __grid_constant__ CUtensorMap wmap, const Elem<MODE> *__restrict__ wst,
                   const __grid_constant__ CUtensorMap gmap, const __grid_constant__ CUtensorMap omap,
                   const FwdEpi<Tout> ep, int B, int Ni, int No)
{
    using C = Cfg<ID, MODE, 0, CG>;
    constexpr int D = C::D, P = C::P, S = C::STAGES, CS = CN * CM;
    constexpr int STG = tma_stage_bytes<ID, MODE, GATE, CG>(), GOFF = 2 * C::XB + C::WB; /* g's tile */
    static_assert(tma_smem_bytes<ID, MODE, GATE, CG>() <= 227 * 1024, "the stages fit");
    /* W^T: one 32-byte row (a step's K) per (path, column), the CTA's PG paths in two halves */
    constexpr int PH = C::PG / 2, WHALF = PH * C::NT * 32;
    static_assert(C::PG % 2 == 0 && (C::NT * 32) % 256 == 0, "W^T halves and swizzle tiles aligned");
    static_assert(CG == 1 || (CS == 1 && !WMN && !PIPE), "component groups: one CTA, W^T in stage order");
    static_assert(C::XB % 256 == 0, "W^T tiles start on a swizzle pattern's boundary");
    static_assert(!WMN || (MODE == kBF16 && C::NT % 64 == 0 && C::XB % 1024 == 0 && CS == 1),
                  "W as stored: bf16, whole 64-column atoms on 1024-byte boundaries, one CTA");
    using WT = std::conditional_t<WMN, WLayoutMN<P>, WLayout<C::NT * 32, 0, 256, true>>;
    static_assert(CN <= 2 && CM <= 2, "one CTA a tile half");
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *smem = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = (uint64_t *)(smem + S * STG), *empty = full + S;
    const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, g = (tid % 32) / 4, t = tid % 4;
    /* K tails: the copy engine fills columns past N_in with zeros, and W^T's K is padded to a
     * whole step with zeros (see Run), so a partial last step adds nothing spurious */
    /* blockIdx.x: column block cbx and component group grp (CG of them side by side) */
    const int cbx = (int)blockIdx.x / CG, grp = CG == 1 ? 0 : (int)blockIdx.x % CG;
    const int n0 = cbx * C::NT, m0 = blockIdx.y * C::BM, steps = (Ni + C::KS - 1) / C::KS;
    /* tiles past the output (the grid rounded up to whole clusters) read the last column block's
     * W^T, in bounds, and write nothing; a stage of W^T in stage order holds every slot (CG WB
     * bytes), the group's a run of WB from its first slot */
    const int cbw = min(cbx, (No + C::NT - 1) / C::NT - 1);
    const unsigned char *wcb =
        wst ? (const unsigned char *)wst + (size_t)cbw * steps * (CG * C::WB) + (size_t)grp * C::WB : nullptr;
    const uint32_t rank = CS > 1 ? tma::cluster_rank() : 0;
    const int cx = (int)rank % CN, cy = (int)rank / CN;
    if (cx != (int)blockIdx.x % CN || cy != (int)blockIdx.y % CM)
        __trap(); /* the masks below assume ranks x-fastest over the cluster's blocks */
    const uint16_t row_mask = (uint16_t)(((1u << CN) - 1) << (cy * CN)); /* the CTAs with my rows */
    uint16_t col_mask = 0;                                               /* ... with my columns */
    for (int i = 0; i < CM; ++i)
        col_mask |= (uint16_t)(1u << (cx + i * CN));
    if (tid == 0) {
        for (int b = 0; b < S; ++b) {
            tma::mbar_init(&full[b], 1);
            tma::mbar_init(&empty[b], 2 * CS);
        }
        tma::fence_mbar_init();
    }
    if constexpr (CS > 1)
        tma::cluster_sync(); /* every mbarrier of the cluster initialised before any copy */
    else
        __syncthreads();
    /* launched by programmatic dependent launch after fwd_prep (fwd_pdl): its W^T, g and zeroed
     * flags are complete and visible from here; without the attribute this returns at once */
    pdl::wait();

    auto issue = [&](int s) { /* the producer: this CTA's share of step s into buffer s % S */
        unsigned char *buf = smem + (s % S) * STG;
        uint64_t *bar = &full[s % S];
        tma::mbar_arrive_expect_tx(bar, STG);
        const int k0 = s * C::KS;
        if constexpr (CN == 1 || !MC) {
            tma::load_3d(buf, &xmap, k0, m0, 0, bar);
            tma::load_3d(buf + C::XB, &ymap, k0, m0, 0, bar);
        } else {
            tma::load_3d_multicast(buf + cx * C::XB, cx ? &ymap : &xmap, k0, m0, 0, bar, row_mask);
        }
        if constexpr (GATE) { /* g is per row, like x: multicast with it */
            if constexpr (CN == 1 || !MC)
                tma::load_3d(buf + GOFF, &gmap, k0, m0, 0, bar);
            else if (cx == 0)
                tma::load_3d_multicast(buf + GOFF, &gmap, k0, m0, 0, bar, row_mask);
        }
        if constexpr (WMN) { /* W as stored: atom a, K group kg of half h at ((2 a + kg) P + h PH) 1024 */
#pragma unroll
            for (int a = 0; a < C::NT / 64; ++a)
#pragma unroll
                for (int kg = 0; kg < 2; ++kg) {
                    unsigned char *wa = buf + 2 * C::XB + (2 * a + kg) * P * 1024;
                    tma::load_5d(wa, &wmap, n0 + 64 * a, 0, kg, k0 / 4, 0, bar);
                    tma::load_5d(wa + PH * 1024, &wmap, n0 + 64 * a, 0, kg, k0 / 4, PH, bar);
                }
        } else if (wcb) { /* stage order: contiguous halves */
            const unsigned char *wsrc = wcb + (size_t)s * (CG * C::WB);
            if constexpr (CM == 1 || !MC) {
                tma::bulk_load(buf + 2 * C::XB, wsrc, WHALF, bar);
                tma::bulk_load(buf + 2 * C::XB + WHALF, wsrc + WHALF, WHALF, bar);
            } else {
                tma::bulk_load_multicast(buf + 2 * C::XB + cy * WHALF, wsrc + cy * WHALF, WHALF, bar, col_mask);
            }
        } else if constexpr (CM == 1 || !MC) { /* W^T (P, N_out, Nip): boxes of 32-byte rows */
            tma::load_3d(buf + 2 * C::XB, &wmap, k0, n0, 0, bar);
            tma::load_3d(buf + 2 * C::XB + WHALF, &wmap, k0, n0, PH, bar);
        } else {
            tma::load_3d_multicast(buf + 2 * C::XB + cy * WHALF, &wmap, k0, n0, cy * PH, bar, col_mask);
        }
    };
    if (wgi == 2) { /* the producer: one thread issues every step once its buffer is free */
        wg::setmaxnreg_dec<kProducerRegs>();
        if (tid == 256)
            for (int s = 0; s < steps; ++s) {
                if (s >= S)
                    tma::mbar_wait(&empty[s % S], ((s - S) / S) & 1);
                issue(s);
            }
        if constexpr (CS > 1)
            tma::cluster_sync(); /* as the consumers after their loop */
        return;
    }
    wg::setmaxnreg_inc<kConsumerRegs>();
    /* the consumers, for component group GRP (a constant: each group its own copy of the loop and
     * epilogue, a CTA running one) */
    auto consume = [&](auto grp_c) {
        constexpr int GRP = decltype(grp_c)::value, J0 = GRP * C::DG; /* the group's first component */
        float acc[C::JW][C::NT / 2];
        zero_all(acc);
        for (int s = 0; s < steps; ++s) {
            tma::mbar_wait(&full[s % S], (s / S) & 1);
            const unsigned char *buf = smem + (s % S) * STG;
            Frags<D> f;
            load_frags<D, C::BM>(f, buf, buf + C::XB, 16 * warp + g, t);
            if constexpr (GATE) {
                uint2 gf[2];
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    gf[h] = lds_b64(smem_u32(buf + GOFF) + (16 * warp + g + 8 * h) * 32 + t * 8);
                scale_frags<MODE, D>(f.x, gf);
            }
            const uint32_t w_smem = smem_u32(buf + 2 * C::XB);
            if (wgi == 0)
                wg_step<ID, MODE, 0, 0, WT, PIPE, CG, GRP>(acc, f, w_smem);
            else
                wg_step<ID, MODE, 0, 1, WT, PIPE, CG, GRP>(acc, f, w_smem);
            /* this warpgroup's wgmmas have completed, so all four warps have used their fragments
             * and the W tiles: release the buffer to every producer that writes into it */
            if constexpr (CS == 1) {
                if (tid % 128 == 0)
                    tma::mbar_arrive(&empty[s % S]);
            } else if (tid % 128 < CS) { /* one lane a destination CTA, in parallel */
                tma::mbar_arrive_cluster<RELEASE_CLUSTER>(&empty[s % S], (uint32_t)(tid % 128));
            }
        }
        if constexpr (CS > 1)
            tma::cluster_sync(); /* no CTA leaves while a peer may still signal its mbarriers */
        const int row = m0 + 16 * warp + g, j0 = J0 + wgi * C::JW;
        /* store_out_tma's staging: warpgroup 0 at stage 0, 1 at stage 2, clear of stage 1's flag,
         * inv and rg; the ring is idle once both warpgroups are past their K loops */
        unsigned char *const ost = smem + 2 * wgi * STG;
        static_assert(STG % 1024 == 0 && C::JW * C::NT * 128 <= STG && S >= 3, "bf16 staging beside stage 1");
        constexpr bool BF16_OUT = std::is_same<Tout, __nv_bfloat16>::value;
        auto store_tile = [&] { /* the tile into out: from the ring by the copy engine where omap is out's */
            if constexpr (BF16_OUT)
                if (ep.tma_out) {
                    store_out_tma<C::JW, C::NT>(acc, ost, &omap, No, n0, m0, j0, wgi, tid % 128);
                    return;
                }
            store_out<Tout, C::JW, C::NT>(acc, ep.out, B, No, j0, row, n0, t);
        };
        if (ep.mode == kEpiOut) {
            if (BF16_OUT && ep.tma_out)
                consumers_sync(); /* the other warpgroup's last wgmmas have read the ring */
            store_tile();
            return;
        }
        if (ep.mode == kEpiO)
            store_out<float, C::JW, C::NT>(acc, ep.o, B, No, j0, row, n0, t);
        if (ep.partial == nullptr)
            return;
        const int colblocks = (No + C::NT - 1) / C::NT;
        /* one group only: the two-group Cl(3,0) forms (grade 1 split in group 0) spilled more with
         * it (ptxas, bf16 20 / 84 -> 32 / 156 bytes) */
        if constexpr (CG == 1 && split_by_rows<ID, J0, C::JW>()) {
            /* from registers, and sx beside the barriers, outside the ring: no barrier before */
            float *sx = (float *)(empty + S), own[2];
            if (wgi == 0)
                norm_rows<ID, 0, C::NT, J0, CG, true>(acc, nullptr, ep.partial, B, colblocks, row, tid % 128, t, sx, own);
            else
                norm_rows<ID, 1, C::NT, J0, CG, true>(acc, nullptr, ep.partial, B, colblocks, row, tid % 128, t, sx, own);
            consumers_sync(); /* sx written */
            if (wgi == 0)
                norm_rows_finish<ID, CG, J0, C::JW>(sx, own, ep.partial, B, colblocks, row, tid % 128, t);
        } else {
            float *tx = (float *)smem; /* stage 0: every step consumed, every copy landed */
            consumers_sync();           /* ... and read by both warpgroups */
            if (wgi == 1)
                norm_share<ID, C::NT, J0>(acc, tx, tid % 128);
            consumers_sync();
            if (wgi == 0)
                norm_rows<ID, 0, C::NT, J0, CG>(acc, tx, ep.partial, B, colblocks, row, tid % 128, t);
            else
                norm_rows<ID, 1, C::NT, J0, CG>(acc, tx, ep.partial, B, colblocks, row, tid % 128, t);
        }
        if (ep.mode != kEpiNorm || (int)blockIdx.x / CG >= colblocks || m0 >= B) /* tiles past the output: done */
            return;
        /* count this tile into its row block, then wait (bounded) for the rest (tile_arrive): the
         * barrier orders every consumer's partials before thread 0's releasing add, and the one
         * after it thread 0's acquire before every consumer's reads of the others' partials */
        int *flag = (int *)(smem + STG); /* stage 1 */
        int *const count = ep.arrive + blockIdx.y, *const state = ep.state + (size_t)blockIdx.y * gridDim.x;
        consumers_sync();
        if (tid == 0)
            *flag = tile_arrive(count, colblocks * CG, state + blockIdx.x, ep.wait_ns);
        consumers_sync();
        const int f = *flag;
        if (f == kTileGaveUp) { /* o for the last tile to scale */
            store_out<float, C::JW, C::NT>(acc, ep.o, B, No, j0, row, n0, t);
            consumers_sync();
            if (tid == 0) {
                __threadfence();
                st_release_gpu(state + blockIdx.x, kTileGaveUp);
            }
            return;
        }
        constexpr int G = AlgebraTraits<ID>::G;
        float *inv = (float *)(smem + STG + 128);
        float(*rg)[G] = (float(*)[G])(inv + 64 * D);
        norm_inv<ID>(inv, rg, ep.partial, f == kTileLast ? ep.norms : nullptr, B, No, colblocks, m0, tid);
        each_pair<C::JW, C::NT>(acc, [&](int jj, int, int h, float &v0, float &v1) {
            const float sc = inv[(16 * warp + g + 8 * h) * D + j0 + jj];
            v0 *= sc, v1 *= sc;
        });
        store_tile(); /* the ring's stages 0 and 2 are idle since the barriers above */
        if (f != kTileLast)
            return;
        /* the last tile: every other tile has arrived, so each says within its bounded wait whether
         * it scaled itself; scale those that gave up (tile x: column block x / CG, group x % CG).
         * The states are read at once, a thread a tile, into sv (after rg): one after another, a
         * read and two barriers each, they held the last tile of every row block 7 L2 round trips
         * at Cl(3,0)'s 8 tiles a row block. The fix-ups run in tile order as before. */
        const int n = colblocks * CG;
        int *sv = (int *)(&rg[0][0] + 64 * G);
        static_assert(128 + (64 * D + 64 * G + kConsumerThreads) * 4 <= STG, "flag, inv, rg and sv in stage 1");
        for (int x0 = 0; x0 < n; x0 += kConsumerThreads) {
            if (x0 + tid < n)
                sv[tid] = x0 + tid == (int)blockIdx.x ? kTileWhole : tile_state(state + x0 + tid);
            consumers_sync();
            for (int i = 0; i < min(kConsumerThreads, n - x0); ++i) {
                if (sv[i] != kTileGaveUp)
                    continue;
                const int x = x0 + i, c0 = x / CG * C::NT, a0 = x % CG * C::DG;
                if (No % 4 == 0)
                    norm_fixup<ID, C::NT, 4, C::DG>(ep.o, ep.out, inv, B, No, m0, c0, a0, tid);
                else
                    norm_fixup<ID, C::NT, 1, C::DG>(ep.o, ep.out, inv, B, No, m0, c0, a0, tid);
            }
            consumers_sync(); /* sv read by all before the next round rewrites it */
        }
    };
    if constexpr (CG == 1) {
        consume(std::integral_constant<int, 0>{});
    } else {
        static_assert(CG == 2, "one or two component groups");
        if (grp == 0)
            consume(std::integral_constant<int, 0>{});
        else
            consume(std::integral_constant<int, 1>{});
    }
}

} // namespace sm90
} // namespace fcgp
} // namespace fc
