/* fcgp_wgmma_gw.cuh — the Hopper (sm_90a) FCGP weight gradient on warpgroup MMA, device side:
 * gW[p] (N_in x N_out) = sum_j z_{j,p}^T go_j, K = the batch.
 *
 * The forward's machinery, transposed: prepasses write xg^T, yg^T (in stage order, xgt_offset)
 * and go^T (in step panels, got_offset) (gelu_transpose; go_transpose of fcgp_sm90a.cu, which
 * also applies the norm's backward), so that an xg^T tile (64 rows of N_in x 32 bytes of batch x
 * D components) has the layout of the forward's x tile: load_frags and form_pair give the A
 * fragments of z_{j,p}^T unchanged, and the batch orders of xg^T and go^T agree on every K
 * position (xgt_row, got_row). go_j^T's tile is the K-major B operand (32-byte swizzle, as the
 * forward's W^T; go^T's panels hold it already swizzled).
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
 * One block an SM works through the tiles in rounds (fcgp_gw_sched.h): whole tiles while they
 * fill a round, then the rest cut into segments of the batch whose sums the last segment's block
 * adds in a fixed order, so each tile is written once, deterministically, with no separate
 * reduction. The backward may run in batch chunks: a later chunk adds the fp32 sum of the earlier
 * ones (kept in grad_weight when it is fp32, else in a weight-sized stash).
 */
#pragma once

#include "fcgp_gw_sched.h"
#include "fcgp_wgmma.cuh"
#include "pdl.cuh"
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

/* KK: sub-steps of 32 bytes of batch (one wgmma's K) a ring step, each with its own tiles side by
 * side in the stage: one full-barrier wait, release and final wgmma wait a step however many
 * sub-steps it holds. */
