/* sgp_kernels.cuh — fused MVGELU -> weighted geometric product -> grade RMSNorm on CUDA.
 *
 * Shapes: x, y, out, grad_* (D, B, N) contiguous; weight (N, P); norms (B, G) in the
 * compute type; workspace (S, P, N) compute-type weight-gradient partials, S = grid blocks
 * (feature-minor, so a warp's writes of one path are coalesced).
 *
 * Design: a row group (blockDim.x threads, a whole number of warps) owns whole rows; each
 * thread holds F consecutive features of every component in registers, so the grade
 * norms are reduced on chip (fixed-order warp tree, then warps in order) before the output
 * is written once: forward reads x, y, weight once and writes out once, with no atomics.
 * Backward recomputes o (cheaper than saving it), reduces the norm's dot products the same
 * way, and accumulates its weight-gradient partial across the rows a block visits; a
 * second kernel sums the S partials in fixed order, so results are bitwise reproducible.
 *
 * Modes (a template parameter, so no kernel carries code for another mode's memory paths):
 *   kResident   rows fit a row group: x, y (and grad_out) stream into a ring of shared-memory
 *               stages with cp.async (two by default: the next rows land while these are
 *               computed), the weights and the backward's weight-gradient sums live in
 *               shared memory; every access is 32-bit shared addressing.
 *   kLongShared rows longer than a row group, or without a stage piece (odd N in 2-byte
 *               types): inputs read from global memory (twice when a row spans several
 *               chunks, and always in backward), the weights and the backward's
 *               weight-gradient sums in shared memory.
 *   kLong       anything else (very long rows): global weights, and the backward's block
 *               slot in global memory as its accumulator. All offsets are 64-bit.
 *
 * The row groups of a block synchronise only among themselves (named barrier 1 + y), so a
 * block is several independent rows sharing one staged copy of the weights.
 *
 * Features a thread (F) are a template parameter; the resident backward of 2-byte data comes
 * in two widths (bwd_features), and the launch picks one per call (sgp_launch.cuh).
 */
#pragma once

#include <cstdint>
#include <type_traits>

#include "algebra_traits.cuh"
#include "common.cuh"

namespace fc {
namespace sgp {

constexpr int kBlockThreads = 256; /* per block when rows are short: several rows per block */
constexpr int kMaxRowThreads = 1024;
constexpr int kMaxRowGroups = 8; /* rows a block: named barriers 1 .. 8, one a row group */
constexpr int kMaxStages = 4;    /* input stages of the resident kernels: up to 3 rows ahead */
constexpr int kDefaultStages = 2; /* more measured no faster on the H100 (benchmarks/NOTES.md v3.4) */

enum Mode { kResident = 0, kLongShared = 1, kLong = 2 };

/* Features per thread: 16-byte loads for fp32, and for bf16/fp16 at D <= 4 (8 bytes above) in forward;
 * backward holds x, y, grad_out, their gradients and the weight partial, so fewer. */
template <int D, class T> constexpr int fwd_features()
{
    return sizeof(T) == 8 ? 2 : sizeof(T) == 2 && D <= 4 ? 8 : (D <= 8 ? 4 : 2);
}
/* The resident backward of 2-byte data also comes twice as wide (4 at D <= 4, 2 at D = 8):
 * half the threads a row, so twice the rows a multiprocessor (one row's reduction barrier no
 * longer stalls every warp of it) and half the row reduction a feature (benchmarks/NOTES.md
 * v3.6); the launch takes it unless the narrow one keeps more warps resident. The long modes
 * keep the narrow width (the wide one would spill). */
template <int D, class T, int MODE> constexpr int bwd_features()
{
    constexpr int narrow = D <= 4 && sizeof(T) < 8 ? 2 : 1;
    return MODE == kResident && sizeof(T) == 2 && D <= 8 ? 2 * narrow : narrow;
}
/* Backward threads a block may have: 512 caps registers at 128 (spill-free for 4- and 2-byte
 * data up to D = 8), so rows of 512 features stay resident with 16 warps a multiprocessor;
 * 16 components need 168 (384 threads). */
template <int D, class T> constexpr int bwd_block_bound() { return sizeof(T) == 8 ? 256 : (D <= 8 ? 512 : 384); }
/* Forward: 512 threads cap registers at 128 (16 components: 384, 168), so two 256-thread blocks share a multiprocessor
 * (ptxas would otherwise keep all F x P staged weights in registers, 180-210 of them). */
template <int D, class T> constexpr int fwd_block_bound() { return sizeof(T) == 8 ? 256 : (D <= 8 ? 512 : 384); }

template <class T, int F> struct alignas(sizeof(T) * F) Vec {
    T v[F];
};

/* Load F features of one component row starting at n0 (zeros past N). */
template <class T, int F, class C>
__device__ __forceinline__ void load_chunk(const T *__restrict__ p, int64_t n0, int64_t N, bool vec, C (&out)[F])
{
    if (vec && n0 + F <= N) {
        Vec<T, F> v = *reinterpret_cast<const Vec<T, F> *>(p + n0); /* read-only, __restrict__: LDG.128 */
#pragma unroll
        for (int f = 0; f < F; ++f)
            out[f] = load<T>(v.v[f]);
    } else {
#pragma unroll
        for (int f = 0; f < F; ++f)
            out[f] = n0 + f < N ? load<T>(p[n0 + f]) : C(0);
    }
}

template <class T, int F, class C>
__device__ __forceinline__ void store_chunk(T *__restrict__ p, int64_t n0, int64_t N, bool vec, const C (&in)[F])
{
    if (vec && n0 + F <= N) {
        Vec<T, F> v;
#pragma unroll
        for (int f = 0; f < F; ++f)
            v.v[f] = store<T>(in[f]);
        *reinterpret_cast<Vec<T, F> *>(p + n0) = v;
    } else {
#pragma unroll
        for (int f = 0; f < F; ++f)
            if (n0 + f < N)
                p[n0 + f] = store<T>(in[f]);
    }
}

/* F features of one component row from a shared stage (padding past N holds zeros). */
template <class T, int F, class C> __device__ __forceinline__ void load_staged(const T *p, C (&out)[F])
{
    const Vec<T, F> v = *reinterpret_cast<const Vec<T, F> *>(p);
#pragma unroll
    for (int f = 0; f < F; ++f)
        out[f] = load<T>(v.v[f]);
}

/* Asynchronous global -> shared copies (cp.async, sm_80+): the next rows of x and y stream
 * into shared memory while this row is computed, without holding registers. Each thread
 * copies and later reads only its own slots, so a wait_group (no barrier) orders them. */
template <int BYTES> __device__ __forceinline__ void cp_async(void *dst, const void *src)
{
    static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned d = smem_u32(dst);
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(src), "n"(BYTES) : "memory");
#else
    struct alignas(BYTES) Raw {
        unsigned char b[BYTES];
    };
    *static_cast<Raw *>(dst) = *static_cast<const Raw *>(src);
#endif
}
__device__ __forceinline__ void cp_async_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
/* wait_group takes an immediate: the stage count is a launch parameter, so switch */
__device__ __forceinline__ void cp_async_wait_upto(int pending)
{
    static_assert(kMaxStages == 4, "one case per pending count 0 .. kMaxStages - 1");
    switch (pending) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    default: cp_async_wait<3>(); break;
    }
}

