/* sgp_kernels.cuh — fused MVGELU -> weighted geometric product -> grade RMSNorm on CUDA.
 *
 * Shapes: x, y, out, grad_* (D, B, N) contiguous; weight (N, P); norms (B, G) in the
 * compute type; workspace (S, N, P) compute-type weight-gradient partials, S = grid blocks.
 *
 * Design: a row group (blockDim.x threads, a whole number of warps) owns whole rows; each
 * thread holds F consecutive features of every component in registers, so the grade
 * norms are reduced on chip (fixed-order warp tree, then warps in order) before the output
 * is written once: forward reads x, y, weight once and writes out once, with no atomics.
 * Backward recomputes o (cheaper than saving it), reduces the norm's dot products the same
 * way, and accumulates its weight-gradient partial in registers across the rows a block
 * visits; a second kernel sums the S partials in fixed order, so results are bitwise
 * reproducible. Rows longer than blockDim.x * F (more than 1024 threads) take a two-pass
 * path that reads x and y twice. All offsets are 64-bit.
 */
#pragma once

#include <cstdint>

#include "algebra_traits.cuh"
#include "common.cuh"

namespace fc {
namespace sgp {

constexpr int kBlockThreads = 256; /* per block when rows are short: several rows per block */
constexpr int kMaxRowThreads = 1024;

/* Features per thread: 16-byte loads for fp32 (8 for bf16/fp16 at D <= 4) in forward;
 * backward holds x, y, grad_out, their gradients and the weight partial, so fewer. */
template <int D, class T> constexpr int fwd_features() { return sizeof(T) == 8 ? 2 : (D <= 8 ? 4 : 2); }
template <int D, class T> constexpr int bwd_features() { return D <= 4 && sizeof(T) < 8 ? 2 : 1; }
/* Backward threads a block may have: 512 caps registers at 128 (spill-free for 4- and 2-byte
 * data up to D = 8), so rows of 512 features stay resident with 16 warps a multiprocessor;
 * 16 components need 168 (384 threads). */
template <int D, class T> constexpr int bwd_block_bound() { return sizeof(T) == 8 ? 256 : (D <= 8 ? 512 : 384); }

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

/* Asynchronous global -> shared copies (cp.async, sm_80+): the next rows of x and y stream
 * into shared memory while this row is computed, without holding registers. Each thread
 * copies and later reads only its own slots, so a wait_group (no barrier) orders them. */
template <int BYTES> __device__ __forceinline__ void cp_async(void *dst, const void *src)
{
    static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
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

/* The terms in path order: the backward loads each weight once and finishes each path's
 * weight-gradient sum before the next path starts (two live registers instead of 2P). */
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
            for (int t = 0; t < A::T; ++t)
                if (A::table.term[t].path == p)
                    o.term[n++] = t;
        return o;
    }
    static constexpr Order order = make();
    __host__ __device__ static constexpr bool first(int u) { return u == 0 || A::table.term[order.term[u - 1]].path != A::table.term[order.term[u]].path; }
    __host__ __device__ static constexpr bool last(int u) { return u + 1 == A::T || A::table.term[order.term[u + 1]].path != A::table.term[order.term[u]].path; }
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
            gx[f] = gate ? gelu_gate(x[0][f]) : C(1);
            gy[f] = gate ? gelu_gate(y[0][f]) : C(1);
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

    /* From this thread's slots of a prefetched stage, laid out [2D][threads][F]. */
    __device__ __forceinline__ void load_staged(const T *st, int tid, int nthreads, int gate)
    {
#pragma unroll
        for (int i = 0; i < 2 * D; ++i) {
            const Vec<T, F> v = *reinterpret_cast<const Vec<T, F> *>(st + ((int64_t)i * nthreads + tid) * F);
#pragma unroll
            for (int f = 0; f < F; ++f)
                (i < D ? x[i][f] : y[i - D][f]) = load<T>(v.v[f]);
        }
        gates(gate);
    }

    /* Weight p of feature n = n0 + f (clamped: features past N compute on zeros, unstored).
     * ws: the block's staged copy, [p][f * blockDim.x + thread] (stage_weights), or null to
     * read the (N, P) rows from global memory. */
    __device__ __forceinline__ static C weight(const T *__restrict__ w, const T *ws, int p, int f, int64_t n,
                                               int64_t N)
    {
        if (ws)
            return load<T>(ws[p * (F * (int)blockDim.x) + f * (int)blockDim.x + threadIdx.x]);
        return load<T>(w[(n < N ? n : N - 1) * P + p]);
    }