template <int ID, int MODE, int KK = 1> struct GwCfg {
    static constexpr int D = AlgebraTraits<ID>::D, P = AlgebraTraits<ID>::P;
    static constexpr int GROUPS = D == 8 ? 2 : 1, PG = P / GROUPS, PH = PG / 2, XC = D / GROUPS;
    static constexpr int BM = 64, NT = 48, THREADS = kSplitThreads; /* a producer warpgroup */
    static constexpr int KS = MODE == kTF32 ? 8 : 16;        /* batch rows a sub-step: 32 bytes */
    static constexpr int KSTEP = KS * KK;                     /* batch rows a ring step */
    static constexpr int XB = XC * BM * 32, YB = D * BM * 32; /* the group's xg^T, all of yg^T */
    static constexpr int GB = D * NT * 32;                    /* go^T tiles */
    static constexpr int SUB = XB + YB + GB, STAGE = KK * SUB; /* a sub-step's tiles; a step's */
    static constexpr int STAGES = stages_that_fit(STAGE, 5);
    static constexpr int SMEM = STAGES * STAGE + 1024 + 2 * STAGES * 8;
    static_assert(x_split_by_paths<ID>(GROUPS), "a group's paths read only its x components");
    static_assert((NT * 32) % 256 == 0 && XB % 256 == 0 && SUB % 256 == 0, "swizzle tiles aligned");
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

/* One warpgroup's step (path group GR) over the KK sub-steps of a stage: for each, this thread's
 * x, y fragments, then path by path the A fragments of the path's pairs and their wgmmas on the
 * go_j^T tiles. A path has only ~2 pairs of narrow (N = NT) wgmmas, too little work to wait on
 * alone: the fragments alternate between two register sets, so a path forms its fragments while
 * the previous path's wgmmas run (also across sub-steps), and waits (wait<1>) only for that one. */
template <int ID, int MODE, int KK, int GR, int WG, bool RN = false, bool LDS = true>
__device__ __forceinline__ void gw_step(float (&acc)[GwCfg<ID, MODE, KK>::PH][GwCfg<ID, MODE, KK>::NT / 2],
                                        const unsigned char *buf, int r0, int t)
{
    using C = GwCfg<ID, MODE, KK>;
    constexpr int D = C::D, P0 = GR * C::PG + WG * C::PH, NQ = max_path_pairs<ID, P0, C::PH>();
    uint32_t a[2][NQ][4];
    Frags<D> f; /* x's components outside the group stay unset: its pairs never read them */
    static_for<KK>([&](auto kk) {
        constexpr int K = decltype(kk)::value;
        const unsigned char *sub = buf + K * C::SUB;
        load_frags<D, C::BM, GR * C::XC, C::XC, LDS>(f, sub, sub + C::XB, r0, t);
        const uint32_t go_smem = smem_u32(sub + C::XB + C::YB);
        static_for<C::PH>([&](auto pl) {
            constexpr int L = decltype(pl)::value, I = K * C::PH + L, p = P0 + L, nq = path_pairs<ID>(p), b = I % 2;
            static_for<nq>([&](auto u) { form_pair<ID, MODE, path_pair<ID>(p, decltype(u)::value), RN, false>(a[b][decltype(u)::value], f); });
            wg::fence();
            static_for<nq>([&](auto u) {
                constexpr int j = Plans<ID>::pair.pj[path_pair<ID>(p, decltype(u)::value)];
                wg::MmaRS<MODE, C::NT>::run(acc[L], a[b][decltype(u)::value],
                                            wg::desc_kmajor_swz<32>(go_smem + j * C::NT * 32), 1);
            });
            wg::commit();
            if constexpr (I > 0) {
                wg::wait<1>();                /* the path before is done ... */
                wg::fence_operands(a[1 - b]); /* ... and only now may its registers be reused */
            }
        });
    });
    wg::wait<0>();
    wg::fence_operands(a[(KK * C::PH - 1) % 2]);
}

/* A batch segment's hand-off (fcgp_gw_sched.h) over this consumer thread's accumulator pairs:
 * pairs(f) calls f(v0, v1, i, ...) for each pair, i its place in a slot of slot_floats (float2 i
 * 256 + tid). A segment before the last writes its sum to its slot and raises its flag (true: the
 * piece is done); the last waits for the earlier ones' flags and adds their slots in segment
 * order, so the sum's order is fixed. gw_tma_kernel's and gw_pseq_kernel's. */
template <class Pairs>
__device__ __forceinline__ bool gw_segment(const GwUnit &w, float *slots, size_t slot_floats, int *flags, int epoch,
                                           int tid, Pairs &&pairs)
{
    if (w.put >= 0) { /* a segment before the last: its sum to its slot, then its flag */
        float2 *dst = (float2 *)(slots + (size_t)w.put * slot_floats);
        pairs([&](float &v0, float &v1, int i, auto...) { __stcg(dst + i * 256 + tid, make_float2(v0, v1)); });
        consumers_sync();
        if (tid == 0) {
            __threadfence();
            st_release_gpu(flags + w.put, epoch);
        }
        return true;
    }
    if (w.nget > 0) { /* the last segment: the earlier ones' sums, in segment order */
        if (tid == 0)
            for (int q = 0; q < w.nget; ++q)
                while (ld_acquire_gpu(flags + w.get + q) < epoch)
                    __nanosleep(100);
        consumers_sync();
        for (int q = 0; q < w.nget; ++q) {
            const float2 *src = (const float2 *)(slots + (size_t)(w.get + q) * slot_floats);
            pairs([&](float &v0, float &v1, int i, auto...) {
                const float2 v = __ldcg(src + i * 256 + tid);
                v0 += v.x, v1 += v.y;
            });
        }
    }
    return false;
}

/* xg^T, yg^T in stage order: for each component, the tiles gW's ring brings, one after another.
 * Tile (s, nb) holds rows [64 nb, 64 nb + 64) of N_in (past N_in: zeros) x the KS batch
 * positions of step s, a row's KS positions contiguous (32 bytes), so that a stage's tile of a
 * component is 2 KB of consecutive memory: the copy engine brings it in 256-byte rows (8 of
 * the tile's rows), where boxes of the transposed array's 32-byte rows ran at ~60% of the
 * rate (NOTES_FCGP.md sessions 19 and 21). Element offset of (component c, row n, batch
 * position q) for NB = ceil(N_in / 64) row blocks, components dcs apart. */
template <int MODE>
__host__ __device__ constexpr int64_t xgt_offset(int64_t dcs, int64_t NB, int c, int64_t n, int64_t q)
{
    constexpr int KS = MODE == kTF32 ? 8 : 16;
    return c * dcs + ((q / KS) * NB + n / 64) * (64 * KS) + (n % 64) * KS + q % KS;
}

/* One 16-byte global store (p 16-byte aligned). Through a uint4 pointer nvcc split
 * gelu_transpose's stores into four 4-byte ones (its PTX, session 31). */
__device__ __forceinline__ void stg_b128(void *p, const uint32_t (&w)[4])
{
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(__cvta_generic_to_global(p)), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
}

/* gelu_transpose's tile width in N_in: 32, or in bf16 the whole 64-row block of xgt_offset, so
 * that a block moves as many bytes as in fp32 with as many loads (two elements each) */
__host__ __device__ constexpr int gelu_transpose_cols(int mode) { return mode == kBF16 ? 64 : 32; }

/* xg^T, yg^T (xgt_offset) of one batch chunk from x (D, rows of B, N_in; component stride cs),
 * MVGELU applied when gate (SPEC: xg_i = x_i Phi(x_0)), in the operand type, the batch inside
 * each block of kBatchBlock in gW's order (xgt_row); components dcs apart (NB 64 Bp, or wider
 * where it lies in grad_x; 16-byte aligned, dcs a multiple of 16 bytes); blockIdx.z picks x ->
 * xgt or y -> ygt. A TC x 32 tile (rows of N_in x batch positions, TC = gelu_transpose_cols) of
 * all D components through shared memory: every thread's D x 4 loads go out before the one
 * barrier (one component a barrier, as up to session 21, left 4 loads a thread in flight: 122 us
 * against 85 at the copy rate, Cl(3,0) tf32), along x's rows; the 16-byte stores go along the
 * stage-order runs (TC rows x KS positions contiguous a step); rows from N_in to NB 64 and
 * positions from B to Bp get zeros. bf16 stages the rounded values (the same bits as rounding
 * at the store) two columns a thread, as one 4-byte load where PAIR (N_in even, x and y 4-byte
 * aligned); 32 columns of 2-byte loads ran at about 1.8 TB/s against 2.7 in fp32 (NOTES_FCGP.md
 * session 27). */
template <int MODE, int D, bool PAIR = false>
__global__ void __launch_bounds__(256) gelu_transpose(const Elem<MODE> *__restrict__ x, const Elem<MODE> *__restrict__ y,
                                                       Elem<MODE> *__restrict__ xgt, Elem<MODE> *__restrict__ ygt,
                                                       int64_t B, int64_t Ni, int64_t Bp, int64_t cs, int64_t dcs,
                                                       int gate)
{
    using E = Elem<MODE>;
    constexpr int KS = MODE == kTF32 ? 8 : 16, V = 16 / sizeof(E), TC = gelu_transpose_cols(MODE), CW = TC / 32;
    constexpr int PIECES = 32 * TC / V; /* a component's */
    using S = typename std::conditional<MODE == kBF16, E, float>::type; /* what the tile holds */
    static_assert(32 % kBatchBlock == 0 && kBatchBlock % KS == 0 && KS % V == 0, "a tile holds whole blocks, steps, pieces");
    static_assert(!PAIR || MODE == kBF16, "pairs of bf16 columns");
    __shared__ S tile[D][32][TC + CW]; /* a row 33 words: the staging stores hit 32 banks */
    pdl::free_start(); /* it writes only this chunk's xg^T, yg^T, which nothing reads until gW */
    const E *src = blockIdx.z ? y : x;
    E *dst = blockIdx.z ? ygt : xgt;
    const int64_t n0 = (int64_t)blockIdx.x * TC, b0 = (int64_t)blockIdx.y * 32, NB = (Ni + 63) / 64;
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    if constexpr (MODE == kBF16) { /* two columns a thread, kept packed until staged (64 registers at D 8) */
        __nv_bfloat162 raw[D][4];
#pragma unroll
        for (int c = 0; c < D; ++c)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int64_t b = b0 + ty + 8 * r, n = n0 + 2 * tx;
                const E *p = src + c * cs + b * Ni + n;
                const E zero = __float2bfloat16(0.f);
                if constexpr (PAIR) /* N_in even: both columns or neither */
                    raw[c][r] = b < B && n < Ni ? *(const __nv_bfloat162 *)p : __halves2bfloat162(zero, zero);
                else
                    raw[c][r] = __halves2bfloat162(b < B && n < Ni ? p[0] : zero, b < B && n + 1 < Ni ? p[1] : zero);
            }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            /* the gates from component 0, the short erf of 2-byte data (gate_of), as fwd_prep's */
            const float2 x0 = __bfloat1622float2(raw[0][r]);
            const float p0 = gate ? gate_of<E>(x0.x) : 1.f, p1 = gate ? gate_of<E>(x0.y) : 1.f;
#pragma unroll
            for (int c = 0; c < D; ++c) {
                const float2 f = __bfloat1622float2(raw[c][r]);
                *(__nv_bfloat162 *)&tile[c][ty + 8 * r][2 * tx] = __floats2bfloat162_rn(f.x * p0, f.y * p1);
            }
        }
    } else {
        float v[D][4];
#pragma unroll
        for (int c = 0; c < D; ++c)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int64_t b = b0 + ty + 8 * r, n = n0 + tx;
                v[c][r] = b < B && n < Ni ? load<E>(src[c * cs + b * Ni + n]) : 0.f;
            }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const float ph = gate ? gelu_gate(v[0][r]) : 1.f; /* the gate from component 0 */