/* The terms ordered by path, then by output component j: the backward loads each weight
 * once and finishes each path's weight-gradient sum before the next path starts (two live
 * registers instead of 2P), and the terms of one (path, j) pair share w_p and go_j, so
 * their products are formed once a pair: o_j += w_p q and grad w_p += go_j q with
 * q = sum of sign x_i y_k over the pair's terms, grad x and grad y through h = w_p go_j
 * (T + PJ multiplies instead of 2T for the product, 3T + 2PJ instead of 5T for its
 * gradients; PJ = 14, 44, 108, 128 distinct pairs against T = 16, 64, 192, 256). */
template <int ALG> struct PathOrder {
    using A = AlgebraTraits<ALG>;
    struct Order {
        int term[FC_MAX_T];
    };
    __host__ __device__ static constexpr Order make()
    {
        Order o{};
        int n = 0;
        for (int p = 0; p < A::P; ++p)
            for (int j = 0; j < A::D; ++j)
                for (int t = 0; t < A::T; ++t)
                    if (A::table.term[t].path == p && A::table.term[t].j == j)
                        o.term[n++] = t;
        return o;
    }
    static constexpr Order order = make();
    __host__ __device__ static constexpr const fc_term &at(int u) { return A::table.term[order.term[u]]; }
    __host__ __device__ static constexpr bool first(int u) { return u == 0 || at(u - 1).path != at(u).path; }
    __host__ __device__ static constexpr bool last(int u) { return u + 1 == A::T || at(u + 1).path != at(u).path; }
    /* the first and last term of a (path, j) pair */
    __host__ __device__ static constexpr bool first_pj(int u) { return first(u) || at(u - 1).j != at(u).j; }
    __host__ __device__ static constexpr bool last_pj(int u) { return last(u) || at(u + 1).j != at(u).j; }
};

/* A row of P values in shared memory padded to PW = E x (an odd number) >= P, E the
 * elements of one vector load (16 bytes for 4- and 8-byte values, 8 for 2-byte ones): a
 * thread reads its row with P / E vector loads, and a warp reading one vector at 32
 * consecutive rows (a stride of an odd number of vectors) hits every bank once per phase. */
template <class V> __host__ __device__ constexpr int path_vec() { return sizeof(V) == 2 ? 4 : 16 / (int)sizeof(V); }
template <int P, class V> __host__ __device__ constexpr int padded_paths()
{
    constexpr int E = path_vec<V>(), m = (P + E - 1) / E;
    return E * (m % 2 ? m : m + 1);
}

/* The type the weights are staged in: the compute type (2-byte weights converted once a
 * block, not at every use, and no conversion instructions in the issue-bound loops) in
 * backward and, for 2-byte data, in the forward at D <= 4; the forward at D > 4 keeps T,
 * as twice the shared memory cost it more than the conversions (bf16 Cl(3,0) 8192x1024:
 * 80% -> 71% of copy). So does the backward of 2-byte rows of eight components at 2
 * features a thread: with float weights a row of 1024 and two stages would not fit. */
template <class T, bool BWD, int D, int F>
using Staged = std::conditional_t<BWD ? !(sizeof(T) == 2 && D >= 8 && F >= 2) : D <= 4, typename Compute<T>::type, T>;

/* Where a thread's weights come from: the block's staged copy ws ([L][PW] of W; column
 * col = ch * tx * F + f * tx + thread for feature ch * tx * F + thread * F + f), or the
 * (N, P) rows in global memory (kLong; features past N clamped: they compute on zeros and
 * are not stored). */
