/* sgp_launch.cuh — the host side of the CUDA SGP: the launch shape of a call (threads a
 * row, rows a block, shared-memory layout, one wave of blocks from the occupancy), the
 * workspace of weight-gradient partials, the launches on the caller's stream, and the
 * per-algebra entry points that FC_SGP_INSTANTIATE defines in sgp_<id>.cu. The kernels and
 * their design are in sgp_kernels.cuh.
 */
#pragma once

#include <algorithm>
#include <atomic>
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
    int64_t rank[4]; /* resident: prefetch stage, resident warps, multiprocessors busy, rows a block */
};

/* Per kernel, once: its attributes (register use decides the threads a block may have) and
 * the most blocks of one warp a multiprocessor holds (the limits other than registers,
 * shared memory and threads: the kernels name row-group barriers by a run-time id, so each
 * block reserves all 16 named barriers, which caps the blocks a multiprocessor holds). */
struct KernelFacts {
    cudaFuncAttributes at;
    int max_blocks;
};
template <auto Kernel> const KernelFacts &kernel_facts()
{
    static const KernelFacts value = [] {
        KernelFacts k{};
        if (cudaFuncGetAttributes(&k.at, Kernel) != cudaSuccess) {
            cudaGetLastError();
            k.at.maxThreadsPerBlock = 128;
            k.at.numRegs = 255;
        }
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k.max_blocks, Kernel, 32, 0) != cudaSuccess ||
            k.max_blocks < 1) {
            cudaGetLastError();
            k.max_blocks = 1;
        }
        return k;
    }();
    return value;
}
template <auto Kernel> const cudaFuncAttributes &attributes() { return kernel_facts<Kernel>().at; }

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
    return std::max<int64_t>(1, std::min<int64_t>({by_regs, by_smem, by_threads, kernel_facts<Kernel>().max_blocks}));
}

/* The most input stages a resident kernel may use: kDefaultStages, or FLASHCLIFFORD_SGP_PIPE=S
 * (1 .. kMaxStages; 0 or 1: one stage, no prefetch ahead) to compare. */
inline int max_stages()
{
    static const int most = [] {
        const char *e = std::getenv("FLASHCLIFFORD_SGP_PIPE");
        if (!e || !*e)
            return kDefaultStages;
        const int v = std::atoi(e);
        return std::max(1, std::min(v, kMaxStages));
    }();
    return most;
}

/* Tuning only (fc_sgp_shape_override): rows a block and stages the resident kernels take
 * where that shape fits; 0: the default choice. */
struct ShapeOverride {
    std::atomic<int> rows{0}, stages{0};
};
inline ShapeOverride &shape_override()
{
    static ShapeOverride o;
    return o;
}
inline void set_shape_override(int rows, int stages)
{
    shape_override().rows.store(rows);
    shape_override().stages.store(stages);
}

inline size_t align16(size_t n) { return (n + 15) / 16 * 16; }

template <int ALG, class T, bool BWD, int MODE, int F> constexpr auto kernel()
{
    if constexpr (BWD)
        return sgp_backward_kernel<ALG, T, F, MODE>;
    else
        return sgp_forward_kernel<ALG, T, F, MODE>;
}

/* Elements per cp.async piece of the stages: the widest of 16 bytes (backward: pieces shared
 * by a row's threads) or F elements (forward: each thread copies its own features), else
 * 4 bytes, that N and the inputs' alignment allow; 0 when none does (then no stages). */
template <class T, bool BWD> constexpr int widest_piece(int F = 0) { return BWD ? 16 / (int)sizeof(T) : F; }
template <class T> constexpr int narrowest_piece() { return sizeof(T) >= 4 ? 1 : 4 / (int)sizeof(T); }

/* Features a thread: the wide width exists for resident rows only (the backward of 2-byte
 * data), the narrow one for every mode. */
template <int ALG, class T, bool BWD> constexpr int wide_features()
{
    return BWD ? bwd_features<AlgebraTraits<ALG>::D, T, kResident>() : fwd_features<AlgebraTraits<ALG>::D, T>();
}
template <int ALG, class T, bool BWD> constexpr int narrow_features()
{
    return BWD ? bwd_features<AlgebraTraits<ALG>::D, T, kLong>() : fwd_features<AlgebraTraits<ALG>::D, T>();
}

