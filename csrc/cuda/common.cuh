/* common.cuh — what every CUDA file of flashclifford shares: the error check that turns a
 * CUDA error into an fc_status (never exits, clears the sticky last error), the device
 * guard, dtype load/store in the compute type, the GELU gate, the deterministic block
 * reduction, and cached device facts.
 *
 * Compute type: double for double data, float for float, bfloat16 and half.
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <type_traits>

#include "../fc.h"

namespace fc {

/* Whether p (NULL: nothing to load) is aligned to `bytes`, a vector load's width: the SGP's
 * vector paths, and the Hopper FCGP's two-element loads (2 x the element's size) */
__host__ __device__ inline bool aligned(const void *p, size_t bytes)
{
    return p == nullptr || (uintptr_t)p % bytes == 0;
}

/* Record "file:line: call: error" for fc_error_message and map the error to a status. */
inline fc_status cuda_fail(cudaError_t e, const char *file, int line, const char *what)
{
    cudaGetLastError(); /* clear the error so the next, unrelated call does not report it */
    fc_set_error("%s:%d: %s: %s", file, line, what, cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? FC_ERR_CUDA_OOM : FC_ERR_CUDA;
}

#define FC_CUDA_CHECK(call)                                                   \
    do {                                                                      \
        cudaError_t fc_e_ = (call);                                           \
        if (fc_e_ != cudaSuccess)                                             \
            return ::fc::cuda_fail(fc_e_, __FILE__, __LINE__, #call);         \
    } while (0)

/* After every launch; the debug build (FLASHCLIFFORD_CUDA_SYNC) also waits for the kernel
 * so a fault is reported at the launch that caused it. */
#ifdef FLASHCLIFFORD_CUDA_SYNC
#define FC_LAUNCH_CHECK(stream)                                               \
    do {                                                                      \
        FC_CUDA_CHECK(cudaGetLastError());                                    \
        FC_CUDA_CHECK(cudaStreamSynchronize(stream));                         \
    } while (0)
#else
#define FC_LAUNCH_CHECK(stream) FC_CUDA_CHECK(cudaGetLastError())
#endif

/* Makes `device` current for the scope and restores the caller's device after. */
struct DeviceGuard {
    int previous = -1;
    fc_status status = FC_OK;
    explicit DeviceGuard(int device)
    {
        cudaError_t e = cudaGetDevice(&previous);
        if (e == cudaSuccess && previous != device)
            e = cudaSetDevice(device);
        else
            previous = -1;
        if (e != cudaSuccess) {
            status = cuda_fail(e, __FILE__, __LINE__, "cudaSetDevice");
            previous = -1;
        }
    }
    ~DeviceGuard()
    {
        if (previous >= 0)
            cudaSetDevice(previous);
    }
    DeviceGuard(const DeviceGuard &) = delete;
    DeviceGuard &operator=(const DeviceGuard &) = delete;
};

/* What launch shapes depend on, queried once per device. */
struct DeviceFacts {
    int sms;
    int smem_per_block; /* opt-in maximum of dynamic shared memory a block may use */
    int smem_per_sm;
    int regs_per_sm;
    int threads_per_sm;
    int cc_major, cc_minor; /* compute capability (0.0 when the query failed) */
};
const DeviceFacts &device_facts(int device);
int sm_count(int device); /* device_facts(device).sms */

template <class T> struct Compute { using type = float; };
template <> struct Compute<double> { using type = double; };

template <class T> __device__ __forceinline__ typename Compute<T>::type load(T v) { return v; }
template <> __device__ __forceinline__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float load(__half v) { return __half2float(v); }

template <class T> __device__ __forceinline__ T store(typename Compute<T>::type v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half store<__half>(float v) { return __float2half_rn(v); }

/* GELU gate Phi(t) = (1 + erf(t / sqrt 2)) / 2 and its derivative phi(t), exact erf. */
__device__ __forceinline__ float gelu_gate(float t) { return 0.5f * (1.0f + erff(t * 0.70710678118654752f)); }
__device__ __forceinline__ double gelu_gate(double t) { return 0.5 * (1.0 + erf(t * 0.70710678118654752)); }
/* Phi with erf from Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7 in erf, 7e-8 in Phi; ~15
 * instructions against erff's ~25): for 2-byte data, whose rounding (2^-8, 2^-11) is far larger;
 * the issue-bound 2-byte kernels evaluate two or four gates a feature. Phi(t) = 1 - c for
 * t >= 0 and c for t < 0, c = erfc(|t| / sqrt 2) / 2 = poly(u) exp(-t^2 / 2) / 2. */
__device__ __forceinline__ float gelu_gate_approx(float t)
{
    const float u = __fdividef(1.0f, fmaf(fabsf(t), 0.3275911f * 0.70710678118654752f, 1.0f));
    float poly = fmaf(u, 1.061405429f * 0.5f, -1.453152027f * 0.5f);
    poly = fmaf(u, poly, 1.421413741f * 0.5f);
    poly = fmaf(u, poly, -0.284496736f * 0.5f);
    poly = fmaf(u, poly, 0.254829592f * 0.5f);
    const float c = poly * u * __expf(-0.5f * t * t);
    return t >= 0.0f ? 1.0f - c : c;
}
/* the gate a kernel for data type T evaluates */
template <class T> __device__ __forceinline__ typename Compute<T>::type gate_of(typename Compute<T>::type t)
{
    if constexpr (sizeof(T) == 2)
        return gelu_gate_approx(t);
    else
        return gelu_gate(t);
}
__device__ __forceinline__ float gelu_gate_grad(float t) { return 0.39894228040143268f * expf(-0.5f * t * t); }
__device__ __forceinline__ double gelu_gate_grad(double t) { return 0.39894228040143268 * exp(-0.5 * t * t); }
/* phi for data type T: 2-byte data take the hardware exp (relative error ~1e-6 here, again far
 * below their rounding; 2 instructions against expf's ~10) */
template <class T> __device__ __forceinline__ typename Compute<T>::type gate_grad_of(typename Compute<T>::type t)
{
    if constexpr (sizeof(T) == 2)
        return 0.39894228040143268f * __expf(-0.5f * t * t);
    else
        return gelu_gate_grad(t);
}

/* Every element of an accumulator array, of any rank, set to zero. */
template <class T> __device__ __forceinline__ void zero_all(T &v) { v = T(0); }
template <class T, int N> __device__ __forceinline__ void zero_all(T (&a)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        zero_all(a[i]);
}

/* The D components of one position, components cs apart, in the compute type. */
template <int D, class E, class C>
__device__ __forceinline__ void load_comps(const E *__restrict__ x, int64_t cs, C (&v)[D])
{
#pragma unroll
    for (int a = 0; a < D; ++a)
        v[a] = load<E>(x[a * cs]);
}

/* Two adjacent positions' D components (x[0], x[1] at each component, components cs apart), one
 * 2-element load a component: x 2-element aligned, cs even. */
template <int D, class E>
__device__ __forceinline__ void load_comps2(const E *__restrict__ x, int64_t cs, float (&v)[2][D])
{
#pragma unroll
    for (int a = 0; a < D; ++a) {
        float2 f;
        if constexpr (std::is_same<E, __nv_bfloat16>::value)
            f = __bfloat1622float2(*(const __nv_bfloat162 *)(x + a * cs));
        else
            f = *(const float2 *)(x + a * cs);
        v[0][a] = f.x, v[1][a] = f.y;
    }
}

/* v0, v1 into p[0], p[1] (2-element aligned) as one store, each rounded as store<E> rounds. */
template <class E> __device__ __forceinline__ void store2(E *__restrict__ p, float v0, float v1)
{
    if constexpr (std::is_same<E, __nv_bfloat16>::value)
        *(__nv_bfloat162 *)p = __floats2bfloat162_rn(v0, v1);
    else
        *(float2 *)p = make_float2(v0, v1);
}

/* The type whose gate (gate_of) a kernel evaluates: E where given (its data type: 2-byte data take
 * the short erf), else the compute type C itself (erf). */
template <class E, class C> using GateType = std::conditional_t<std::is_void<E>::value, C, E>;

/* MVGELU at one position from its components xr: v_a = x_a Phi(x_0); without the gate v = x.
 * E: as GateType. */
template <class E = void, int D, class C> __device__ __forceinline__ void gelu_of(int gate, const C (&xr)[D], C (&v)[D])
{
    const C ph = gate ? C(gate_of<GateType<E, C>>(xr[0])) : C(1);
#pragma unroll
    for (int a = 0; a < D; ++a)
        v[a] = xr[a] * ph;
}

/* ... loaded from x (the FCGP gz kernels' epilogues, which form xg and yg so instead of reading
 * copies a prepass wrote), components cs apart. */
template <int D, class E, class C>
__device__ __forceinline__ void gelu_at(int gate, const E *__restrict__ x, int64_t cs, C (&v)[D])
{
    C xr[D];
    load_comps(x, cs, xr);
    gelu_of(gate, xr, v);
}

/* The MVGELU backward at one position (the FCGP gz kernels): t = dL/dxg (D values), xr the
 * position's x, g = dL/dx (D values). g_a = t_a Phi(x_0), plus phi(x_0) sum_b t_b x_b at a = 0;
 * without the gate (the plain product) g = t, and xr is not read. */
/* ... with ph = Phi(x_0), dph = phi(x_0) given (read only under the gate): the FCGP gz kernels form
 * them once a position for MVGELU and its backward. */
template <int D, class C>
__device__ __forceinline__ void gate_backward_with(int gate, C ph, C dph, const C (&t)[D], const C (&xr)[D], C (&g)[D])
{
    if (!gate) {
#pragma unroll
        for (int a = 0; a < D; ++a)
            g[a] = t[a];
        return;
    }
    C s0 = 0;
#pragma unroll
    for (int a = 0; a < D; ++a)
        s0 += t[a] * xr[a];
#pragma unroll
    for (int a = 0; a < D; ++a)
        g[a] = t[a] * ph + (a == 0 ? s0 * dph : C(0));
}
template <class E = void, int D, class C>
__device__ __forceinline__ void gate_backward_vals(int gate, const C (&t)[D], const C (&xr)[D], C (&g)[D])
{
    using G = GateType<E, C>;
    const C x0 = xr[0];
    if (gate)
        gate_backward_with(1, gate_of<G>(x0), gate_grad_of<G>(x0), t, xr, g);
    else
        gate_backward_with(0, C(1), C(0), t, xr, g);
}
/* ... stored at g, components cs apart (store<Tout>'s rounding). */
template <class E = void, int D, class C, class Tout>
__device__ __forceinline__ void gate_backward_of(int gate, const C (&t)[D], const C (&xr)[D], Tout *__restrict__ g,
                                                 int64_t cs)
{
    C v[D];
    gate_backward_vals<E>(gate, t, xr, v);
#pragma unroll
    for (int a = 0; a < D; ++a)
        g[a * cs] = store<Tout>(v[a]);
}

/* ... with x loaded (at the same stride) only where the gate needs it. */
template <int D, class E, class C, class Tout>
__device__ __forceinline__ void gate_backward(int gate, const C (&t)[D], const E *__restrict__ x,
                                              Tout *__restrict__ g, int64_t cs)
{
    C xr[D] = {};
    if (gate)
        load_comps(x, cs, xr);
    gate_backward_of(gate, t, xr, g, cs);
}

/* The 32-bit shared-window address of a pointer into shared memory (cp.async, ldmatrix,
 * mbarrier and tensor-copy operands). */
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

template <class C> __device__ __forceinline__ C sign_of(C t) { return t > C(0) ? C(1) : (t < C(0) ? C(-1) : C(0)); }

/* A barrier over the threads of one row group (threadIdx.y): named barrier 1 + threadIdx.y
 * with blockDim.x threads, so the row groups of a block never wait for each other (id 0 is
 * __syncthreads'). Orders shared memory among those threads like __syncthreads. Needs
 * blockDim.y <= 15 and blockDim.x a multiple of 32. */
struct RowBarrier {
    __device__ __forceinline__ void operator()() const
    {
        asm volatile("bar.sync %0, %1;\n" ::"r"(1 + (int)threadIdx.y), "r"((int)blockDim.x) : "memory");
    }
};
struct BlockBarrier {
    __device__ __forceinline__ void operator()() const { __syncthreads(); }
};

/* Sum K values over the `warps` (<= 32) warps of one row group, deterministically: a fixed
 * xor tree in each warp, then the warp results through shared memory and the same fixed
 * tree over lanes (lane l holds warp l's value); every lane of every warp gets the same
 * sums. smem: warps * K values of C owned by this row group. Contains two barriers (bar):
 * every thread they span must call it the same number of times. With reuse = false the
 * second one (which lets smem be written again at once) is left out: the caller alternates
 * two scratch areas, whose reuse the next call's first barrier then orders. */
template <int K, class C, class Bar = BlockBarrier>
__device__ __forceinline__ void group_sum_runtime(C (&v)[K], C *smem, int warp, int lane, int warps, Bar bar = {},
                                                  bool reuse = true)
{
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            v[k] += __shfl_xor_sync(0xffffffffu, v[k], off);
    }
    if (lane == 0) {
#pragma unroll
        for (int k = 0; k < K; ++k)
            smem[warp * K + k] = v[k];
    }
    bar();
    /* K loads a thread instead of warps * K (a thread of a 16-warp row used to add 128 words) */
#pragma unroll
    for (int k = 0; k < K; ++k) {
        C s = lane < warps ? smem[lane * K + k] : C(0);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, off);
        v[k] = s;
    }
    if (reuse)
        bar(); /* smem may be reused right after */
}

/* Host: a bump layout of a workspace, every region 256-byte aligned (the copy engine's maps and
 * vector loads need 16). */
struct Bump {
    size_t off = 0;
    size_t take(size_t bytes)
    {
        const size_t o = off;
        off += (bytes + 255) & ~(size_t)255;
        return o;
    }
};

} // namespace fc