template <int MODE, class T, int P, class W = T> struct Weights {
    using C = typename Compute<T>::type;
    static constexpr int PW = padded_paths<P, W>(), E = path_vec<W>();
    const T *__restrict__ w;
    const W *ws;
    int64_t N;
    /* paths p0 .. p0 + E - 1 (p0 a multiple of E; values past P are padding) of column col */
    __device__ __forceinline__ void vec(int p0, int col, int64_t n, C (&out)[E]) const
    {
        if constexpr (MODE == kLong) {
            const int64_t r = (n < N ? n : N - 1) * P;
#pragma unroll
            for (int e = 0; e < E; ++e)
                out[e] = p0 + e < P ? load<T>(w[r + p0 + e]) : C(0);
        } else {
            const Vec<W, E> v = *reinterpret_cast<const Vec<W, E> *>(ws + col * PW + p0);
#pragma unroll
            for (int e = 0; e < E; ++e)
                out[e] = load<W>(v.v[e]);
        }
    }
    /* all P weights of column col */
    __device__ __forceinline__ void row(int col, int64_t n, C (&out)[P]) const
    {
#pragma unroll
        for (int p0 = 0; p0 < P; p0 += E) {
            C v[E];
            vec(p0, col, n, v);
#pragma unroll
            for (int e = 0; e < E; ++e)
                if (p0 + e < P)
                    out[p0 + e] = v[e];
        }
    }
};

/* The per-chunk state: raw x and y (the gate derivative needs x), their gates, o. Every
 * register array is indexed through static_for, never by a run-time value. */
template <int ALG, class T, int F> struct Chunk {
    using A = AlgebraTraits<ALG>;
    using C = typename Compute<T>::type;
    static constexpr int D = A::D, G = A::G, P = A::P;
    C x[D][F], y[D][F], gx[F], gy[F], o[D][F];

    /* gate = 0: the plain product (Phi taken as 1) */
    __device__ __forceinline__ void gates(int gate)
    {
#pragma unroll
        for (int f = 0; f < F; ++f) {
            gx[f] = gate ? gate_of<T>(x[0][f]) : C(1);
            gy[f] = gate ? gate_of<T>(y[0][f]) : C(1);
        }
    }

    __device__ __forceinline__ void load_inputs(const T *x_, const T *y_, int64_t BN, int64_t row, int64_t n0,
                                                int64_t N, bool vec, int gate)
    {
#pragma unroll
        for (int i = 0; i < D; ++i) {
            load_chunk<T, F>(x_ + i * BN + row, n0, N, vec, x[i]);
            load_chunk<T, F>(y_ + i * BN + row, n0, N, vec, y[i]);
        }
        gates(gate);
    }

    /* From a shared stage: st points at this thread's features of x's component 0, S is the
     * component stride; y follows x's D components. Padding past N holds zeros. */
    __device__ __forceinline__ void load_stage_values(const T *st, int S)
    {
#pragma unroll
        for (int i = 0; i < D; ++i) {
            load_staged<T, F>(st + i * S, x[i]);
            load_staged<T, F>(st + (D + i) * S, y[i]);
        }
    }
    __device__ __forceinline__ void load_stage(const T *st, int S, int gate)
    {
        load_stage_values(st, S);
        gates(gate);
    }

    /* o_j = Phi(x0) Phi(y0) sum over terms sign * w[n, path] * x_i * y_k, a (path, j) pair
     * at a time (PathOrder); col0: this thread's weight column of f = 0 (f adds f * blockDim.x) */
    template <int MODE, class W>
    __device__ __forceinline__ void product(const Weights<MODE, T, P, W> &wt, int col0, int64_t n0)
    {
        using Order = PathOrder<ALG>;
#pragma unroll
        for (int f = 0; f < F; ++f) {
            C wr[P];
            wt.row(col0 + f * (int)blockDim.x, n0 + f, wr);
#pragma unroll
            for (int j = 0; j < D; ++j)
                o[j][f] = 0;
            C q = 0;
            static_for<A::T>([&](auto u) {
                constexpr int U = decltype(u)::value;
                constexpr fc_term e = Order::at(U);
                if constexpr (Order::first_pj(U))
                    q = C(e.sign) * x[e.i][f] * y[e.k][f];
                else
                    q += C(e.sign) * x[e.i][f] * y[e.k][f];
                if constexpr (Order::last_pj(U))
                    o[e.j][f] += wr[e.path] * q;
            });
            const C gg = gx[f] * gy[f];
#pragma unroll
            for (int j = 0; j < D; ++j)
                o[j][f] *= gg;
        }
    }

    /* t[g][f] = sum_{A in g} s_A o_A^2 */
    __device__ __forceinline__ void grade_squares(C (&t)[G][F]) const
    {
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
            for (int f = 0; f < F; ++f)
                t[g][f] = 0;
        static_for<D>([&](auto i) {
            constexpr int a = decltype(i)::value;
            constexpr int g = A::table.grade[a];
            constexpr int s = A::table.grade_sign[a];
#pragma unroll
            for (int f = 0; f < F; ++f)
                t[g][f] += C(s) * o[a][f] * o[a][f];
        });
    }

    /* acc[g] += sum over features of |t_g| */
    __device__ __forceinline__ void add_norm_parts(C (&acc)[G]) const
    {
        C t[G][F];
        grade_squares(t);
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
            for (int f = 0; f < F; ++f)
                acc[g] += fabs(t[g][f]);
    }
};