#pragma unroll
            for (int c = 0; c < D; ++c)
                tile[c][ty + 8 * r][tx] = v[c][r] * ph;
        }
    }
    __syncthreads();
    /* 16-byte pieces: piece tid of each component holds positions [q0, q0 + V) of row nl of the
     * tile's step i0 / (TC KS) (i0 = tid V), so a warp stores 512 contiguous bytes. The piece's
     * place and its V tile rows (gW's batch order, xgt_row) are the same for every component:
     * formed once, where forming them a component was most of the kernel's instructions (its
     * integer pipe 61% busy under ncu, NOTES_FCGP.md session 31). */
    static_assert(PIECES == 256, "one piece a thread and component");
    const int i0 = threadIdx.x * V, step = i0 / (TC * KS), nl = i0 / KS % TC, q0 = i0 % KS;
    const int64_t q = b0 + step * KS + q0;
    if (q >= Bp) /* zeros from B to Bp: the maps read whole steps; past Bp nothing */
        return;
    int at[V]; /* the piece's elements in a component's tile */
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int pos = step * KS + q0 + k;
        at[k] = (pos / kBatchBlock * kBatchBlock + xgt_row(MODE, pos % kBatchBlock)) * (TC + CW) + nl;
    }
    E *out = dst + xgt_offset<MODE>(dcs, NB, 0, n0 + nl, q);
