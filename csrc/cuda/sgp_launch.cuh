/* sgp_launch.cuh — the host side of the CUDA SGP: the launch shape of a call (threads a
 * row, rows a block, shared-memory layout, one wave of blocks from the occupancy), the
 * workspace of weight-gradient partials, the launches on the caller's stream, and the
 * per-algebra entry points that FC_SGP_INSTANTIATE defines in sgp_<id>.cu. The kernels and
 * their design are in sgp_kernels.cuh.
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <mutex>

#include "sgp_kernels.cuh"

namespace fc {
namespace sgp {

/* Launch shape of one call, the same for the workspace query and the launch. */
struct Config {
    int F;
    int tx, ty;   /* block (threads per row, rows per block) */
    int mode;     /* kResident, kLongShared or kLong */
    Layout lay;
    int64_t grid;
    int device;
};

/* Per kernel, once: its attributes (register use decides the threads a block may have). */
template <auto Kernel> const cudaFuncAttributes &attributes()
{
    static const cudaFuncAttributes value = [] {
        cudaFuncAttributes at{};
        if (cudaFuncGetAttributes(&at, Kernel) != cudaSuccess) {
            cudaGetLastError();
            at.maxThreadsPerBlock = 128;
            at.numRegs = 255;
        }
        return at;
    }();
    return value;
}

/* Blocks of `threads` threads and `smem` bytes one multiprocessor holds at once (the
 * occupancy calculation: registers in 256-register warp units, 1 KB reserved per block). */
template <auto Kernel> int64_t blocks_per_sm(int threads, size_t smem, int device)
{
    const DeviceFacts &d = device_facts(device);
    const int warps = (threads + 31) / 32;
    const int warp_regs = (attributes<Kernel>().numRegs * 32 + 255) / 256 * 256;
    const int64_t by_regs = d.regs_per_sm / std::max(1, warps * warp_regs);
    const int64_t by_smem = (int64_t)d.smem_per_sm / (int64_t)(smem + 1024);
    const int64_t by_threads = d.threads_per_sm / threads;
    return std::max<int64_t>(1, std::min<int64_t>({by_regs, by_smem, by_threads, 32}));
}

/* The x/y prefetch stages can be switched off (FLASHCLIFFORD_SGP_PIPE=0) to compare. */
inline bool pipe_enabled()
{
    static const bool on = [] {
        const char *e = std::getenv("FLASHCLIFFORD_SGP_PIPE");
        return !(e && e[0] == '0');
    }();
    return on;
}

inline size_t align16(size_t n) { return (n + 15) / 16 * 16; }

template <int ALG, class T, bool BWD, int MODE> constexpr auto kernel()
{
    using A = AlgebraTraits<ALG>;
    if constexpr (BWD)
        return sgp_backward_kernel<ALG, T, bwd_features<A::D, T>(), MODE>;
    else
        return sgp_forward_kernel<ALG, T, fwd_features<A::D, T>(), MODE>;
}

/* Elements per cp.async piece of the stages: the widest of 16 bytes (backward: pieces shared
 * by a row's threads) or F elements (forward: each thread copies its own features), else
 * 4 bytes, that N and the inputs' alignment allow; 0 when none does (then no stages). */
template <class T, bool BWD> constexpr int widest_piece(int F) { return BWD ? 16 / (int)sizeof(T) : F; }
template <class T> constexpr int narrowest_piece() { return sizeof(T) >= 4 ? 1 : 4 / (int)sizeof(T); }

/* E: the stage piece the inputs allow (0: none). Resident rows need their stages (at least
 * one), staged weights and, in backward, the weight-gradient sums in shared memory; rows
 * that do not fit take kLongShared (when the weights, and in backward the sums, fit) or kLong. */