    /* o_j = Phi(x0) Phi(y0) sum over terms sign * w[n, path] * x_i * y_k */
    __device__ __forceinline__ void product(const T *__restrict__ w, const T *ws, int64_t n0, int64_t N)
    {
#pragma unroll
        for (int f = 0; f < F; ++f) {
            C wr[P];
#pragma unroll
            for (int p = 0; p < P; ++p)
                wr[p] = weight(w, ws, p, f, n0 + f, N);
#pragma unroll
            for (int j = 0; j < D; ++j)
                o[j][f] = 0;
            static_for<A::T>([&](auto t) {
                constexpr fc_term e = A::table.term[decltype(t)::value];
                o[e.j][f] += C(e.sign) * wr[e.path] * x[e.i][f] * y[e.k][f];
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

/* Copy the (N, P) weights into shared memory as [p][f * blockDim.x + t] for feature
 * n = t * F + f: the warp then reads consecutive elements (no bank conflicts), where reading
 * the rows from global memory touched 32 cache lines per load instruction. Features past N
 * get zeros. Reads are coalesced; done once per block, which then loops over many rows. */
template <int P, int F, class T>
__device__ __forceinline__ void stage_weights(const T *__restrict__ w, T *ws, int64_t N)
{
    const int tx = blockDim.x, nthreads = blockDim.x * blockDim.y;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int ns = F * tx;
    for (int64_t i = tid; i < N * P; i += nthreads) {
        const int64_t n = i / P;
        const int p = (int)(i % P);
        ws[p * ns + (int)(n % F) * tx + (int)(n / F)] = w[i];
    }
    for (int i = tid; i < (ns - (int)N) * P; i += nthreads) {
        const int n = (int)N + i / P, p = i % P;
        ws[p * ns + (n % F) * tx + n / F] = store<T>(0.0f);
    }
    __syncthreads();
}

/* Queue this thread's chunks of row b of x and y into a stage ([2D][threads][F]); always
 * commits a group (empty past the last row) so every thread counts groups alike. */
template <int D, int F, class T>
__device__ __forceinline__ void prefetch_row(T *st, const T *__restrict__ x, const T *__restrict__ y, int64_t BN,
                                             int64_t b, int64_t B, int64_t N, int tid, int nthreads)
{
    const int64_t n0 = (int64_t)threadIdx.x * F;
    if (b < B && n0 < N) {
        const int64_t off = b * N + n0;
#pragma unroll
        for (int i = 0; i < D; ++i) {
            cp_async<F * sizeof(T)>(st + ((int64_t)i * nthreads + tid) * F, x + i * BN + off);
            cp_async<F * sizeof(T)>(st + ((int64_t)(D + i) * nthreads + tid) * F, y + i * BN + off);
        }
    }
    cp_async_commit();
}

/* Shared memory of a block, in bytes from the start: the norm reduction scratch, then (each
 * 16-byte aligned) the weight-gradient accumulators (backward), the staged weights and the
 * double-buffered input stages. Offsets of 0 mean absent. */
struct Layout {
    size_t acc_off, ws_off, pipe_off, total;
};

/* Queue rows [b0, b0 + blockDim.y) of x, y (and g when given), each (D, B, N), into a stage
 * laid out [input component][row][N], in 16-byte pieces shared by all threads of the block
 * (so a barrier must follow the wait). Rows past B are skipped. N * sizeof(T) % 16 == 0. */
template <int D, class T>
__device__ __forceinline__ void prefetch_rows(T *st, const T *__restrict__ x, const T *__restrict__ y,
                                              const T *__restrict__ g, int64_t BN, int64_t b0, int64_t B, int64_t N,
                                              int tid, int nthreads)
{
    constexpr int E = 16 / sizeof(T);
    const int pieces = (int)(N / E), rows = blockDim.y, K = g ? 3 * D : 2 * D;
    const int total = K * rows * pieces;
    for (int i = tid; i < total; i += nthreads) {
        const int piece = i % pieces, kr = i / pieces, r = kr % rows, k = kr / rows;
        const int64_t b = b0 + r;
        if (b >= B)
            continue;
        const T *src = k < D ? x + k * BN : (k < 2 * D ? y + (k - D) * BN : g + (k - 2 * D) * BN);
        cp_async<16>(st + ((int64_t)k * rows + r) * N + (int64_t)piece * E, src + b * N + (int64_t)piece * E);
    }
    cp_async_commit();
}

template <int ALG, class T, int F, bool RESIDENT>
__global__ void sgp_forward_kernel(const T *__restrict__ x, const T *__restrict__ y, const T *__restrict__ w,
                                   T *__restrict__ out, typename Compute<T>::type *__restrict__ norms, int64_t B,
                                   int64_t N, int normalize, int gate, int vec, Layout lay)
{
    using A = AlgebraTraits<ALG>;
    using C = typename Compute<T>::type;
    constexpr int D = A::D, G = A::G;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    C *red = reinterpret_cast<C *>(smem_raw) + threadIdx.y * (blockDim.x / 32) * G;
    const T *ws = RESIDENT && lay.ws_off ? reinterpret_cast<T *>(smem_raw + lay.ws_off) : nullptr;
    T *stages = RESIDENT && lay.pipe_off ? reinterpret_cast<T *>(smem_raw + lay.pipe_off) : nullptr;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
    const int64_t stage_elems = (int64_t)2 * D * nthreads * F;
    const int64_t BN = B * N;
    const int64_t row_step = (int64_t)gridDim.x * blockDim.y;
    const int64_t chunk_stride = (int64_t)blockDim.x * F;
    const int64_t chunks = RESIDENT ? 1 : (N + chunk_stride - 1) / chunk_stride;

    /* the first rows' loads go out before the weights are staged, so the two overlap */
    if (stages)
        prefetch_row<D, F>(stages, x, y, BN, (int64_t)blockIdx.x * blockDim.y + threadIdx.y, B, N, tid, nthreads);
    if (ws)
        stage_weights<A::P, F>(w, const_cast<T *>(ws), N);

    Chunk<ALG, T, F> c;
    int it = 0;
    for (int64_t base = (int64_t)blockIdx.x * blockDim.y; base < B; base += row_step, ++it) {
        const int64_t b = base + threadIdx.y;
        const bool valid = b < B;
        const int64_t row = b * N;
        if (stages) { /* queue the next rows, then wait for this one's (all but the newest group) */
            prefetch_row<D, F>(stages + ((it + 1) & 1) * stage_elems, x, y, BN, b + row_step, B, N, tid, nthreads);
            cp_async_wait<1>();
        }
        C inv[G], acc[G];
#pragma unroll
        for (int g = 0; g < G; ++g)
            acc[g] = 0;
        /* pass 1: o and the norm parts (the only pass for resident rows) */
        for (int64_t ch = 0; ch < chunks; ++ch) {
            const int64_t n0 = ch * chunk_stride + (int64_t)threadIdx.x * F;
            if (valid && n0 < N) {
                if (stages)
                    c.load_staged(stages + (it & 1) * stage_elems, tid, nthreads, gate);
                else
                    c.load_inputs(x, y, BN, row, n0, N, vec, gate);
                c.product(w, ws, n0, N);
                if (normalize)
                    c.add_norm_parts(acc);
            }
        }
        if (normalize) {
            group_sum_runtime(acc, red, warp, lane, warps);
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
        /* pass 2: write (recompute first when the row did not fit in registers) */
        for (int64_t ch = 0; ch < chunks; ++ch) {
            const int64_t n0 = ch * chunk_stride + (int64_t)threadIdx.x * F;
            if (valid && n0 < N) {
                if (!RESIDENT) {
                    c.load_inputs(x, y, BN, row, n0, N, vec, gate);
                    c.product(w, ws, n0, N);
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
    if (stages)
        cp_async_wait<0>(); /* nothing may be in flight into shared memory at exit */
}

/* Backward. The weight gradient of this block's rows is accumulated per feature in shared
 * memory (lay.acc_off; one [P][L] slice per row group, L = the row's padded length, column
 * ch * tx * F + f * tx + thread: each thread updates only its own words, no atomics and no
 * bank conflicts), then written to the block's partial slot (N, P) in fixed order. When that
 * does not fit (very long rows; then one row group per block) the slot in global memory
 * is the accumulator, updated by its single owner thread. */
template <int ALG, class T, int F, bool RESIDENT>
__global__ void __launch_bounds__(bwd_block_bound<AlgebraTraits<ALG>::D, T>()) sgp_backward_kernel(const T *__restrict__ gout, const T *__restrict__ x, const T *__restrict__ y,
                                    const T *__restrict__ w, const typename Compute<T>::type *__restrict__ norms,
                                    T *__restrict__ grad_x, T *__restrict__ grad_y,
                                    typename Compute<T>::type *__restrict__ partial, int64_t B, int64_t N,
                                    int normalize, int gate, int vec, Layout lay)
{
    using A = AlgebraTraits<ALG>;
    using C = typename Compute<T>::type;
    using Order = PathOrder<ALG>;
    constexpr int D = A::D, G = A::G, P = A::P;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int warps = blockDim.x >> 5;
    C *red = reinterpret_cast<C *>(smem_raw) + threadIdx.y * warps * 2 * G;
    const int tx = blockDim.x, tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t BN = B * N;
    const int64_t chunk_stride = (int64_t)tx * F;
    const int64_t chunks = RESIDENT ? 1 : (N + chunk_stride - 1) / chunk_stride;
    const int64_t L = chunks * chunk_stride;
    C *slot = partial + (int64_t)blockIdx.x * N * P; /* this block's weight-gradient partial */
    C *gacc = lay.acc_off ? reinterpret_cast<C *>(smem_raw + lay.acc_off) : nullptr;
    /* resident rows with 16-byte aligned rows: x, y, grad_out of the next rows stream into
     * shared memory while these are computed (double-buffered, [3D][rows][N]) */
    T *stages = RESIDENT && lay.pipe_off ? reinterpret_cast<T *>(smem_raw + lay.pipe_off) : nullptr;
    const int64_t row_step = (int64_t)gridDim.x * blockDim.y;
    const int64_t stage_elems = (int64_t)3 * D * blockDim.y * N;
    if (stages)
        prefetch_rows<D>(stages, x, y, gout, BN, (int64_t)blockIdx.x * blockDim.y, B, N, tid, nthreads);
    if (gacc) {
        for (int64_t i = tid; i < (int64_t)blockDim.y * P * L; i += nthreads)
            gacc[i] = 0;
        gacc += (int64_t)threadIdx.y * P * L;
    } else {
        for (int64_t i = tid; i < N * P; i += nthreads)
            slot[i] = 0;
    }
    const T *ws = nullptr;
    if (RESIDENT && lay.ws_off) {
        ws = reinterpret_cast<T *>(smem_raw + lay.ws_off);
        stage_weights<P, F>(w, const_cast<T *>(ws), N); /* ends with the barrier the zeroing needs */
    } else {
        __syncthreads();
    }

    Chunk<ALG, T, F> c;
    int it = 0;
    for (int64_t base = (int64_t)blockIdx.x * blockDim.y; base < B; base += row_step, ++it) {
        const int64_t b = base + threadIdx.y;
        const bool valid = b < B;
        const int64_t row = b * N;
        /* where this row's inputs are read: global memory, or the stage (component stride S) */
        const T *xs = x, *ys = y, *gs = gout;
        int64_t S = BN, roff = row;
        if (stages) {
            cp_async_wait<0>();
            __syncthreads(); /* every piece of this stage landed; the other stage is free again */
            prefetch_rows<D>(stages + ((it + 1) & 1) * stage_elems, x, y, gout, BN, base + row_step, B, N, tid,
                             nthreads);
            xs = stages + (it & 1) * stage_elems;
            S = (int64_t)blockDim.y * N;
            ys = xs + D * S;
            gs = ys + D * S;
            roff = (int64_t)threadIdx.y * N;
        }
        C go[D][F];
        C red_v[2 * G]; /* dot_g, then q_g when norms were not saved */
        C r[G], rinv[G], dcoef[G];
#pragma unroll
        for (int k = 0; k < 2 * G; ++k)
            red_v[k] = 0;
        if (normalize) {
            for (int64_t ch = 0; ch < chunks; ++ch) {
                const int64_t n0 = ch * chunk_stride + (int64_t)threadIdx.x * F;
                if (valid && n0 < N) {
                    c.load_inputs(xs, ys, S, roff, n0, N, vec, gate);
                    c.product(w, ws, n0, N);
                    static_for<D>([&](auto i) {
                        constexpr int a = decltype(i)::value;
                        constexpr int g = A::table.grade[a];
                        load_chunk<T, F>(gs + a * S + roff, n0, N, vec, go[a]);
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
            group_sum_runtime(red_v, red, warp, lane, warps);
#pragma unroll
            for (int g = 0; g < G; ++g) {
                r[g] = norms ? (valid ? norms[b * G + g] : C(1))
                             : sqrt((N > 0 ? red_v[G + g] / C(N) : C(0)) + C(FC_NORM_EPS));
                /* through r: d out_A / d o = -dot_g sign(t_g) s_A o_A / (N r^3) */
                dcoef[g] = N > 0 ? red_v[g] / (C(N) * r[g] * r[g] * r[g]) : C(0);
                rinv[g] = C(1) / r[g];
            }
        }
        for (int64_t ch = 0; ch < chunks; ++ch) {
            const int64_t n0 = ch * chunk_stride + (int64_t)threadIdx.x * F;
            if (!(valid && n0 < N))
                continue;
            /* resident rows keep x, y, o and grad_out in registers across the reduction (F is
             * small enough for that); longer rows read them again, from L2 mostly */
            if (!RESIDENT || !normalize) {
                c.load_inputs(xs, ys, S, roff, n0, N, vec, gate);
                if (normalize)
                    c.product(w, ws, n0, N);
#pragma unroll
                for (int a = 0; a < D; ++a)
                    load_chunk<T, F>(gs + a * S + roff, n0, N, vec, go[a]);
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
                C wp = 0, gp = 0;
                static_for<A::T>([&](auto u) {
                    constexpr int U = decltype(u)::value;
                    constexpr fc_term e = A::table.term[Order::order.term[U]];
                    if constexpr (Order::first(U)) {
                        wp = c.weight(w, ws, e.path, f, n, N);
                        gp = 0;
                    }
                    const C xi = c.x[e.i][f], yk = c.y[e.k][f], gj = go[e.j][f];
                    const C sw = C(e.sign) * wp, gy_ = gj * yk;
                    gxv[e.i][f] += sw * gy_;
                    gyv[e.k][f] += sw * (xi * gj);
                    gp += C(e.sign) * xi * gy_;
                    if constexpr (Order::last(U)) {
                        if (gacc)
                            gacc[e.path * (int)L + col] += gp * gg;
                        else if (n < N)
                            slot[n * P + e.path] += gp * gg;
                    }
                });
                /* gxg = gxv Phi(y0); MVGELU backward: gx_i = gxg_i Phi(x0), + phi(x0) sum_k gxg_k x_k at i = 0 */
                C sx = 0, sy = 0;
#pragma unroll
                for (int a = 0; a < D; ++a) {
                    gxv[a][f] *= c.gy[f];
                    gyv[a][f] *= c.gx[f];
                    sx += gxv[a][f] * c.x[a][f];
                    sy += gyv[a][f] * c.y[a][f];
                }
#pragma unroll
                for (int a = 0; a < D; ++a) {
                    gxv[a][f] *= c.gx[f];
                    gyv[a][f] *= c.gy[f];
                }
                if (gate) {
                    gxv[0][f] += sx * gelu_gate_grad(c.x[0][f]);
                    gyv[0][f] += sy * gelu_gate_grad(c.y[0][f]);
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
    if (stages)
        cp_async_wait<0>(); /* the last (empty) prefetch */
    if (lay.acc_off) {
        /* the row groups' accumulators, added in order, into the block's (N, P) slot */
        __syncthreads();
        const C *g0 = reinterpret_cast<const C *>(smem_raw + lay.acc_off);
        for (int64_t k = tid; k < N * P; k += nthreads) {
            const int64_t n = k / P;
            const int p = (int)(k % P);
            const int64_t rem = n % chunk_stride;
            const int64_t col = n - rem + (rem % F) * tx + rem / F;
            C v = 0;
            for (int ry = 0; ry < (int)blockDim.y; ++ry)
                v += g0[((int64_t)ry * P + p) * L + col];
            slot[k] = v;
        }
    }
}

/* grad_weight[k] = sum over s of partial[s][k] in a fixed order, so deterministic: the S
 * slots are cut into blockDim.y contiguous segments, each summed in order by one thread
 * (threadIdx.x picks k, so a warp reads 32 consecutive words), and the segment sums are
 * added in segment order. */
template <class T>
__global__ void sum_partials_kernel(const typename Compute<T>::type *__restrict__ partial, T *__restrict__ out,
                                    int64_t S, int64_t K)
{
    using C = typename Compute<T>::type;
    __shared__ C seg[8][32];
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
        out[k] = store<T>(total);
    }
}

} // namespace sgp
} // namespace fc