#pragma unroll
    for (int c = 0; c < D; ++c) {
        const S *tc = &tile[c][0][0];
        uint32_t w[4]; /* the piece's 16 bytes: the staged bits as they are */
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            if constexpr (MODE == kBF16)
                w[u] = pack_bf16x2(tc[at[2 * u]], tc[at[2 * u + 1]]);
            else
                w[u] = __float_as_uint(tc[at[u]]);
        }
        stg_b128(out + c * dcs, w);
    }
}

/* Two adjacent values of the weight gradient in its type, as one store where they are aligned
 * (N_out even). */
template <class T> __device__ __forceinline__ void store_two(T *p, float v0, float v1, bool pair, bool two)
{
    if constexpr (std::is_same<T, float>::value) {
        if (pair) {
            *(float2 *)p = make_float2(v0, v1);
            return;
        }
    } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
        if (pair) {
            *(__nv_bfloat162 *)p = __floats2bfloat162_rn(v0, v1);
            return;
        }
    }
    p[0] = store<T>(v0);
    if (two)
        p[1] = store<T>(v1);
}

/* The weight gradient of one batch chunk, gridDim.x blocks working through the tiles as `sch`
 * says (this file's header, fcgp_gw_sched.h): xmap, ymap over xg^T, yg^T in stage order
 * (xgt_offset: 256-byte rows, 8 a tile, D components; a box is one tile of 8 rows x XC or D
 * components), gomap over go^T's panels (got_offset: 256-byte rows of 8 N_out rows of a step,
 * a step's Nor / 8 of them after another, D components; a box NT / 8 rows x D; a box past a
 * panel's last row reads the next panel's first, only into columns past N_out), of Bp batch
 * positions (a chunk's rows padded to whole blocks: the block order may place a row past the row
 * count; positions of no row hold zeros in both operands). A tile's result, its own batch sum plus
 * `prev` (the earlier chunks' sum, fp32 (P, N_in, N_out); NULL for the first chunk), goes to
 * `stash` (fp32, the same layout) when later chunks follow, else to gw in its type. slots, flags:
 * the segments' sums and their flags (raised to `epoch`, which grows with the chunk: the flags are
 * zeroed once a backward). One ring runs through all of a block's pieces, so the copies of the
 * next piece are in flight during a piece's epilogue. A producer warpgroup issues the copies, as
 * in the forward (kSplitThreads: two consumer warpgroups of kConsumerRegs registers); the epilogue's
 * barriers span the consumers alone (consumers_sync). */