/* Copy the (N, P) weights into shared memory as [L][PW] in the column order of Weights,
 * zeros past N and past P. Reads are coalesced; done once per block, which then loops over
 * many rows. Chunk by chunk (cs = blockDim.x * F features), so the column of an element
 * takes only divisions by constants (a run-time division by blockDim.x cost ~30
 * instructions an element, most of the block's start-up). Each thread issues U loads before
 * it stores any, so its PW x L / threads elements wait for one or two memory round trips,
 * not one each. Ends with a barrier. */
template <int P, int F, class T, class W>
__device__ __forceinline__ void stage_weights(const T *__restrict__ w, W *ws, int N, int L)
{
    constexpr int U = 16, PW = padded_paths<P, W>();
    const int tx = blockDim.x, nthreads = blockDim.x * blockDim.y, cs = tx * F, per = cs * PW;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    for (int c0 = 0; c0 < L; c0 += cs)
        for (int j0 = tid; j0 < per; j0 += U * nthreads) {
            T v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int j = j0 + u * nthreads, k = j / PW, p = j - k * PW, n = c0 + k;
                v[u] = j < per && n < N && p < P ? w[n * P + p] : store<T>(0.0f);
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int j = j0 + u * nthreads, k = j / PW, p = j - k * PW;
                if (j < per) {
                    /* feature c0 + k is thread k / F's feature k % F: column f * tx + thread */
                    W &dst = ws[(c0 + (k % F) * tx + k / F) * PW + p];
                    if constexpr (std::is_same_v<W, T>)
                        dst = v[u];
                    else
                        dst = load<T>(v[u]);
                }
            }
        }
    __syncthreads();
}

/* Shared memory of a block, in bytes from the start: the norm reduction scratch, then (each
 * 16-byte aligned) the weight-gradient accumulators (backward), the staged weights and the
 * input stages. Offsets of 0 mean absent. L: the padded row length (chunks * blockDim.x *
 * F), E: elements per cp.async piece of the stages, stages: 1 .. kMaxStages, a ring (with
 * S stages the rows of S - 1 later iterations are in flight while one is computed). */
struct Layout {
    size_t acc_off, ws_off, pipe_off, total;
    int L, E, stages;
};

/* Queue row b of x, y (and g when given), each (D, B, N), into a stage laid out [input
 * component][row of the block][L]: thread t copies E-element pieces t * per ... t * per +
 * per - 1, per = max(1, F / E). With E <= F a thread copies exactly the features it reads
 * later, so its own wait_group orders them; with E > F (backward's 16-byte pieces) a
 * barrier must follow the wait. Always commits a group (empty past the last row) so every
 * thread counts groups alike. N % E == 0, the rows E-element aligned. */
template <int D, int F, int E, class T>
__device__ __forceinline__ void prefetch_pieces(T *st, const T *__restrict__ x, const T *__restrict__ y,
                                                const T *__restrict__ g, int64_t BN, int64_t b, int N, int L)
{
    constexpr int per = F >= E ? F / E : 1;
    const int S = (int)blockDim.y * L;
    T *dst = st + (int)threadIdx.y * L;
    const T *xr = x + b * N, *yr = y + b * N, *gr = g ? g + b * N : nullptr;
#pragma unroll
    for (int j = 0; j < per; ++j) {
        const int d = ((int)threadIdx.x * per + j) * E;
        if (d < N) {
#pragma unroll
            for (int i = 0; i < D; ++i) {
                cp_async<E * sizeof(T)>(dst + i * S + d, xr + i * BN + d);
                cp_async<E * sizeof(T)>(dst + (D + i) * S + d, yr + i * BN + d);
                if (gr)
                    cp_async<E * sizeof(T)>(dst + (2 * D + i) * S + d, gr + i * BN + d);
            }
        }
    }
}
template <int D, int F, class T>
__device__ __forceinline__ void prefetch_rows(T *st, const T *__restrict__ x, const T *__restrict__ y,
                                              const T *__restrict__ g, int64_t BN, int64_t b, int64_t B, int N,
                                              const Layout &lay)
{
    constexpr int E16 = 16 / sizeof(T), E4 = sizeof(T) >= 4 ? 1 : 4 / sizeof(T);
    constexpr bool MID = F != E16 && F != E4 && F * sizeof(T) >= 4; /* forward's F-element pieces */
    if (b < B) {
        if (lay.E == E16)
            prefetch_pieces<D, F, E16>(st, x, y, g, BN, b, N, lay.L);
        else if (MID && lay.E == F)
            prefetch_pieces<D, F, MID ? F : E4>(st, x, y, g, BN, b, N, lay.L);
        else
            prefetch_pieces<D, F, E4>(st, x, y, g, BN, b, N, lay.L);
    }
    cp_async_commit();
}

/* Zero the stage padding [N, L) of every row slot once: copies never write there, so reads
 * past N see zeros for the rest of the kernel. K inputs a stage. */
template <class T>
__device__ __forceinline__ void zero_stage_padding(T *st, int rows_total, int N, int L)
{
    for (int r = threadIdx.y; r < rows_total; r += blockDim.y)
        for (int n = N + threadIdx.x; n < L; n += blockDim.x)
            st[r * L + n] = store<T>(0.0f);
}