/* E: the stage piece the inputs allow (0: none), F: the features a thread (the row's threads
 * follow). Resident rows need their stages (at least one), staged weights and, in backward,
 * the weight-gradient sums in shared memory; rows that do not fit take kLongShared (when the
 * weights, and in backward the sums, fit) or kLong, at the narrow width only (at the wide one
 * the result is then not resident, and make_config takes the narrow shape). */
template <int ALG, class T, bool BWD, int F>
Config make_config_with(int64_t B, int64_t N, int device, int E, bool forced)
{
    constexpr bool NARROW = F == narrow_features<ALG, T, BWD>();
    using A = AlgebraTraits<ALG>;
    using C = typename Compute<T>::type;
    constexpr int P = A::P, D = A::D;
    const DeviceFacts &dev = device_facts(device);
    const size_t limit = (size_t)dev.smem_per_block;
    Config c{};
    c.device = device;
    c.F = F;
    const int64_t need = (N + c.F - 1) / c.F; /* threads for a resident row */
    /* threads a row may use: registers (the fewest of the kernels of this width) and, in
     * backward, the shared weight-gradient accumulators (F * P values a thread) */
    int most = std::min(kMaxRowThreads, attributes<kernel<ALG, T, BWD, kResident, F>()>().maxThreadsPerBlock);
    if constexpr (NARROW)
        most = std::min({most, attributes<kernel<ALG, T, BWD, kLongShared, F>()>().maxThreadsPerBlock,
                         attributes<kernel<ALG, T, BWD, kLong, F>()>().maxThreadsPerBlock});
    if (BWD)
        most = std::min(most, (int)std::min<int64_t>(kMaxRowThreads, (int64_t)(limit / 2) / (int64_t)(c.F * padded_paths<P, C>() * sizeof(C))));
    most = std::max(32, most / 32 * 32);
    /* the block, whatever the mode: a row that fits one row group gets just the warps it
     * needs (rows without stage pieces, odd N in 2-byte types, take the long modes too) */
    c.tx = need <= most ? (int)((std::max<int64_t>(need, 1) + 31) / 32) * 32 : most;
    c.ty = std::min(kMaxRowGroups, c.tx >= kBlockThreads ? 1 : kBlockThreads / c.tx);
    const int64_t cs = (int64_t)c.tx * c.F;
    const int64_t L = (N + cs - 1) / cs * cs;
    c.lay.L = L < INT32_MAX ? (int)L : 0;
    /* the row groups' reduction scratch, at the start of shared memory (backward: two areas
     * each, used in turn) */
    auto scratch = [&](int ty) { return align16((size_t)ty * (c.tx / 32) * (BWD ? 4 : 1) * A::G * sizeof(C)); };
    auto accumulators = [&](int ty) { return BWD ? (size_t)ty * padded_paths<P, C>() * c.lay.L * sizeof(C) : 0; };
    using W = Staged<T, BWD, D, F>;
    const size_t ws = c.lay.L ? (size_t)padded_paths<P, W>() * c.lay.L * sizeof(W) : 0;
    size_t used = scratch(c.ty);
    c.mode = kLong;
    if (need <= most && E && c.lay.L) {
        /* Resident: pick rows a block (ty) and stages (S) over the whole device, measured
         * on the H100 (benchmarks/tune_sgp.py, NOTES.md v3.4): a prefetch stage first (S = 2
         * where it fits), then the most resident warps, then the most multiprocessors busy,
         * then the largest ty (one bigger block stages the weights once for more rows and,
         * in backward, halves the weight-gradient partials); the override (tuning) forces
         * a shape where it fits. */
        const int bound = std::min(attributes<kernel<ALG, T, BWD, kResident, F>()>().maxThreadsPerBlock,
                                   BWD ? bwd_block_bound<D, T>() : fwd_block_bound<D, T>());
        const int64_t rows = std::max<int64_t>(B, 1);
        const int force_ty = forced ? shape_override().rows.load() : 0, force_s = shape_override().stages.load();
        std::fill(c.rank, c.rank + 4, -1);
        auto consider = [&](int ty, int S, size_t red, size_t base, size_t total) {
            const int64_t per_sm = blocks_per_sm<kernel<ALG, T, BWD, kResident, F>()>(c.tx * ty, total, device);
            const int64_t blocks = std::min(per_sm * (int64_t)dev.sms, (rows + ty - 1) / ty);
            const int64_t key[4] = {S >= 2, std::min(rows, blocks * ty) * (c.tx / 32),
                                    std::min<int64_t>(blocks, dev.sms), ty};
            if (!std::lexicographical_compare(c.rank, c.rank + 4, key, key + 4))
                return; /* not better: ties keep the fewer stages */
            std::copy(key, key + 4, c.rank);
            c.mode = kResident;
            c.ty = ty;
            c.lay.stages = S;
            c.lay.acc_off = BWD ? red : 0;
            c.lay.ws_off = align16(red + accumulators(ty));
            c.lay.pipe_off = base;
            c.lay.E = E;
            used = total;
        };
        for (int pass = force_ty > 0 ? 0 : 1; pass < 2 && c.mode != kResident; ++pass)
            for (int ty = 1; ty <= kMaxRowGroups && (ty == 1 || ty * c.tx <= bound); ++ty) {
                const size_t red = scratch(ty);
                const size_t base = align16(align16(red + accumulators(ty)) + ws);
                const size_t stage = (size_t)(BWD ? 3 : 2) * D * ty * c.lay.L * sizeof(T);
                for (int S = 1; S <= (pass == 0 ? kMaxStages : max_stages()) && base + S * stage <= limit; ++S)
                    if (pass == 1 || (ty == force_ty && S == force_s))
                        consider(ty, S, red, base, base + S * stage);
            }
    }
    if constexpr (!NARROW) {
        if (c.mode != kResident)
            return c; /* no long kernels at this width */
    }
    if (c.mode != kResident) { /* c.ty and used are still the defaults: only a resident pick sets them */
        /* staged weights (and backward's shared sums, for all the block's row groups, else
         * for one) */
        for (int ty : {c.ty, 1}) {
            if (!c.lay.L || c.mode == kLongShared)
                break;
            const size_t red = scratch(ty);
            if (align16(align16(red + accumulators(ty)) + ws) <= limit) {
                c.mode = kLongShared;
                c.ty = ty;
                c.lay.acc_off = red;
                c.lay.ws_off = align16(red + accumulators(ty));
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
    int64_t per_sm = 1;
    if (c.mode == kResident)
        per_sm = blocks_per_sm<kernel<ALG, T, BWD, kResident, F>()>(threads, used, device);
    else if constexpr (NARROW)
        per_sm = c.mode == kLongShared ? blocks_per_sm<kernel<ALG, T, BWD, kLongShared, F>()>(threads, used, device)
                                       : blocks_per_sm<kernel<ALG, T, BWD, kLong, F>()>(threads, used, device);
    /* one wave of blocks that loop over the rows: staging is paid once per block, and in
     * backward the partials (S = grid) do not grow with B */
    c.grid = std::max<int64_t>(1, std::min(groups, per_sm * (int64_t)dev.sms));
    return c;
}

/* The launch shape of a call. Where a wide width exists, it is taken when resident with a
 * prefetch stage (one stage would leave each row's loads exposed) and unless the narrow
 * width's resident shape ranks higher (more resident warps: Cl(2,0) bf16 N = 1024, whose wide
 * rows leave room for one 8-warp block a multiprocessor, or too few rows to fill the device
 * at the wide width); ties go to the wide one (half the row reduction a feature). The width
 * is chosen on the default shapes; the tuning override then forces a shape of that width
 * (so forced shapes never change a row's arithmetic). */
template <int ALG, class T, bool BWD> Config make_config(int64_t B, int64_t N, int device, int E)
{
    constexpr int FW = wide_features<ALG, T, BWD>(), FN = narrow_features<ALG, T, BWD>();
    const bool forced = shape_override().rows.load() > 0;
    if constexpr (FW == FN) {
        return make_config_with<ALG, T, BWD, FN>(B, N, device, E, forced);
    } else {
        const Config n = make_config_with<ALG, T, BWD, FN>(B, N, device, E, false);
        const Config w = make_config_with<ALG, T, BWD, FW>(B, N, device, E, false);
        /* the first three keys only: rows a block do not compare across widths */
        const bool wide = w.mode == kResident && w.lay.stages >= 2 &&
                          !(n.mode == kResident && std::lexicographical_compare(w.rank, w.rank + 3, n.rank, n.rank + 3));
        if (!forced)
            return wide ? w : n;
        return wide ? make_config_with<ALG, T, BWD, FW>(B, N, device, E, true)
                    : make_config_with<ALG, T, BWD, FN>(B, N, device, E, true);
    }
}

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
    constexpr int FW = wide_features<ALG, T, BWD>(), FN = narrow_features<ALG, T, BWD>();
    switch (cfg.mode) {
    case kResident:
        if (FW != FN && cfg.F == FW)
            return go(integral_constant<decltype(kernel<ALG, T, BWD, kResident, FW>()), kernel<ALG, T, BWD, kResident, FW>()>{});
        return go(integral_constant<decltype(kernel<ALG, T, BWD, kResident, FN>()), kernel<ALG, T, BWD, kResident, FN>()>{});
    case kLongShared:
        return go(integral_constant<decltype(kernel<ALG, T, BWD, kLongShared, FN>()), kernel<ALG, T, BWD, kLongShared, FN>()>{});
    default: break;
    }
    return go(integral_constant<decltype(kernel<ALG, T, BWD, kLong, FN>()), kernel<ALG, T, BWD, kLong, FN>()>{});
}

template <class T> bool vec_ok(int F, int64_t N, std::initializer_list<const void *> ptrs)
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
    const bool vec = vec_ok<T>(F, a->N_in, {a->x, a->y, a->out});
    const int E = stage_piece<T>(widest_piece<T, false>(F), a->N_in, {a->x, a->y});
    const Config cfg = make_config<ALG, T, false>(a->B, a->N_in, a->device, E);
    return launch<ALG, T, false>(cfg, stream, (const T *)a->x, (const T *)a->y, (const T *)a->weight, (T *)a->out,
                                 (C *)a->norms, (int64_t)a->B, (int64_t)a->N_in, a->normalize, a->gate, (int)vec);
}

/* The backward's shape for aligned inputs (E: its stage piece), which the workspace is sized
 * for: one slot a block of its grid. Inputs whose alignment selects another mode run with at
 * most that many blocks (backward() clamps the grid: blocks loop over the rows, so any grid
 * is correct), so the size depends on the shapes only. */
template <int ALG, class T> Config sizing_config(const fc_args *a, int &E)
{
    E = stage_piece<T>(widest_piece<T, true>(), a->N_in, {});
    return make_config<ALG, T, true>(a->B, a->N_in, a->device, E);
}
template <int ALG, class T> size_t slot_bytes(const fc_args *a)
{
    return (size_t)a->N_in * AlgebraTraits<ALG>::P * sizeof(typename Compute<T>::type);
}

template <int ALG, class T> size_t partial_bytes(const fc_args *a)
{
    if (a->B == 0 || a->N_in == 0)
        return 0;
    int E;
    return (size_t)sizing_config<ALG, T>(a, E).grid * slot_bytes<ALG, T>(a);
}

/* The shape a call with aligned inputs gets (fc_sgp_config_cuda). */
template <int ALG, class T> fc_status config(const fc_args *a, int bwd, long long out[6])
{
    constexpr int D = AlgebraTraits<ALG>::D;
    const int E = stage_piece<T>(bwd ? widest_piece<T, true>() : widest_piece<T, false>(fwd_features<D, T>()), a->N_in, {});
    const Config c = bwd ? make_config<ALG, T, true>(a->B, a->N_in, a->device, E)
                         : make_config<ALG, T, false>(a->B, a->N_in, a->device, E);
    const long long v[6] = {c.tx, c.ty, c.mode == kResident ? c.lay.stages : 0, c.mode, c.grid, (long long)c.lay.total};
    for (int i = 0; i < 6; ++i)
        out[i] = v[i];
    return FC_OK;
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
    int E_sized;
    const Config sized = sizing_config<ALG, T>(a, E_sized);
    const size_t need = (size_t)sized.grid * slot_bytes<ALG, T>(a);
    if (a->workspace_bytes < need || (need && !a->workspace)) {
        fc_set_error("workspace: expected at least %zu bytes, got %zu", need, a->workspace_bytes);
        return FC_ERR_VALUE;
    }
    /* aligned inputs (the usual case) take the shape just computed */
    const int E = stage_piece<T>(widest_piece<T, true>(), a->N_in, {a->x, a->y, a->grad_out});
    Config cfg = E == E_sized ? sized : make_config<ALG, T, true>(a->B, a->N_in, a->device, E);
    /* the features a thread depend on the mode picked */
    const bool vec = vec_ok<T>(cfg.F, a->N_in, {a->x, a->y, a->grad_out, a->grad_x, a->grad_y});
    /* at most the slots the workspace was sized for (not the bytes given: results must not depend on them) */
    cfg.grid = std::min<int64_t>(cfg.grid, sized.grid);
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
    /* Op<ALG, T>::run(a, args...) for a's dtype T */
    template <template <int, class> class Op, class R, class... Args>
    static R by_dtype(const fc_args *a, R bad, Args... args)
    {
        switch (a->dtype) {
        case FC_F32: return Op<ALG, float>::run(a, args...);
        case FC_F64: return Op<ALG, double>::run(a, args...);
        case FC_BF16: return Op<ALG, __nv_bfloat16>::run(a, args...);
        case FC_F16: return Op<ALG, __half>::run(a, args...);
        }
        return bad;
    }
    static fc_status forward(const fc_args *a, cudaStream_t s);
    static fc_status backward(const fc_args *a, cudaStream_t s);
    static size_t workspace(const fc_args *a);
    static fc_status config(const fc_args *a, int bwd, long long out[6]);
};

template <int ALG, class T> struct ForwardOp {
    static fc_status run(const fc_args *a, cudaStream_t s) { return sgp::forward<ALG, T>(a, s); }
};
template <int ALG, class T> struct BackwardOp {
    static fc_status run(const fc_args *a, cudaStream_t s) { return sgp::backward<ALG, T>(a, s); }
};
template <int ALG, class T> struct WorkspaceOp {
    static size_t run(const fc_args *a) { return partial_bytes<ALG, T>(a); }
};
template <int ALG, class T> struct ConfigOp {
    static fc_status run(const fc_args *a, int bwd, long long *out) { return sgp::config<ALG, T>(a, bwd, out); }
};

} // namespace sgp
} // namespace fc

#define FC_SGP_INSTANTIATE(ID)                                                                                \
    template <> fc_status fc::sgp::Entry<ID>::forward(const fc_args *a, cudaStream_t s)                       \
    {                                                                                                         \
        return by_dtype<ForwardOp, fc_status>(a, FC_ERR_TYPE, s);                                             \
    }                                                                                                         \
    template <> fc_status fc::sgp::Entry<ID>::backward(const fc_args *a, cudaStream_t s)                      \
    {                                                                                                         \
        return by_dtype<BackwardOp, fc_status>(a, FC_ERR_TYPE, s);                                            \
    }                                                                                                         \
    template <> size_t fc::sgp::Entry<ID>::workspace(const fc_args *a)                                        \
    {                                                                                                         \
        return by_dtype<WorkspaceOp, size_t>(a, (size_t)0);                                                   \
    }                                                                                                         \
    template <> fc_status fc::sgp::Entry<ID>::config(const fc_args *a, int bwd, long long out[6])             \
    {                                                                                                         \
        return by_dtype<ConfigOp, fc_status>(a, FC_ERR_TYPE, bwd, out);                                       \
    }