template <int ID, int MODE, class Tout, int KK>
__global__ void __launch_bounds__(kSplitThreads, 1)
    gw_tma_kernel(const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap ymap,
                  const __grid_constant__ CUtensorMap gomap, const GwSched sch, float *slots, int *flags, int epoch,
                  const float *prev, float *stash, Tout *gw, int Ni, int No)
{
    using C = GwCfg<ID, MODE, KK>;
    constexpr int S = C::STAGES, SLOT = 256 * C::PH * C::NT / 2; /* floats a slot */
    static_assert(S >= 2, "two stages fit");
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *smem = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, g = (tid % 32) / 4, t = tid % 4;
    pdl::waiting(); /* go^T, xg^T and yg^T of the chunk, and the earlier chunks' sum */
    const int nx = (No + C::NT - 1) / C::NT * C::GROUPS, nb = (Ni + C::BM - 1) / C::BM, U = sch.units(), b = blockIdx.x;
    const int nog = (No + 7) / 8; /* go^T's row groups a panel (got_offset) */
    tma::Ring<S> ring((uint64_t *)(smem + S * C::STAGE), sch.steps(b), kConsumerThreads);
    /* the producer's copy cursor: the next piece's index, and of the piece being issued its next
     * and end batch positions and its tile's coordinates (computed once a piece) */
    int iu = 0, ik = 0, ik1 = 0, ix = 0, im = 0, in = 0;
    auto issue = [&](int s, uint64_t *bar) { /* the producer: the next step into buffer s % S */
        while (ik >= ik1) {
            const GwUnit w = sch.unit(b, iu++);
            if (w.tile < 0)
                continue;
            const int bx = w.tile % nx;
            ik = w.k0 * C::KSTEP, ik1 = w.k1 * C::KSTEP;
            ix = bx % C::GROUPS * C::XC, im = bx / C::GROUPS * C::NT, in = w.tile / nx * C::BM;
        }
        unsigned char *buf = smem + (s % S) * C::STAGE;
        tma::mbar_arrive_expect_tx(bar, C::STAGE);
#pragma unroll
        for (int kk = 0; kk < KK; ++kk, buf += C::SUB) { /* positions past Bp: zeros */
            const int rg = ((ik / C::KS + kk) * nb + in / C::BM) * 8; /* the tile's first 256-byte row */
            tma::load_3d(buf, &xmap, 0, rg, ix, bar);
            tma::load_3d(buf + C::XB, &ymap, 0, rg, 0, bar);
            tma::load_3d(buf + C::XB + C::YB, &gomap, 0, (ik / C::KS + kk) * nog + im / 8, 0, bar);
        }
        ik += C::KSTEP;
    };
    if (wgi == 2) { /* the producer warpgroup: one thread issues every step of every piece */
        wg::setmaxnreg_dec<kProducerRegs>();
        if (tid == 256)
            ring.produce(issue);
        return;
    }
    wg::setmaxnreg_inc<kConsumerRegs>();

    int s0 = 0;
    for (int u = 0; u < U; ++u) {
        const GwUnit w = sch.unit(b, u);
        if (w.tile < 0)
            continue;
        const int bx = w.tile % nx, grp = bx % C::GROUPS, m0 = bx / C::GROUPS * C::NT, n0 = w.tile / nx * C::BM;
        float acc[C::PH][C::NT / 2];
        zero_all(acc);
        /* the step of path group GR, a compile-time constant (its paths index the fragments) */
        auto step = [&](auto gr, const unsigned char *buf) {
            constexpr int GR = decltype(gr)::value;
            if (wgi == 0)
                gw_step<ID, MODE, KK, GR, 0>(acc, buf, 16 * warp + g, t);
            else
                gw_step<ID, MODE, KK, GR, 1>(acc, buf, 16 * warp + g, t);
        };
        const int n = w.k1 - w.k0;
        ring.consume_fed(s0, s0 + n, [&](int s) {
            const unsigned char *buf = smem + (s % S) * C::STAGE;
            if constexpr (C::GROUPS == 1)
                step(std::integral_constant<int, 0>{}, buf);
            else if (grp == 0)
                step(std::integral_constant<int, 0>{}, buf);
            else
                step(std::integral_constant<int, 1>{}, buf);
        });
        s0 += n;
#pragma unroll
        for (int pl = 0; pl < C::PH; ++pl)
            wg::fence_operands(acc[pl]);

        /* acc[pl][4c + 2h + e]: path grp PG + wgi PH + pl, row n0 + 16 warp + g + 8h, column
         * m0 + 8c + 2t + e; in a slot, value pair i of thread tid at float2 i 256 + tid */
        auto pairs = [&](auto &&f) { /* i: the pair's place in a segment slot, 256 threads apart */
            each_pair<C::PH, C::NT>(acc, [&](int pl, int c, int h, float &v0, float &v1) {
                f(v0, v1, (pl * (C::NT / 8) + c) * 2 + h, pl, c, h);
            });
        };
        if (gw_segment(w, slots, SLOT, flags, epoch, tid, pairs))
            continue; /* a segment before the last: handed off */
        /* the tile: the earlier chunks' sum added, to the stash or to gw */
        auto each = [&](auto &&f) {
            pairs([&](float &v0, float &v1, int, int pl, int c, int h) {
                const int nn = n0 + 16 * warp + g + 8 * h, m = m0 + 8 * c + 2 * t;
                if (nn < Ni && m < No)
                    f(v0, v1, ((size_t)(grp * C::PG + wgi * C::PH + pl) * Ni + nn) * No + m, m + 1 < No);
            });
        };
        const bool pair = No % 2 == 0;
        if (prev) /* every earlier value first, so that the loads overlap (no store between them) */
            each([&](float &v0, float &v1, size_t o, bool two) {
                const float2 old = pair ? *(const float2 *)(prev + o) : make_float2(prev[o], two ? prev[o + 1] : 0.f);
                v0 += old.x, v1 += old.y;
            });
        if (stash)
            each([&](float &v0, float &v1, size_t o, bool two) { store_two(stash + o, v0, v1, pair, two); });
        else
            each([&](float &v0, float &v1, size_t o, bool two) { store_two(gw + o, v0, v1, pair, two); });
    }
}

} // namespace sm90
} // namespace fcgp
} // namespace fc