template <int ALG, class T, bool BWD> Config make_config(int64_t B, int64_t N, int device, int E)
{
    using A = AlgebraTraits<ALG>;
    using C = typename Compute<T>::type;
    constexpr int P = A::P, D = A::D;
    const DeviceFacts &dev = device_facts(device);
    const size_t limit = (size_t)dev.smem_per_block;
    Config c{};
    c.device = device;
    c.F = BWD ? bwd_features<D, T>() : fwd_features<D, T>();
    const int64_t need = (N + c.F - 1) / c.F; /* threads for a resident row */
    /* threads a row may use: registers (the fewest of the kernels) and, in backward, the
     * shared weight-gradient accumulators (F * P values a thread) */
    int most = std::min({kMaxRowThreads, attributes<kernel<ALG, T, BWD, kResident>()>().maxThreadsPerBlock,
                         attributes<kernel<ALG, T, BWD, kLongShared>()>().maxThreadsPerBlock,
                         attributes<kernel<ALG, T, BWD, kLong>()>().maxThreadsPerBlock});
    if (BWD)
        most = std::min(most, (int)std::min<int64_t>(kMaxRowThreads, (int64_t)(limit / 2) / (int64_t)(c.F * padded_paths<P, C>() * sizeof(C))));
    most = std::max(32, most / 32 * 32);
    /* the block, whatever the mode: a row that fits one row group gets just the warps it
     * needs (rows without stage pieces, odd N in 2-byte types, take the long modes too) */
    c.tx = need <= most ? (int)((std::max<int64_t>(need, 1) + 31) / 32) * 32 : most;
    c.ty = c.tx >= kBlockThreads ? 1 : kBlockThreads / c.tx;
    const int64_t cs = (int64_t)c.tx * c.F;
    const int64_t L = (N + cs - 1) / cs * cs;
    c.lay.L = L < INT32_MAX ? (int)L : 0;
    /* the row groups' reduction scratch, at the start of shared memory */
    auto scratch = [&](int ty) { return align16((size_t)ty * (c.tx / 32) * (BWD ? 2 : 1) * A::G * sizeof(C)); };
    size_t used = scratch(c.ty);
    c.mode = kLong;
    if (need <= most && E) {
        const size_t acc = BWD ? (size_t)c.ty * padded_paths<P, C>() * c.lay.L * sizeof(C) : 0;
        const size_t ws = (size_t)padded_paths<P, T>() * c.lay.L * sizeof(T);
        const size_t stage = (size_t)(BWD ? 3 : 2) * D * c.ty * c.lay.L * sizeof(T);
        const size_t base = align16(align16(used + acc) + ws);
        if (base + stage <= limit) {
            c.mode = kResident;
            c.lay.acc_off = BWD ? used : 0;
            c.lay.ws_off = align16(used + acc);
            c.lay.pipe_off = base;
            c.lay.E = E;
            c.lay.stages = pipe_enabled() && base + 2 * stage <= limit ? 2 : 1;
            used = base + c.lay.stages * stage;
        }
    }
    if (c.mode != kResident) {
        /* staged weights (and backward's shared sums, for all the block's row groups, else
         * for one) */
        for (int ty : {c.ty, 1}) {
            if (!c.lay.L || c.mode == kLongShared)
                break;
            const size_t red = scratch(ty);
            const size_t acc = BWD ? (size_t)ty * padded_paths<P, C>() * c.lay.L * sizeof(C) : 0;
            const size_t ws = (size_t)padded_paths<P, T>() * c.lay.L * sizeof(T);
            if (align16(align16(red + acc) + ws) <= limit) {
                c.mode = kLongShared;
                c.ty = ty;
                c.lay.acc_off = red;
                c.lay.ws_off = align16(red + acc);
                used = align16(c.lay.ws_off + ws);
            }
        }
        if (BWD && c.mode == kLong && c.ty > 1) { /* the row groups of a block would share its slot */
            c.ty = 1;
            used = scratch(1);
        }
    }
    c.lay.total = used;
    const int64_t groups = (B + c.ty - 1) / c.ty;
    const int threads = c.tx * c.ty;
    int64_t per_sm;
    switch (c.mode) {
    case kResident: per_sm = blocks_per_sm<kernel<ALG, T, BWD, kResident>()>(threads, used, device); break;
    case kLongShared: per_sm = blocks_per_sm<kernel<ALG, T, BWD, kLongShared>()>(threads, used, device); break;
    default: per_sm = blocks_per_sm<kernel<ALG, T, BWD, kLong>()>(threads, used, device); break;
    }
    /* one wave of blocks that loop over the rows: staging is paid once per block, and in
     * backward the partials (S = grid) do not grow with B */
    c.grid = std::max<int64_t>(1, std::min(groups, per_sm * (int64_t)dev.sms));
    return c;
}

inline bool aligned(const void *p, size_t bytes) { return p == nullptr || ((uintptr_t)p % bytes) == 0; }

/* cudaFuncSetAttribute once per kernel: the opt-in maximum of dynamic shared memory. */
template <auto Kernel> fc_status allow_smem(size_t smem, int device)
{
    static std::once_flag once;
    static cudaError_t err = cudaSuccess;
    if (smem > 48 * 1024) {
        std::call_once(once, [device] {
            err = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       device_facts(device).smem_per_block);
        });
        if (err != cudaSuccess)
            return cuda_fail(err, __FILE__, __LINE__, "cudaFuncSetAttribute");
    }
    return FC_OK;
}