template <int ALG, class T, int F, int MODE>
__global__ void __launch_bounds__(fwd_block_bound<AlgebraTraits<ALG>::D, T>()) sgp_forward_kernel(const T *__restrict__ x, const T *__restrict__ y, const T *__restrict__ w,
                                   T *__restrict__ out, typename Compute<T>::type *__restrict__ norms, int64_t B,
                                   int64_t N, int normalize, int gate, int vec, Layout lay)
{
    using A = AlgebraTraits<ALG>;
    using C = typename Compute<T>::type;
    constexpr int D = A::D, G = A::G;
    constexpr bool RES = MODE == kResident;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    C *red = reinterpret_cast<C *>(smem_raw) + threadIdx.y * (blockDim.x / 32) * G;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int64_t BN = B * N;
    const int64_t row_step = (int64_t)gridDim.x * blockDim.y;
    const int64_t chunk_stride = (int64_t)blockDim.x * F;
    const int64_t chunks = RES ? 1 : (N + chunk_stride - 1) / chunk_stride;
    /* resident: stages [stages][2D][rows][L] after the staged weights */
    T *stages = RES ? reinterpret_cast<T *>(smem_raw + lay.pipe_off) : nullptr;
    const int S = (int)blockDim.y * lay.L, stage_elems = 2 * D * S;
    using W = Staged<T, false, D, F>;
    Weights<MODE, T, A::P, W> wt{w, MODE != kLong ? reinterpret_cast<const W *>(smem_raw + lay.ws_off) : nullptr, N};

    if constexpr (RES) {
        /* the first rows' loads go out before the weights are staged, so the two overlap */
        for (int s = 0; s + 1 < lay.stages; ++s)
            prefetch_rows<D, F>(stages + s * stage_elems, x, y, (const T *)nullptr, BN,
                                (int64_t)blockIdx.x * blockDim.y + threadIdx.y + s * row_step, B, (int)N, lay);
        zero_stage_padding(stages, lay.stages * 2 * D * (int)blockDim.y, (int)N, lay.L);
    }
    if constexpr (MODE != kLong)
        stage_weights<A::P, F>(w, const_cast<W *>(wt.ws), (int)N, lay.L);

    Chunk<ALG, T, F> c;
    int ring = 0; /* the stage of this iteration's rows */
    for (int64_t base = (int64_t)blockIdx.x * blockDim.y; base < B; base += row_step) {
        const int64_t b = base + threadIdx.y;
        const bool valid = b < B;
        const int64_t row = b * N;
        const T *cur = nullptr;
        if constexpr (RES) {
            /* queue the rows S - 1 iterations ahead into the stage the previous iteration
             * read, then wait for this one's. E <= F: each thread copied only its own
             * features and read only its own, so its wait orders them (no barrier). */
            const int ahead = ring + lay.stages - 1;
            prefetch_rows<D, F>(stages + (ahead < lay.stages ? ahead : ahead - lay.stages) * stage_elems, x, y,
                                (const T *)nullptr, BN, b + (lay.stages - 1) * row_step, B, (int)N, lay);
            cp_async_wait_upto(lay.stages - 1);
            cur = stages + ring * stage_elems + (int)threadIdx.y * lay.L + (int)threadIdx.x * F;
            ring = ring + 1 < lay.stages ? ring + 1 : 0;
        }
        C inv[G], acc[G];
#pragma unroll
        for (int g = 0; g < G; ++g)
            acc[g] = 0;
        /* pass 1: o and the norm parts (the only pass for resident rows) */
        for (int64_t ch = 0; ch < chunks; ++ch) {
            const int64_t n0 = ch * chunk_stride + (int64_t)threadIdx.x * F;
            if (valid && n0 < N) {
                if constexpr (RES)
                    c.load_stage(cur, S, gate);
                else
                    c.load_inputs(x, y, BN, row, n0, N, vec, gate);
                c.product(wt, (int)(ch * chunk_stride) + (int)threadIdx.x, n0);
                if (normalize)
                    c.add_norm_parts(acc);
            }
        }
        if (normalize) {
            group_sum_runtime(acc, red, warp, lane, warps, RowBarrier{});
#pragma unroll
            for (int g = 0; g < G; ++g) {
                const C r = sqrt((N > 0 ? acc[g] / C(N) : C(0)) + C(FC_NORM_EPS));
                inv[g] = C(1) / r;
                if (norms && valid && threadIdx.x == 0)
                    norms[b * G + g] = r;
            }
        } else {
#pragma unroll
            for (int g = 0; g < G; ++g)
                inv[g] = 1;
        }
        /* pass 2: write (recompute first when the row spans several chunks; with one, o is
         * still in registers) */
        for (int64_t ch = 0; ch < chunks; ++ch) {
            const int64_t n0 = ch * chunk_stride + (int64_t)threadIdx.x * F;
            if (valid && n0 < N) {
                if (!RES && chunks > 1) {
                    c.load_inputs(x, y, BN, row, n0, N, vec, gate);
                    c.product(wt, (int)(ch * chunk_stride) + (int)threadIdx.x, n0);
                }
                static_for<D>([&](auto i) {
                    constexpr int a = decltype(i)::value;
                    constexpr int g = A::table.grade[a];
                    C v[F];
#pragma unroll
                    for (int f = 0; f < F; ++f)
                        v[f] = c.o[a][f] * inv[g];
                    store_chunk<T, F>(out + a * BN + row, n0, N, vec, v);
                });
            }
        }
    }
    if constexpr (RES)
        cp_async_wait<0>(); /* nothing may be in flight into shared memory at exit */
}

