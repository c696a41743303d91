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

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "algebra_traits.cuh"
#include "common.cuh"

namespace fc {
namespace sgp {

constexpr int kBlockThreads = 256; /* per block when rows are short: several rows per block */
constexpr int kMaxRowThreads = 1024;

/* Features per thread: 16-byte loads for fp32 (8 for bf16/fp16 at D <= 4) in forward;
 * backward holds x, y, grad_out, their gradients and the weight partial, so fewer. */
template <int D, class T> constexpr int fwd_features() { return sizeof(T) == 8 ? 2 : (D <= 8 ? 4 : 2); }
template <int D, class T> constexpr int bwd_features()
{
    return D <= 4 ? (sizeof(T) == 8 ? 2 : 4) : (D <= 8 && sizeof(T) < 8 ? 2 : 1);
}

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

/* The per-chunk state: raw x and y (the gate derivative needs x), their gates, o. Every
 * register array is indexed through static_for, never by a run-time value. */
template <int ALG, class T, int F> struct Chunk {
    using A = AlgebraTraits<ALG>;
    using C = typename Compute<T>::type;
    static constexpr int D = A::D, G = A::G, P = A::P;
    C x[D][F], y[D][F], gx[F], gy[F], o[D][F];

    __device__ __forceinline__ void load_inputs(const T *x_, const T *y_, int64_t BN, int64_t row, int64_t n0,
                                                int64_t N, bool vec)
    {
#pragma unroll
        for (int i = 0; i < D; ++i) {
            load_chunk<T, F>(x_ + i * BN + row, n0, N, vec, x[i]);
            load_chunk<T, F>(y_ + i * BN + row, n0, N, vec, y[i]);
        }
#pragma unroll
        for (int f = 0; f < F; ++f) {
            gx[f] = gelu_gate(x[0][f]);
            gy[f] = gelu_gate(y[0][f]);
        }
    }

    /* The P weights of feature n = n0 + f (clamped: features past N compute on zeros,
     * unstored). ws: the block's staged copy, [p][f * blockDim.x + thread] (stage_weights),
     * or null to read the (N, P) rows from global memory (two-pass rows). */
    __device__ __forceinline__ static void load_weights(const T *__restrict__ w, const C *ws, int f, int64_t n,
                                                        int64_t N, C (&wr)[P])
    {
        if (ws) {
            const int ns = F * blockDim.x;
#pragma unroll
            for (int p = 0; p < P; ++p)
                wr[p] = ws[p * ns + f * blockDim.x + threadIdx.x];
            return;
        }
        const T *row = w + (n < N ? n : N - 1) * P;
#pragma unroll
        for (int p = 0; p < P; ++p)
            wr[p] = load<T>(row[p]);
    }

    /* o_j = Phi(x0) Phi(y0) sum over terms sign * w[n, path] * x_i * y_k */
    __device__ __forceinline__ void product(const T *__restrict__ w, const C *ws, int64_t n0, int64_t N)
    {
#pragma unroll
        for (int f = 0; f < F; ++f) {
            C wr[P];
            load_weights(w, ws, f, n0 + f, N, wr);
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
 * n = t * F + f: the warp then reads consecutive words (no bank conflicts), where reading
 * the rows from global memory touched 32 cache lines per load instruction. Features past N
 * get zeros. Reads are coalesced; done once per block, which then loops over many rows. */
template <int P, int F, class T, class C>
__device__ __forceinline__ void stage_weights(const T *__restrict__ w, C *ws, int64_t N)
{
    const int tx = blockDim.x, nthreads = blockDim.x * blockDim.y;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int ns = F * tx;
    for (int64_t i = tid; i < N * P; i += nthreads) {
        const int64_t n = i / P;
        const int p = (int)(i % P);
        ws[p * ns + (int)(n % F) * tx + (int)(n / F)] = load<T>(w[i]);
    }
    for (int i = tid; i < (ns - (int)N) * P; i += nthreads) {
        const int n = (int)N + i / P, p = i % P;
        ws[p * ns + (n % F) * tx + n / F] = C(0);
    }
    __syncthreads();
}

template <int ALG, class T, int F, bool RESIDENT>
__global__ void sgp_forward_kernel(const T *__restrict__ x, const T *__restrict__ y, const T *__restrict__ w,
                                   T *__restrict__ out, typename Compute<T>::type *__restrict__ norms, int64_t B,
                                   int64_t N, int normalize, int vec, int staged)
{
    using A = AlgebraTraits<ALG>;
    using C = typename Compute<T>::type;
    constexpr int D = A::D, G = A::G;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    C *red = reinterpret_cast<C *>(smem_raw) + threadIdx.y * (blockDim.x / 32) * G;
    C *ws = nullptr;
    if (RESIDENT && staged) {
        ws = reinterpret_cast<C *>(smem_raw) + blockDim.y * (blockDim.x / 32) * G;
        stage_weights<A::P, F>(w, ws, N);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int64_t BN = B * N;
    const int64_t chunk_stride = (int64_t)blockDim.x * F;
    const int64_t chunks = RESIDENT ? 1 : (N + chunk_stride - 1) / chunk_stride;

    Chunk<ALG, T, F> c;
    for (int64_t base = (int64_t)blockIdx.x * blockDim.y; base < B; base += (int64_t)gridDim.x * blockDim.y) {
        const int64_t b = base + threadIdx.y;
        const bool valid = b < B;
        const int64_t row = b * N;
        C inv[G], acc[G];
#pragma unroll
        for (int g = 0; g < G; ++g)
            acc[g] = 0;
        /* pass 1: o and the norm parts (the only pass for resident rows) */
        for (int64_t ch = 0; ch < chunks; ++ch) {
            const int64_t n0 = ch * chunk_stride + (int64_t)threadIdx.x * F;
            if (valid && n0 < N) {
                c.load_inputs(x, y, BN, row, n0, N, vec);
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
                    c.load_inputs(x, y, BN, row, n0, N, vec);
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
}

template <int ALG, class T, int F, bool RESIDENT>
__global__ void sgp_backward_kernel(const T *__restrict__ gout, const T *__restrict__ x, const T *__restrict__ y,
                                    const T *__restrict__ w, const typename Compute<T>::type *__restrict__ norms,
                                    T *__restrict__ grad_x, T *__restrict__ grad_y,
                                    typename Compute<T>::type *__restrict__ partial, int64_t B, int64_t N,
                                    int normalize, int vec, int staged)
{
    using A = AlgebraTraits<ALG>;
    using C = typename Compute<T>::type;
    constexpr int D = A::D, G = A::G, P = A::P;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int warps = blockDim.x >> 5;
    C *red = reinterpret_cast<C *>(smem_raw) + threadIdx.y * warps * 2 * G;
    C *combine = reinterpret_cast<C *>(smem_raw) + blockDim.y * warps * 2 * G; /* (N, P) when blockDim.y > 1 */
    C *ws = nullptr;
    if (RESIDENT && staged) {
        ws = combine + (blockDim.y > 1 ? N * P : 0);
        stage_weights<P, F>(w, ws, N);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t BN = B * N;
    const int64_t chunk_stride = (int64_t)blockDim.x * F;
    const int64_t chunks = RESIDENT ? 1 : (N + chunk_stride - 1) / chunk_stride;
    C *slot = partial + (int64_t)blockIdx.x * N * P; /* this block's weight-gradient partial */

    C gw[RESIDENT ? F : 1][P]; /* resident rows: this thread's features, summed over the rows it visits */
#pragma unroll
    for (int f = 0; f < (RESIDENT ? F : 1); ++f)
#pragma unroll
        for (int p = 0; p < P; ++p)
            gw[f][p] = 0;
    if (!RESIDENT) { /* the two-pass path adds into its slot directly (one row group per block) */
        for (int64_t n = threadIdx.x; n < N * P; n += blockDim.x)
            slot[n] = 0;
        __syncthreads();
    }

    Chunk<ALG, T, F> c;
    for (int64_t base = (int64_t)blockIdx.x * blockDim.y; base < B; base += (int64_t)gridDim.x * blockDim.y) {
        const int64_t b = base + threadIdx.y;
        const bool valid = b < B;
        const int64_t row = b * N;
        C go[D][F];
        C red_v[2 * G]; /* dot_g, then q_g when norms were not saved */
        C r[G], dcoef[G];
#pragma unroll
        for (int k = 0; k < 2 * G; ++k)
            red_v[k] = 0;
        if (normalize) {
            for (int64_t ch = 0; ch < chunks; ++ch) {
                const int64_t n0 = ch * chunk_stride + (int64_t)threadIdx.x * F;
                if (valid && n0 < N) {
                    c.load_inputs(x, y, BN, row, n0, N, vec);
                    c.product(w, ws, n0, N);
                    static_for<D>([&](auto i) {
                        constexpr int a = decltype(i)::value;
                        constexpr int g = A::table.grade[a];
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
            group_sum_runtime(red_v, red, warp, lane, warps);
#pragma unroll
            for (int g = 0; g < G; ++g) {
                r[g] = norms ? (valid ? norms[b * G + g] : C(1))
                             : sqrt((N > 0 ? red_v[G + g] / C(N) : C(0)) + C(FC_NORM_EPS));
                /* through r: d out_A / d o = -dot_g sign(t_g) s_A o_A / (N r^3) */
                dcoef[g] = N > 0 ? red_v[g] / (C(N) * r[g] * r[g] * r[g]) : C(0);
            }
        }
        for (int64_t ch = 0; ch < chunks; ++ch) {
            const int64_t n0 = ch * chunk_stride + (int64_t)threadIdx.x * F;
            if (!(valid && n0 < N))
                continue;
            if (!RESIDENT || !normalize) {
                c.load_inputs(x, y, BN, row, n0, N, vec);
                c.product(w, ws, n0, N);
#pragma unroll
                for (int a = 0; a < D; ++a)
                    load_chunk<T, F>(gout + a * BN + row, n0, N, vec, go[a]);
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
                        go[a][f] = go[a][f] / r[g] - dcoef[g] * sign_of(t[g][f]) * C(s) * c.o[a][f];
                });
            }
            /* through the product and the gates */
            C gxv[D][F], gyv[D][F];
#pragma unroll
            for (int f = 0; f < F; ++f) {
                C wr[P], gw_f[P];
                c.load_weights(w, ws, f, n0 + f, N, wr);
#pragma unroll
                for (int p = 0; p < P; ++p)
                    gw_f[p] = 0;
#pragma unroll
                for (int a = 0; a < D; ++a)
                    gxv[a][f] = gyv[a][f] = 0;
                static_for<A::T>([&](auto tt) {
                    constexpr fc_term e = A::table.term[decltype(tt)::value];
                    const C xi = c.x[e.i][f], yk = c.y[e.k][f], gj = go[e.j][f];
                    const C sw = C(e.sign) * wr[e.path];
                    gxv[e.i][f] += sw * gj * yk;
                    gyv[e.k][f] += sw * xi * gj;
                    gw_f[e.path] += C(e.sign) * xi * yk * gj;
                });
                /* xg_i = x_i Phi(x0), yg_k = y_k Phi(y0): the gates scale every term */
                const C gg = n0 + f < N ? c.gx[f] * c.gy[f] : C(0);
#pragma unroll
                for (int p = 0; p < P; ++p) {
                    if constexpr (RESIDENT)
                        gw[f][p] += gw_f[p] * gg;
                    else if (n0 + f < N)
                        slot[(n0 + f) * P + p] += gw_f[p] * gg;
                }
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
                gxv[0][f] += sx * gelu_gate_grad(c.x[0][f]);
                gyv[0][f] += sy * gelu_gate_grad(c.y[0][f]);
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
    if constexpr (RESIDENT) {
        /* combine the row groups of the block in order, then write the block's slot */
        const int64_t n0 = (int64_t)threadIdx.x * F;
        for (int ry = 0; ry < (int)blockDim.y; ++ry) {
            if (threadIdx.y == ry) {
#pragma unroll
                for (int f = 0; f < F; ++f) {
                    if (n0 + f >= N)
                        break;
#pragma unroll
                    for (int p = 0; p < P; ++p) {
                        const int64_t k = (n0 + f) * P + p;
                        const C v = ry == 0 ? gw[f][p] : combine[k] + gw[f][p];
                        if (ry + 1 == (int)blockDim.y)
                            slot[k] = v;
                        else
                            combine[k] = v;
                    }
                }
            }
            if (blockDim.y > 1)
                __syncthreads();
        }
    }
}

/* grad_weight[k] = sum over s of partial[s][k], s in order: deterministic. */
template <class T>
__global__ void sum_partials_kernel(const typename Compute<T>::type *__restrict__ partial, T *__restrict__ out,
                                    int64_t S, int64_t K)
{
    using C = typename Compute<T>::type;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < K; k += (int64_t)gridDim.x * blockDim.x) {
        C s = 0;
        for (int64_t i = 0; i < S; ++i)
            s += partial[i * K + k];
        out[k] = store<T>(s);
    }
}

/* Launch shape of one call, the same for the workspace query and the launch. */
struct Config {
    int F;
    int tx, ty;       /* block (threads per row, rows per block) */
    bool resident;
    bool staged;      /* weights copied to shared memory */
    int64_t grid;
    size_t smem;
};

constexpr size_t kStageBytes = 96 * 1024; /* at most: two blocks per SM still fit */

/* Per kernel, once: the most threads a block of it can have (its register use decides). */
template <auto Kernel> int max_threads()
{
    static const int value = [] {
        cudaFuncAttributes at;
        if (cudaFuncGetAttributes(&at, Kernel) != cudaSuccess) {
            cudaGetLastError();
            return 128;
        }
        return at.maxThreadsPerBlock / 32 * 32;
    }();
    return value;
}

template <int ALG, class T, bool BWD> Config make_config(int64_t B, int64_t N, int device);

/* Threads a row may use: the fewer that the resident and the two-pass kernel allow. */
template <int ALG, class T, bool BWD> int row_threads()
{
    using A = AlgebraTraits<ALG>;
    if constexpr (BWD) {
        constexpr int F = bwd_features<A::D, T>();
        return std::min(max_threads<sgp_backward_kernel<ALG, T, F, true>>(),
                        max_threads<sgp_backward_kernel<ALG, T, F, false>>());
    } else {
        constexpr int F = fwd_features<A::D, T>();
        return std::min(max_threads<sgp_forward_kernel<ALG, T, F, true>>(),
                        max_threads<sgp_forward_kernel<ALG, T, F, false>>());
    }
}

template <int ALG, class T, bool BWD> Config make_config(int64_t B, int64_t N, int device)
{
    using A = AlgebraTraits<ALG>;
    using C = typename Compute<T>::type;
    Config c{};
    c.F = BWD ? bwd_features<A::D, T>() : fwd_features<A::D, T>();
    const int64_t need = (N + c.F - 1) / c.F; /* threads for a resident row */
    const int most = std::min(kMaxRowThreads, row_threads<ALG, T, BWD>());
    c.resident = need <= most;
    int64_t tx = c.resident ? ((std::max<int64_t>(need, 1) + 31) / 32) * 32 : most;
    c.tx = (int)tx;
    c.ty = c.tx >= kBlockThreads ? 1 : kBlockThreads / c.tx;
    const int64_t groups = (B + c.ty - 1) / c.ty;
    const int sms = sm_count(device);
    /* forward: enough blocks to fill the GPU, rows looped beyond that; backward: two per
     * multiprocessor, which bounds the weight-gradient partials (S = grid) independently of B */
    const int warps = c.tx / 32;
    c.smem = (size_t)c.ty * warps * (BWD ? 2 : 1) * A::G * sizeof(C);
    if (BWD && c.ty > 1)
        c.smem += (size_t)N * A::P * sizeof(C);
    const size_t stage = (size_t)c.F * c.tx * A::P * sizeof(C);
    c.staged = c.resident && stage <= kStageBytes;
    if (c.staged)
        c.smem += stage;
    /* blocks loop over rows: few enough that staging the weights is paid once per many rows
     * (and, in backward, that the S = grid weight-gradient partials stay small) */
    const int64_t per_sm = BWD ? 2 : std::max(1, std::min(4, 2048 / (c.tx * c.ty)));
    c.grid = std::max<int64_t>(1, std::min(groups, per_sm * (int64_t)sms));
    return c;
}

inline bool aligned(const void *p, size_t bytes) { return p == nullptr || ((uintptr_t)p % bytes) == 0; }

/* cudaFuncSetAttribute once per kernel (needed above 48 KB of shared memory). */
template <auto Kernel> fc_status allow_smem(size_t smem)
{
    static std::once_flag once;
    static cudaError_t err = cudaSuccess;
    if (smem > 48 * 1024) {
        std::call_once(once, [] {
            err = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
        });
        if (err != cudaSuccess)
            return cuda_fail(err, __FILE__, __LINE__, "cudaFuncSetAttribute");
    }
    return FC_OK;
}

template <int ALG, class T> fc_status forward(const fc_args *a, cudaStream_t stream)
{
    using C = typename Compute<T>::type;
    const Config cfg = make_config<ALG, T, false>(a->B, a->N_in, a->device);
    const size_t vb = sizeof(T) * cfg.F;
    const bool vec = a->N_in % cfg.F == 0 && aligned(a->x, vb) && aligned(a->y, vb) && aligned(a->out, vb);
    const dim3 block(cfg.tx, cfg.ty);
    const T *x = (const T *)a->x, *y = (const T *)a->y, *w = (const T *)a->weight;
    T *out = (T *)a->out;
    C *norms = (C *)a->norms;
    constexpr int F = fwd_features<AlgebraTraits<ALG>::D, T>();
    if (cfg.resident) {
        constexpr auto k = sgp_forward_kernel<ALG, T, F, true>;
        if (fc_status st = allow_smem<k>(cfg.smem))
            return st;
        k<<<(unsigned)cfg.grid, block, cfg.smem, stream>>>(x, y, w, out, norms, a->B, a->N_in, a->normalize, vec,
                                                            cfg.staged);
    } else {
        constexpr auto k = sgp_forward_kernel<ALG, T, F, false>;
        if (fc_status st = allow_smem<k>(cfg.smem))
            return st;
        k<<<(unsigned)cfg.grid, block, cfg.smem, stream>>>(x, y, w, out, norms, a->B, a->N_in, a->normalize, vec,
                                                            cfg.staged);
    }
    FC_LAUNCH_CHECK(stream);
    return FC_OK;
}

template <int ALG, class T> size_t partial_bytes(const fc_args *a)
{
    using C = typename Compute<T>::type;
    if (a->B == 0 || a->N_in == 0)
        return 0;
    const Config cfg = make_config<ALG, T, true>(a->B, a->N_in, a->device);
    return (size_t)cfg.grid * (size_t)a->N_in * AlgebraTraits<ALG>::P * sizeof(C);
}

template <int ALG, class T> fc_status backward(const fc_args *a, cudaStream_t stream)
{
    using C = typename Compute<T>::type;
    constexpr int P = AlgebraTraits<ALG>::P;
    if (a->B == 0) {
        if (a->grad_weight)
            FC_CUDA_CHECK(cudaMemsetAsync(a->grad_weight, 0, (size_t)a->N_in * P * sizeof(T), stream));
        return FC_OK;
    }
    if (a->N_in == 0)
        return FC_OK;
    const size_t need = partial_bytes<ALG, T>(a);
    if (a->workspace_bytes < need || (need && !a->workspace)) {
        fc_set_error("workspace: expected at least %zu bytes, got %zu", need, a->workspace_bytes);
        return FC_ERR_VALUE;
    }
    const Config cfg = make_config<ALG, T, true>(a->B, a->N_in, a->device);
    const size_t vb = sizeof(T) * cfg.F;
    const bool vec = a->N_in % cfg.F == 0 && aligned(a->x, vb) && aligned(a->y, vb) && aligned(a->grad_out, vb) &&
                     aligned(a->grad_x, vb) && aligned(a->grad_y, vb);
    const dim3 block(cfg.tx, cfg.ty);
    const T *g = (const T *)a->grad_out, *x = (const T *)a->x, *y = (const T *)a->y, *w = (const T *)a->weight;
    T *gx = (T *)a->grad_x, *gy = (T *)a->grad_y;
    const C *norms = (const C *)a->norms;
    C *partial = (C *)a->workspace;
    constexpr int F = bwd_features<AlgebraTraits<ALG>::D, T>();
    if (cfg.resident) {
        constexpr auto k = sgp_backward_kernel<ALG, T, F, true>;
        if (fc_status st = allow_smem<k>(cfg.smem))
            return st;
        k<<<(unsigned)cfg.grid, block, cfg.smem, stream>>>(g, x, y, w, norms, gx, gy, partial, a->B, a->N_in,
                                                            a->normalize, vec, cfg.staged);
    } else {
        constexpr auto k = sgp_backward_kernel<ALG, T, F, false>;
        if (fc_status st = allow_smem<k>(cfg.smem))
            return st;
        k<<<(unsigned)cfg.grid, block, cfg.smem, stream>>>(g, x, y, w, norms, gx, gy, partial, a->B, a->N_in,
                                                            a->normalize, vec, cfg.staged);
    }
    FC_LAUNCH_CHECK(stream);
    if (a->grad_weight) {
        const int64_t K = a->N_in * P;
        const int threads = 256;
        const int64_t blocks = std::min<int64_t>((K + threads - 1) / threads, 65535);
        sum_partials_kernel<T><<<(unsigned)blocks, threads, 0, stream>>>(partial, (T *)a->grad_weight, cfg.grid, K);
        FC_LAUNCH_CHECK(stream);
    }
    return FC_OK;
}

/* Run the op for one algebra, any dtype. Defined once per algebra by
 * FC_SGP_INSTANTIATE in sgp_<id>.cu, so the algebras compile in parallel. */
template <int ALG> struct Entry {
    template <template <int, class> class Op, class R> static R by_dtype(const fc_args *a, cudaStream_t s, R bad)
    {
        switch (a->dtype) {
        case FC_F32: return Op<ALG, float>::run(a, s);
        case FC_F64: return Op<ALG, double>::run(a, s);
        case FC_BF16: return Op<ALG, __nv_bfloat16>::run(a, s);
        case FC_F16: return Op<ALG, __half>::run(a, s);
        }
        return bad;
    }
    static fc_status forward(const fc_args *a, cudaStream_t s);
    static fc_status backward(const fc_args *a, cudaStream_t s);
    static size_t workspace(const fc_args *a);
};

template <int ALG, class T> struct ForwardOp {
    static fc_status run(const fc_args *a, cudaStream_t s) { return sgp::forward<ALG, T>(a, s); }
};
template <int ALG, class T> struct BackwardOp {
    static fc_status run(const fc_args *a, cudaStream_t s) { return sgp::backward<ALG, T>(a, s); }
};
template <int ALG, class T> struct WorkspaceOp {
    static size_t run(const fc_args *a, cudaStream_t) { return partial_bytes<ALG, T>(a); }
};

} // namespace sgp
} // namespace fc

#define FC_SGP_INSTANTIATE(ID)                                                                                \
    template <> fc_status fc::sgp::Entry<ID>::forward(const fc_args *a, cudaStream_t s)                       \
    {                                                                                                         \
        return by_dtype<ForwardOp, fc_status>(a, s, FC_ERR_TYPE);                                             \
    }                                                                                                         \
    template <> fc_status fc::sgp::Entry<ID>::backward(const fc_args *a, cudaStream_t s)                      \
    {                                                                                                         \
        return by_dtype<BackwardOp, fc_status>(a, s, FC_ERR_TYPE);                                            \
    }                                                                                                         \
    template <> size_t fc::sgp::Entry<ID>::workspace(const fc_args *a)                                        \
    {                                                                                                         \
        return by_dtype<WorkspaceOp, size_t>(a, nullptr, 0);                                                  \
    }