/* Launch the instance of the config's mode with the config's shape. */
template <int ALG, class T, bool BWD, class... Args>
fc_status launch(const Config &cfg, cudaStream_t stream, Args... args)
{
    const dim3 block(cfg.tx, cfg.ty);
    auto go = [&](auto k) -> fc_status {
        constexpr auto kfn = decltype(k)::value;
        if (fc_status st = allow_smem<kfn>(cfg.lay.total, cfg.device))
            return st;
        kfn<<<(unsigned)cfg.grid, block, cfg.lay.total, stream>>>(args..., cfg.lay);
        FC_LAUNCH_CHECK(stream);
        return FC_OK;
    };
    using std::integral_constant;
    switch (cfg.mode) {
    case kResident:
        return go(integral_constant<decltype(kernel<ALG, T, BWD, kResident>()), kernel<ALG, T, BWD, kResident>()>{});
    case kLongShared:
        return go(integral_constant<decltype(kernel<ALG, T, BWD, kLongShared>()), kernel<ALG, T, BWD, kLongShared>()>{});
    default: break;
    }
    return go(integral_constant<decltype(kernel<ALG, T, BWD, kLong>()), kernel<ALG, T, BWD, kLong>()>{});
}

template <class T, int F> bool vec_ok(int64_t N, std::initializer_list<const void *> ptrs)
{
    if (N % F)
        return false;
    for (const void *p : ptrs)
        if (!aligned(p, sizeof(T) * F))
            return false;
    return true;
}

/* The widest stage piece (elements) the row length and the pointers allow; 0 for none. */
template <class T> int stage_piece(int wide, int64_t N, std::initializer_list<const void *> ptrs)
{
    for (int E : {wide, narrowest_piece<T>()}) {
        bool ok = N % E == 0;
        for (const void *p : ptrs)
            ok = ok && aligned(p, sizeof(T) * E);
        if (ok)
            return E;
    }
    return 0;
}

template <int ALG, class T> fc_status forward(const fc_args *a, cudaStream_t stream)
{
    using C = typename Compute<T>::type;
    constexpr int F = fwd_features<AlgebraTraits<ALG>::D, T>();
    const bool vec = vec_ok<T, F>(a->N_in, {a->x, a->y, a->out});
    const int E = stage_piece<T>(widest_piece<T, false>(F), a->N_in, {a->x, a->y});
    const Config cfg = make_config<ALG, T, false>(a->B, a->N_in, a->device, E);
    return launch<ALG, T, false>(cfg, stream, (const T *)a->x, (const T *)a->y, (const T *)a->weight, (T *)a->out,
                                 (C *)a->norms, (int64_t)a->B, (int64_t)a->N_in, a->normalize, a->gate, (int)vec);
}

template <int ALG, class T> size_t partial_bytes(const fc_args *a)
{
    using C = typename Compute<T>::type;
    constexpr int F = bwd_features<AlgebraTraits<ALG>::D, T>();
    if (a->B == 0 || a->N_in == 0)
        return 0;
    /* the grid (one slot a block) depends on the mode, which depends on the inputs'
     * alignment: take the largest over the stage pieces a call may get */
    int64_t grid = 0;
    for (int E : {widest_piece<T, true>(F), narrowest_piece<T>(), 0})
        grid = std::max(grid, make_config<ALG, T, true>(a->B, a->N_in, a->device, E).grid);
    return (size_t)grid * (size_t)a->N_in * AlgebraTraits<ALG>::P * sizeof(C);
}

template <int ALG, class T> fc_status backward(const fc_args *a, cudaStream_t stream)
{
    using C = typename Compute<T>::type;
    constexpr int P = AlgebraTraits<ALG>::P;
    constexpr int F = bwd_features<AlgebraTraits<ALG>::D, T>();
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
    const bool vec = vec_ok<T, F>(a->N_in, {a->x, a->y, a->grad_out, a->grad_x, a->grad_y});
    const int E = stage_piece<T>(widest_piece<T, true>(F), a->N_in, {a->x, a->y, a->grad_out});
    const Config cfg = make_config<ALG, T, true>(a->B, a->N_in, a->device, E);
    C *partial = (C *)a->workspace;
    if (fc_status st = launch<ALG, T, true>(cfg, stream, (const T *)a->grad_out, (const T *)a->x, (const T *)a->y,
                                            (const T *)a->weight, (const C *)a->norms, (T *)a->grad_x,
                                            (T *)a->grad_y, partial, (int64_t)a->B, (int64_t)a->N_in, a->normalize,
                                            a->gate, (int)vec))
        return st;
    if (a->grad_weight) {
        const int64_t K = a->N_in * P;
        sum_partials_kernel<T><<<(unsigned)((K + 31) / 32), dim3(32, 8), 0, stream>>>(partial, (T *)a->grad_weight,
                                                                                    cfg.grid, a->N_in, P);
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