/* Backward. The weight gradient of this block's rows is accumulated per feature: in shared
 * memory (kResident, kLongShared; one [L][PA] slice per row group in the column order of
 * Weights: each thread updates only its own words, no atomics, no bank conflicts), then
 * written to the block's partial slot (P, N) in fixed order; or (kLong: one row group a
 * block) in the slot itself, each word updated by its single owner thread. */
template <int ALG, class T, int F, int MODE>
__global__ void __launch_bounds__(bwd_block_bound<AlgebraTraits<ALG>::D, T>())
    sgp_backward_kernel(const T *__restrict__ gout, const T *__restrict__ x, const T *__restrict__ y,
                        const T *__restrict__ w, const typename Compute<T>::type *__restrict__ norms,
                        T *__restrict__ grad_x, T *__restrict__ grad_y,
                        typename Compute<T>::type *__restrict__ partial, int64_t B, int64_t N, int normalize,
                        int gate, int vec, Layout lay)
{
    using A = AlgebraTraits<ALG>;
    using C = typename Compute<T>::type;
    using Order = PathOrder<ALG>;
    constexpr int D = A::D, G = A::G, P = A::P;
    constexpr bool RES = MODE == kResident, SHARED_ACC = MODE != kLong;
    /* the wide kernels (F x D = 16): x, y, grad_out and o together would not fit 128
     * registers across the row reduction, so x, y and grad_out are read again */
    constexpr bool RELOAD = RES && F >= 2 && F * D >= 16;
    constexpr int PA = padded_paths<P, C>(); /* accumulator rows [L][PA] */
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int warps = blockDim.x >> 5;
    /* the row group's two reduction scratch areas, used in turn (no barrier after the sum) */
    C *red = reinterpret_cast<C *>(smem_raw) + threadIdx.y * 2 * warps * 2 * G;
    int turn = 0;
    const int tx = blockDim.x, tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t BN = B * N;
    const int64_t chunk_stride = (int64_t)tx * F;
    const int64_t chunks = RES ? 1 : (N + chunk_stride - 1) / chunk_stride;
    const int L = lay.L;
    C *slot = partial + (int64_t)blockIdx.x * N * P; /* this block's weight-gradient partial */
    C *gacc = SHARED_ACC ? reinterpret_cast<C *>(smem_raw + lay.acc_off) : nullptr;
    using W = Staged<T, true, D, F>;
    Weights<MODE, T, P, W> wt{w, SHARED_ACC ? reinterpret_cast<const W *>(smem_raw + lay.ws_off) : nullptr, N};
    /* resident: x, y, grad_out of the next rows stream into [stages][3D][rows][L] while these
     * are computed */
    T *stages = RES ? reinterpret_cast<T *>(smem_raw + lay.pipe_off) : nullptr;
    const int64_t row_step = (int64_t)gridDim.x * blockDim.y;
    const int S = (int)blockDim.y * L, stage_elems = 3 * D * S;
    if constexpr (RES) {
        for (int s = 0; s + 1 < lay.stages; ++s)
            prefetch_rows<D, F>(stages + s * stage_elems, x, y, gout, BN,
                                (int64_t)blockIdx.x * blockDim.y + threadIdx.y + s * row_step, B, (int)N, lay);
        zero_stage_padding(stages, lay.stages * 3 * D * (int)blockDim.y, (int)N, L);
    }
    if constexpr (SHARED_ACC) {
        for (int i = tid; i < (int)blockDim.y * PA * L; i += nthreads)
            gacc[i] = 0;
        gacc += threadIdx.y * PA * L;
        stage_weights<P, F>(w, const_cast<W *>(wt.ws), (int)N, L); /* ends with the barrier the zeroing needs */
    } else {
        for (int64_t i = tid; i < N * P; i += nthreads)
            slot[i] = 0;
        __syncthreads();
    }

    Chunk<ALG, T, F> c;
    int ring = 0; /* the stage of this iteration's rows */
    for (int64_t base = (int64_t)blockIdx.x * blockDim.y; base < B; base += row_step) {
        const int64_t b = base + threadIdx.y;
        const bool valid = b < B;
        const int64_t row = b * N;
        const T *cur = nullptr; /* resident: this thread's features of x's component 0 in the stage */
        if constexpr (RES) {
            /* pieces span several threads' features of the row group's own row: its barrier
             * after the wait. With S >= 2 stages: this row's group landed (S - 2 later ones
             * may be pending) and, past the barrier, the row group is done with the stage the
             * previous iteration read, which then takes the rows S - 1 iterations ahead. */
            if (lay.stages >= 2) {
                cp_async_wait_upto(lay.stages - 2);
                RowBarrier{}();
                const int ahead = ring + lay.stages - 1;
                prefetch_rows<D, F>(stages + (ahead < lay.stages ? ahead : ahead - lay.stages) * stage_elems, x, y,
                                    gout, BN, b + (lay.stages - 1) * row_step, B, (int)N, lay);
            } else {
                RowBarrier{}(); /* the row group is done with the stage */
                prefetch_rows<D, F>(stages, x, y, gout, BN, b, B, (int)N, lay);
                cp_async_wait<0>();
                RowBarrier{}();
            }
            cur = stages + ring * stage_elems + (int)threadIdx.y * L + (int)threadIdx.x * F;
            ring = ring + 1 < lay.stages ? ring + 1 : 0;
        }
        C go[D][F];
        C r[G], rinv[G], dcoef[G];
        if (normalize) {
            C red_v[2 * G]; /* dot_g, then q_g when norms were not saved */
#pragma unroll
            for (int k = 0; k < 2 * G; ++k)
                red_v[k] = 0;
            for (int64_t ch = 0; ch < chunks; ++ch) {
                const int64_t n0 = ch * chunk_stride + (int64_t)threadIdx.x * F;
                if (valid && n0 < N) {
                    if constexpr (RES)
                        c.load_stage(cur, S, gate);
                    else
                        c.load_inputs(x, y, BN, row, n0, N, vec, gate);
                    c.product(wt, (int)(ch * chunk_stride) + (int)threadIdx.x, n0);
                    static_for<D>([&](auto i) {
                        constexpr int a = decltype(i)::value;
                        constexpr int g = A::table.grade[a];
                        if constexpr (RES)
                            load_staged<T, F>(cur + (2 * D + a) * S, go[a]);
                        else
                            load_chunk<T, F>(gout + a * BN + row, n0, N, vec, go[a]);
#pragma unroll
                        for (int f = 0; f < F; ++f)
                            red_v[g] += go[a][f] * c.o[a][f];
                    });
                    if (!norms) {
                        C q[G];
#pragma unroll
                        for (int g = 0; g < G; ++g)
                            q[g] = 0;
                        c.add_norm_parts(q);
#pragma unroll
                        for (int g = 0; g < G; ++g)
                            red_v[G + g] += q[g];
                    }
                }
            }
            /* the norms saved by the forward leave only the G dot products to reduce */
            if (norms) {
                C dots[G];
#pragma unroll
                for (int g = 0; g < G; ++g)
                    dots[g] = red_v[g];
                group_sum_runtime(dots, red + turn * warps * 2 * G, warp, lane, warps, RowBarrier{}, false);
#pragma unroll
                for (int g = 0; g < G; ++g)
                    red_v[g] = dots[g];
            } else {
                group_sum_runtime(red_v, red + turn * warps * 2 * G, warp, lane, warps, RowBarrier{}, false);
            }
            turn ^= 1;
            const C inv_n = C(1) / C(N); /* N > 0 here */
#pragma unroll
            for (int g = 0; g < G; ++g) {
                r[g] = norms ? (valid ? norms[b * G + g] : C(1)) : sqrt(red_v[G + g] / C(N) + C(FC_NORM_EPS)); /* as forward */
                /* through r: d out_A / d o = -dot_g sign(t_g) s_A o_A / (N r^3); one division a
                 * grade (the rest multiplies: the backward is issue-bound) */
                rinv[g] = C(1) / r[g];
                dcoef[g] = red_v[g] * inv_n * rinv[g] * rinv[g] * rinv[g];
            }
        }
        for (int64_t ch = 0; ch < chunks; ++ch) {
            const int64_t n0 = ch * chunk_stride + (int64_t)threadIdx.x * F;
            if (!(valid && n0 < N))
                continue;
            /* resident rows keep o and the gates in registers across the reduction, and x, y
             * and grad_out too unless RELOAD (then read again from the stage, which the next
             * prefetch overwrites only after the next iteration's barrier); longer rows read
             * them again, from L2 mostly */
            if (!RES || !normalize || RELOAD) {
                if constexpr (RES) {
                    if (RELOAD && normalize)
                        c.load_stage_values(cur, S);
                    else
                        c.load_stage(cur, S, gate);
#pragma unroll
                    for (int a = 0; a < D; ++a)
                        load_staged<T, F>(cur + (2 * D + a) * S, go[a]);
                } else {
                    c.load_inputs(x, y, BN, row, n0, N, vec, gate);
#pragma unroll
                    for (int a = 0; a < D; ++a)
                        load_chunk<T, F>(gout + a * BN + row, n0, N, vec, go[a]);
                }
                if (!RES && normalize)
                    c.product(wt, (int)(ch * chunk_stride) + (int)threadIdx.x, n0);
            }
            if (normalize) {
                C t[G][F];
                c.grade_squares(t);
                static_for<D>([&](auto i) {
                    constexpr int a = decltype(i)::value;
                    constexpr int g = A::table.grade[a];
                    constexpr int s = A::table.grade_sign[a];
#pragma unroll
                    for (int f = 0; f < F; ++f)
                        go[a][f] = go[a][f] * rinv[g] - dcoef[g] * sign_of(t[g][f]) * C(s) * c.o[a][f];
                });
            }
            /* through the product and the gates */
            C gxv[D][F], gyv[D][F];
#pragma unroll
            for (int f = 0; f < F; ++f) {
                const int64_t n = n0 + f;
                /* xg_i = x_i Phi(x0), yg_k = y_k Phi(y0): the gates scale every term */
                const C gg = n < N ? c.gx[f] * c.gy[f] : C(0);
                const int col = (int)(ch * chunk_stride) + f * tx + threadIdx.x; /* shared: < 2^31 */
#pragma unroll
                for (int a = 0; a < D; ++a)
                    gxv[a][f] = gyv[a][f] = 0;
                /* paths in order: E weights are loaded together (one vector) and EA
                 * finished path sums update the shared accumulators together */
                constexpr int E = decltype(wt)::E, EA = path_vec<C>();
                C wv[E], gq[EA], gp = 0, h = 0, q = 0;
                static_for<A::T>([&](auto u) {
                    constexpr int U = decltype(u)::value;
                    constexpr fc_term e = Order::at(U);
                    if constexpr (Order::first(U)) {
                        if constexpr (e.path % E == 0)
                            wt.vec(e.path, col, n, wv);
                        gp = 0;
                    }
                    const C xi = c.x[e.i][f], yk = c.y[e.k][f];
                    if constexpr (Order::first_pj(U)) {
                        h = wv[e.path % E] * go[e.j][f];
                        q = C(e.sign) * xi * yk;
                    } else {
                        q += C(e.sign) * xi * yk;
                    }
                    gxv[e.i][f] += C(e.sign) * h * yk;
                    gyv[e.k][f] += C(e.sign) * h * xi;
                    if constexpr (Order::last_pj(U))
                        gp += q * go[e.j][f];
                    if constexpr (Order::last(U)) {
                        if constexpr (SHARED_ACC) {
                            gq[e.path % EA] = gp * gg;
                            if constexpr (e.path % EA == EA - 1 || e.path == P - 1) {
                                constexpr int p0 = e.path - e.path % EA;
                                Vec<C, EA> &dst = *reinterpret_cast<Vec<C, EA> *>(gacc + col * PA + p0);
                                Vec<C, EA> v = dst;
#pragma unroll
                                for (int k = 0; k < EA; ++k)
                                    if (p0 + k < P)
                                        v.v[k] += gq[k];
                                dst = v;
                            }
                        } else if (n < N) {
                            slot[e.path * N + n] += gp * gg;
                        }
                    }
                });
                /* gxg = gxv Phi(y0); MVGELU backward: gx_i = gxg_i Phi(x0), + phi(x0) sum_k gxg_k x_k
                 * at i = 0. Both gates scale every component, so one multiply by their product;
                 * the sum takes Phi(y0) once. */
                C sx = 0, sy = 0;
#pragma unroll
                for (int a = 0; a < D; ++a) {
                    sx += gxv[a][f] * c.x[a][f];
                    sy += gyv[a][f] * c.y[a][f];
                }
                const C g2 = c.gx[f] * c.gy[f];
#pragma unroll
                for (int a = 0; a < D; ++a) {
                    gxv[a][f] *= g2;
                    gyv[a][f] *= g2;
                }
                if (gate) {
                    gxv[0][f] += sx * c.gy[f] * gate_grad_of<T>(c.x[0][f]);
                    gyv[0][f] += sy * c.gx[f] * gate_grad_of<T>(c.y[0][f]);
                }
            }
#pragma unroll
            for (int a = 0; a < D; ++a) {
                if (grad_x)
                    store_chunk<T, F>(grad_x + a * BN + row, n0, N, vec, gxv[a]);
                if (grad_y)
                    store_chunk<T, F>(grad_y + a * BN + row, n0, N, vec, gyv[a]);
            }
        }
    }
    if constexpr (RES)
        cp_async_wait<0>(); /* the last (empty) prefetch */
    if constexpr (SHARED_ACC) {
        /* the row groups' accumulators, added in order, into the block's (P, N) slot: thread
         * (x, y) takes paths y, y + blockDim.y, ... at its own columns (conflict-free reads,
         * coalesced writes, no division) */
        __syncthreads();
        const C *g0 = reinterpret_cast<const C *>(smem_raw + lay.acc_off);
        for (int p = threadIdx.y; p < P; p += blockDim.y)
            for (int ch = 0; ch < (int)chunks; ++ch)
#pragma unroll
                for (int f = 0; f < F; ++f) {
                    const int n = ch * (int)chunk_stride + (int)threadIdx.x * F + f;
                    if (n >= N)
                        continue;
                    const int col = ch * (int)chunk_stride + f * tx + threadIdx.x;
                    C v = 0;
                    for (int ry = 0; ry < (int)blockDim.y; ++ry)
                        v += g0[(ry * L + col) * PA + p];
                    slot[(int64_t)p * N + n] = v;
                }
    }
}

/* grad_weight[n, p] = sum over s of partial[s][p][n] in a fixed order, so deterministic:
 * the S slots are cut into blockDim.y contiguous segments, each summed in order by one
 * thread (threadIdx.x picks k = p * N + n, so a warp reads 32 consecutive words), and the
 * segment sums are added in segment order. */
template <class T>
__global__ void sum_partials_kernel(const typename Compute<T>::type *__restrict__ partial, T *__restrict__ out,
                                    int64_t S, int64_t N, int64_t P)
{
    using C = typename Compute<T>::type;
    __shared__ C seg[8][32];
    const int64_t K = N * P;
    const int64_t k = (int64_t)blockIdx.x * 32 + threadIdx.x;
    const int64_t per = (S + blockDim.y - 1) / blockDim.y;
    const int64_t s0 = threadIdx.y * per, s1 = s0 + per < S ? s0 + per : S;
    C sum = 0;
    if (k < K)
        for (int64_t i = s0; i < s1; ++i)
            sum += partial[i * K + k];
    seg[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && k < K) {
        C total = 0;
        for (int j = 0; j < (int)blockDim.y; ++j)
            total += seg[j][threadIdx.x];
        out[(k % N) * P + k / N] = store<T>(total);
    }
}

} // namespace sgp
} // namespace fc
