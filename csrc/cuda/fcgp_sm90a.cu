/* fcgp_sm90a.cu — the Hopper FCGP forward GEMM behind fcgp_sm90a.h: W^T prepared in the
 * workspace by a tiled transpose, with the gate the gate product g by gate_product, three or
 * four tensor maps a call, and fwd_tma_kernel of
 * fcgp_wgmma.cuh on one CTA a tile (the multicast clusters ran slower so far:
 * benchmarks/NOTES_FCGP.md). setup.py builds this unit for sm_90a alone when 9.0 is a target
 * (FC_SM90A = 1); otherwise only its host side is compiled and planned() is false.
 */
#include "fcgp_sm90a.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common.cuh"
#include "mma_ptx.cuh" /* Mode */

#ifndef FC_SM90A
#define FC_SM90A 0
#endif

#if FC_SM90A
#include "fcgp_wgmma_gw.cuh" /* and fcgp_wgmma.cuh */
#include "fcgp_wgmma_gz.cuh"
#endif

namespace fc {
namespace fcgp {
namespace sm90 {

namespace {

std::atomic<int> g_enabled{-1}; /* -1: FLASHCLIFFORD_FCGP_SM90 not read yet; on unless it is "0" */
std::atomic<int> g_bwd{-1};     /* the backward kernels: FLASHCLIFFORD_FCGP_SM90_BWD, on unless "0" */

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int kSteps(int mode) { return mode == kTF32 ? 8 : 16; } /* 32 bytes of K */
constexpr int kRows = 64;                                            /* rows a tile */
inline int64_t whole_steps(int64_t n, int mode) { return cdiv(n, kSteps(mode)) * kSteps(mode); } /* K padded */
/* the tiles' N_out columns, Cfg::NT and GwCfg::NT (checked against them below, where the
 * device headers are compiled) */
constexpr int tile_cols(int D) { return 512 / D; }
constexpr int gw_cols(int) { return 48; }
constexpr int gw_groups(int D) { return D == 8 ? 2 : 1; } /* GwCfg::GROUPS: path groups, a block each */
inline size_t up256(size_t n) { return (n + 255) & ~(size_t)255; }

/* An environment switch read once: "1" or "0" sets it, anything else leaves the default. */
bool switch_state(std::atomic<int> &v, const char *env, int dflt)
{
    int s = v.load(std::memory_order_relaxed);
    if (s < 0) {
        const char *e = getenv(env);
        int expected = -1;
        v.compare_exchange_strong(expected, e && strcmp(e, "1") == 0 ? 1 : e && strcmp(e, "0") == 0 ? 0 : dflt);
        s = v.load();
    }
    return s == 1;
}

/* What the Hopper kernels need of every call: the sm_90a code, a device of compute capability
 * 9.0 exactly (where that code runs), the D <= 8 algebras, tf32 or bf16 operands, sizes in int. */
bool eligible(const fc_args *a, int mode, int operand_bytes)
{
    if (!compiled() || a->alg->D > 8)
        return false;
    if (!((mode == kTF32 && operand_bytes == 4) || (mode == kBF16 && operand_bytes == 2)))
        return false;
    if (a->B <= 0 || a->N_in <= 0 || a->N_out <= 0 || a->B > INT_MAX || a->N_in > INT_MAX || a->N_out > INT_MAX)
        return false;
    const DeviceFacts &f = device_facts(a->device); /* queried once a device */
    return f.cc_major == 9 && f.cc_minor == 0;
}

} // namespace

bool compiled() { return FC_SM90A != 0; }

bool enabled() { return switch_state(g_enabled, "FLASHCLIFFORD_FCGP_SM90", 1); }
void set_enabled(bool on) { g_enabled.store(on ? 1 : 0); }
bool bwd_enabled() { return switch_state(g_bwd, "FLASHCLIFFORD_FCGP_SM90_BWD", 1); }
void set_bwd_enabled(bool on) { g_bwd.store(on ? 1 : 0); }

bool planned(const fc_args *a, int mode, int operand_bytes)
{
    /* rows of x a multiple of 16 bytes (the copy engine's stride rule); the kernel's grid
     * (column blocks in x, row blocks in y) and the transpose's (32 x 32 tiles, N_out in y) */
    return enabled() && (a->N_in * operand_bytes) % 16 == 0 && cdiv(a->B, kRows) <= 65535 &&
           cdiv(a->N_out, 32) <= 65535 && eligible(a, mode, operand_bytes);
}

bool gw_planned(const fc_args *a, int mode, int operand_bytes)
{
    /* grids: gelu_transpose (N_in / 32, B / 32, 2), prep_wt of go (B / 32, N_out / 32, D), the
     * kernel (N_out / NT x path groups, N_in / 64, splits <= 8) */
    return bwd_enabled() && cdiv(a->B + 16, 32) <= 65535 && cdiv(a->N_out, 32) <= 65535 &&
           cdiv(a->N_in, kRows) <= 65535 && eligible(a, mode, operand_bytes);
}

bool gz_planned(const fc_args *a, int mode, int operand_bytes)
{
    /* go's rows a multiple of 16 bytes (the copy engine); grids: prep_wz (grid-stride), the
     * kernel (N_in / BN, B / 64) */
    return bwd_enabled() && (a->N_out * operand_bytes) % 16 == 0 && cdiv(a->B, kRows) <= 65535 &&
           eligible(a, mode, operand_bytes);
}

size_t gz_workspace_bytes(const fc_args *a, int mode, int operand_bytes)
{
    const size_t Nop = (size_t)whole_steps(a->N_out, mode);
    return up256((size_t)a->alg->P * (size_t)a->N_in * Nop * operand_bytes);
}

int gw_splits(const fc_args *a, int mode, int64_t *rows_per_split)
{
    /* about four blocks a multiprocessor (one is resident at a time), at most 8 partials */
    const int64_t ks = kSteps(mode), kb = cdiv(a->B, ks),
                  tiles = cdiv(a->N_out, gw_cols(a->alg->D)) * gw_groups(a->alg->D) * cdiv(a->N_in, kRows);
    const int64_t S = std::max<int64_t>(1, std::min<int64_t>({8, kb, cdiv(4 * (int64_t)sm_count(a->device), tiles)}));
    *rows_per_split = cdiv(kb, S) * ks;
    return (int)cdiv(a->B, *rows_per_split);
}

size_t gw_transpose_bytes(const fc_args *a, int mode, int operand_bytes)
{
    return (size_t)a->alg->D * (size_t)a->N_in * (size_t)whole_steps(a->B, mode) * operand_bytes;
}

namespace {
/* The weight gradient's workspace: xg^T and yg^T (D, N_in, Bp) in the operand type, the batch
 * padded to whole steps (Bp), unless the caller lends them (outside: the caller's grad_x, grad_y,
 * which the input gradients overwrite afterwards), then go^T (D, N_out, Bp), then the fp32
 * partials of the splits. */
struct GwLayout {
    int64_t Bp, rows_per_split;
    int splits;
    size_t xgt, ygt, got, part, total; /* byte offsets, 256-aligned for the copy engine */
};
GwLayout gw_layout(const fc_args *a, int mode, int operand_bytes, bool outside)
{
    GwLayout L;
    L.splits = gw_splits(a, mode, &L.rows_per_split);
    L.Bp = whole_steps(a->B, mode);
    const size_t D = (size_t)a->alg->D, Bp = (size_t)L.Bp;
    const size_t xb = outside ? 0 : up256(gw_transpose_bytes(a, mode, operand_bytes));
    L.xgt = 0;
    L.ygt = xb;
    L.got = 2 * xb;
    L.part = L.got + up256(D * (size_t)a->N_out * Bp * operand_bytes);
    L.total = L.part + (size_t)L.splits * (size_t)a->alg->P * (size_t)a->N_in * (size_t)a->N_out * sizeof(float);
    return L;
}

/* W^T's bytes, rounded up to 256 so that g after it stays aligned for the copy engine */
size_t wt_bytes(const fc_args *a, int mode, int operand_bytes)
{
    const int64_t nip = whole_steps(a->N_in, mode);
    return up256((size_t)a->alg->P * (size_t)a->N_out * (size_t)nip * (size_t)operand_bytes);
}
} // namespace

size_t gw_workspace_bytes(const fc_args *a, int mode, int operand_bytes, bool transposes_outside)
{
    return gw_layout(a, mode, operand_bytes, transposes_outside).total;
}

size_t workspace_bytes(const fc_args *a, int mode, int operand_bytes)
{
    return wt_bytes(a, mode, operand_bytes) + (a->gate ? (size_t)a->B * (size_t)a->N_in * (size_t)operand_bytes : 0);
}

int64_t colblocks(const fc_args *a) { return cdiv(a->N_out, tile_cols(a->alg->D)); }

bool aligned(const void *x, const void *y, const void *o)
{
    return (((uintptr_t)x | (uintptr_t)y | (uintptr_t)o) & 15u) == 0;
}

#if FC_SM90A

/* W (P, N_in, N_out) -> W^T (P, N_out, Nip): K (padded with zeros to whole steps) fastest and
 * permuted inside each step as the kernel reads x (phys_col), tf32-rounded for the tf32
 * products. 32 x 32 tiles through shared memory, so both sides are read and written along
 * rows (steps of 8 or 16 divide 32, so a step's permutation stays inside its tile). */
template <int MODE>
__global__ void __launch_bounds__(256) prep_wt(const Elem<MODE> *__restrict__ w, Elem<MODE> *__restrict__ wt,
                                                int64_t Ni, int64_t No, int64_t Nip)
{
    using E = Elem<MODE>;
    constexpr int KS = kSteps(MODE);
    __shared__ E tile[32][33];
    const int64_t k0 = (int64_t)blockIdx.x * 32, n0 = (int64_t)blockIdx.y * 32, p = blockIdx.z;
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    for (int r = ty; r < 32; r += 8) { /* logical K k0 + r, read from its physical column */
        const int64_t k = k0 + r, src = k - k % KS + phys_col(MODE, (int)(k % KS)), n = n0 + tx;
        E v = E(0.f);
        if (src < Ni && n < No) {
            v = w[(p * Ni + src) * No + n];
            if constexpr (MODE == kTF32)
                v = __uint_as_float(to_tf32(v));
        }
        tile[r][tx] = v;
    }
    __syncthreads();
    for (int r = ty; r < 32; r += 8) {
        const int64_t n = n0 + r, k = k0 + tx;
        if (n < No && k < Nip)
            wt[(p * No + n) * Nip + k] = tile[tx][r];
    }
}

/* W (P, N_in, N_out) -> the input gradient's B operand (P slots, N_in, Nop): the paths in slot
 * order (GzSlots: slot s holds path slots.path[s]), each row's N_out permuted inside each step as
 * gz_step reads go (phys_col), padded with zeros to whole steps, tf32-rounded for the tf32
 * products. */
template <int MODE>
__global__ void __launch_bounds__(256) prep_wz(const Elem<MODE> *__restrict__ w, Elem<MODE> *__restrict__ wz,
                                                GzSlots slots, int64_t P, int64_t Ni, int64_t No, int64_t Nop)
{
    using E = Elem<MODE>;
    constexpr int KS = kSteps(MODE);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < P * Ni * Nop; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / Nop, k = i - r * Nop, src = k - k % KS + phys_col(MODE, (int)(k % KS));
        const int64_t slot = r / Ni, row = (int64_t)slots.path[slot] * Ni + (r - slot * Ni);
        E v = E(0.f);
        if (src < No) {
            v = w[row * No + src];
            if constexpr (MODE == kTF32)
                v = __uint_as_float(to_tf32(v));
        }
        wz[i] = v;
    }
}

namespace {

/* The copy engine's element type of the operand mode. */
constexpr CUtensorMapDataType map_type(int mode)
{
    return mode == kTF32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

/* A 3-D map of a contiguous (d2, d1, d0) array, boxes of (b2, b1, b0); zeros past its end. */
fc_status make_map(CUtensorMap *m, const void *base, CUtensorMapDataType ty, size_t es, uint64_t d0, uint64_t d1,
                   uint64_t d2, uint32_t b0, uint32_t b1, uint32_t b2, CUtensorMapSwizzle swizzle)
{
    const CUresult r = tma::encode_3d(m, base, ty, es, d0, d1, d2, b0, b1, b2, swizzle);
    if (r == CUDA_ERROR_NOT_FOUND && !tma::tensor_map_encoder()) {
        fc_set_error("fcgp: the driver has no cuTensorMapEncodeTiled");
        return FC_ERR_CUDA;
    }
    if (r != CUDA_SUCCESS) {
        fc_set_error("fcgp: cuTensorMapEncodeTiled failed (%d) for dims (%llu, %llu, %llu)", (int)r,
                     (unsigned long long)d0, (unsigned long long)d1, (unsigned long long)d2);
        return FC_ERR_CUDA;
    }
    return FC_OK;
}

static_assert(tile_cols(4) == Cfg<0, kTF32>::NT && tile_cols(8) == Cfg<1, kTF32>::NT &&
                  gw_cols(4) == GwCfg<0, kTF32>::NT && gw_cols(8) == GwCfg<1, kTF32>::NT &&
                  gw_groups(4) == GwCfg<0, kTF32>::GROUPS && gw_groups(8) == GwCfg<1, kTF32>::GROUPS &&
                  kSteps(kTF32) == Cfg<1, kTF32>::KS && kSteps(kBF16) == Cfg<1, kBF16>::KS,
              "the host-side tile constants match the kernels' configurations");

/* f(id, mode) for the call's algebra and operand mode as compile-time constants: the D <= 8
 * algebras (the planning functions checked D), tf32 or bf16 products. */
template <class F> fc_status dispatch(const fc_args *a, int mode, const char *what, F &&f)
{
    auto by_algebra = [&](auto md) -> fc_status {
        switch (a->alg->D) {
        case AlgebraTraits<0>::D:
            return f(std::integral_constant<int, 0>{}, md);
        case AlgebraTraits<1>::D:
            return f(std::integral_constant<int, 1>{}, md);
        }
        fc_set_error("fcgp: no Hopper %s for %s", what, a->alg->name);
        return FC_ERR_VALUE;
    };
    static_assert(AlgebraTraits<0>::D == 4 && AlgebraTraits<1>::D == 8, "ids 0, 1: Cl(2,0), Cl(3,0)");
    if (mode == kTF32)
        return by_algebra(std::integral_constant<int, kTF32>{});
    if (mode == kBF16)
        return by_algebra(std::integral_constant<int, kBF16>{});
    fc_set_error("fcgp: no Hopper %s for operand mode %d", what, mode);
    return FC_ERR_VALUE;
}

template <int ID, int MODE>
fc_status gemm(const fc_args *a, const void *x, const void *y, const void *w, void *ws, float *o, float *partial,
               cudaStream_t st)
{
    using C = Cfg<ID, MODE, 0>;
    using E = Elem<MODE>;
    const int64_t B = a->B, Ni = a->N_in, No = a->N_out, Nip = whole_steps(Ni, MODE); /* as wt_bytes sizes it */
    E *wt = (E *)ws, *g = (E *)((char *)ws + wt_bytes(a, MODE, sizeof(E)));
    prep_wt<MODE><<<dim3((unsigned)cdiv(Nip, 32), (unsigned)cdiv(No, 32), (unsigned)C::P), 256, 0, st>>>(
        (const E *)w, wt, Ni, No, Nip);
    FC_LAUNCH_CHECK(st);
    if (a->gate) { /* component 0 of x and y is their first B x N_in block */
        const int64_t n = B * Ni;
        gate_product<E><<<(unsigned)std::min<int64_t>(cdiv(n, 256), 4096), 256, 0, st>>>((const E *)x, (const E *)y,
                                                                                           g, n);
        FC_LAUNCH_CHECK(st);
    }

    constexpr CUtensorMapDataType ty = map_type(MODE);
    CUtensorMap xm, ym, wm, gm;
    fc_status s;
    /* x, y: a step's K x 64 rows x every component; W^T: a step's K x the tile's columns x
     * half the paths, in the 32-byte swizzle the kernel's wgmma descriptors read; g: a step's
     * K x 64 rows (without the gate the kernel never reads it: x's map stands in) */
    if ((s = make_map(&xm, x, ty, sizeof(E), Ni, B, C::D, C::KS, C::BM, C::D, CU_TENSOR_MAP_SWIZZLE_NONE)) != FC_OK ||
        (s = make_map(&ym, y, ty, sizeof(E), Ni, B, C::D, C::KS, C::BM, C::D, CU_TENSOR_MAP_SWIZZLE_NONE)) != FC_OK ||
        (s = make_map(&wm, wt, ty, sizeof(E), Nip, No, C::P, C::KS, C::NT, C::P / 2, CU_TENSOR_MAP_SWIZZLE_32B)) !=
            FC_OK)
        return s;
    if (!a->gate)
        gm = xm;
    else if ((s = make_map(&gm, g, ty, sizeof(E), Ni, B, 1, C::KS, C::BM, 1, CU_TENSOR_MAP_SWIZZLE_NONE)) != FC_OK)
        return s;

    const dim3 grid((unsigned)cdiv(No, C::NT), (unsigned)cdiv(B, C::BM));
    auto launch = [&](auto kern, int smem) -> fc_status {
        FC_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        kern<<<grid, C::THREADS, smem, st>>>(xm, ym, wm, gm, o, partial, (int)B, (int)Ni, (int)No);
        FC_LAUNCH_CHECK(st);
        return FC_OK;
    };
    constexpr int smem_gate = tma_smem_bytes<ID, MODE, true>(), smem_plain = tma_smem_bytes<ID, MODE, false>();
    if (a->gate)
        return partial ? launch(fwd_tma_kernel<ID, MODE, 1, 1, true, true>, smem_gate)
                       : launch(fwd_tma_kernel<ID, MODE, 1, 1, true, false>, smem_gate);
    return partial ? launch(fwd_tma_kernel<ID, MODE, 1, 1, false, true>, smem_plain)
                   : launch(fwd_tma_kernel<ID, MODE, 1, 1, false, false>, smem_plain);
}

} // namespace

fc_status forward_gemm(const fc_args *a, int mode, const void *x, const void *y, const void *w, void *ws, float *o,
                       float *partial, cudaStream_t stream)
{
    return dispatch(a, mode, "forward", [&](auto id, auto md) {
        return gemm<decltype(id)::value, decltype(md)::value>(a, x, y, w, ws, o, partial, stream);
    });
}

namespace {

template <int ID, int MODE>
fc_status gw(const fc_args *a, const void *x, const void *y, const void *go, void *ws, void *xgt_out, void *ygt_out,
             float **partial, int *splits, cudaStream_t st)
{
    using C = GwCfg<ID, MODE>;
    using E = Elem<MODE>;
    const bool outside = xgt_out && ygt_out;
    const GwLayout L = gw_layout(a, MODE, sizeof(E), outside);
    const int64_t B = a->B, Ni = a->N_in, No = a->N_out, Bp = L.Bp;
    char *p = (char *)ws;
    E *xgt = outside ? (E *)xgt_out : (E *)(p + L.xgt), *ygt = outside ? (E *)ygt_out : (E *)(p + L.ygt);
    E *got = (E *)(p + L.got);
    float *part = (float *)(p + L.part);
    /* xg^T, yg^T (D, N_in, Bp); go^T (D, N_out, Bp) with the batch permuted inside each step as
     * load_frags reads xg^T, tf32-rounded: prep_wt's transpose of W, on go (components for paths) */
    gelu_transpose<E><<<dim3((unsigned)cdiv(Ni, 32), (unsigned)cdiv(Bp, 32), 2), 256, 0, st>>>(
        (const E *)x, (const E *)y, xgt, ygt, C::D, B, Ni, Bp, a->gate);
    FC_LAUNCH_CHECK(st);
    prep_wt<MODE><<<dim3((unsigned)cdiv(Bp, 32), (unsigned)cdiv(No, 32), (unsigned)C::D), 256, 0, st>>>(
        (const E *)go, got, B, No, Bp);
    FC_LAUNCH_CHECK(st);

    constexpr CUtensorMapDataType ty = map_type(MODE);
    CUtensorMap xm, ym, gm;
    fc_status s;
    if ((s = make_map(&xm, xgt, ty, sizeof(E), Bp, Ni, C::D, C::KS, C::BM, C::XC, CU_TENSOR_MAP_SWIZZLE_NONE)) != FC_OK ||
        (s = make_map(&ym, ygt, ty, sizeof(E), Bp, Ni, C::D, C::KS, C::BM, C::D, CU_TENSOR_MAP_SWIZZLE_NONE)) != FC_OK ||
        (s = make_map(&gm, got, ty, sizeof(E), Bp, No, C::D, C::KS, C::NT, C::D, CU_TENSOR_MAP_SWIZZLE_32B)) != FC_OK)
        return s;
    auto kern = gw_tma_kernel<ID, MODE>;
    FC_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM));
    kern<<<dim3((unsigned)(cdiv(No, C::NT) * C::GROUPS), (unsigned)cdiv(Ni, C::BM), (unsigned)L.splits), C::THREADS,
           C::SMEM, st>>>(
        xm, ym, gm, part, (int)B, (int)Ni, (int)No, (int)L.rows_per_split);
    FC_LAUNCH_CHECK(st);
    *partial = part;
    *splits = L.splits;
    return FC_OK;
}

template <int ID, int MODE, class Tio>
fc_status gz(const fc_args *a, const void *go, const void *w, const void *x, const void *y, void *grad_x,
             void *grad_y, void *ws, cudaStream_t st)
{
    using C = GzCfg<ID, MODE>;
    using E = Elem<MODE>;
    const int64_t B = a->B, Ni = a->N_in, No = a->N_out, Nop = whole_steps(No, MODE); /* as gz_workspace_bytes sizes it */
    E *wz = (E *)ws;
    prep_wz<MODE><<<(unsigned)std::min<int64_t>(cdiv(C::P * Ni * Nop, 256), 4096), 256, 0, st>>>(
        (const E *)w, wz, C::slots, C::P, Ni, No, Nop);
    FC_LAUNCH_CHECK(st);
    constexpr CUtensorMapDataType ty = map_type(MODE);
    CUtensorMap om, wm;
    fc_status s;
    if ((s = make_map(&om, go, ty, sizeof(E), No, B, C::D, C::KS, C::BM, C::JG, CU_TENSOR_MAP_SWIZZLE_NONE)) != FC_OK ||
        (s = make_map(&wm, wz, ty, sizeof(E), Nop, Ni, C::P, C::KS, C::BN, C::PS, CU_TENSOR_MAP_SWIZZLE_32B)) != FC_OK)
        return s;
    auto kern = gz_tma_kernel<ID, MODE, Tio>; /* clusters of C::GROUPS CTAs along x (__cluster_dims__) */
    FC_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM));
    kern<<<dim3((unsigned)(cdiv(Ni, C::BN) * C::GROUPS), (unsigned)cdiv(B, C::BM)), C::THREADS, C::SMEM, st>>>(
        om, wm, (const E *)x, (const E *)y, (Tio *)grad_x, (Tio *)grad_y, (int)B, (int)Ni, (int)No, a->gate);
    FC_LAUNCH_CHECK(st);
    return FC_OK;
}

} // namespace

fc_status input_grad(const fc_args *a, int mode, const void *go, const void *w, const void *x, const void *y,
                     void *grad_x, void *grad_y, void *ws, cudaStream_t stream)
{
    /* the data type: fp32 (tf32 products always), or bf16 for bf16 data */
    return dispatch(a, mode, "input gradient", [&](auto id, auto md) -> fc_status {
        constexpr int ID = decltype(id)::value, MODE = decltype(md)::value;
        if constexpr (MODE == kBF16)
            if (a->dtype == FC_BF16)
                return gz<ID, MODE, __nv_bfloat16>(a, go, w, x, y, grad_x, grad_y, ws, stream);
        return gz<ID, MODE, float>(a, go, w, x, y, grad_x, grad_y, ws, stream);
    });
}

fc_status weight_grad(const fc_args *a, int mode, const void *x, const void *y, const void *go, void *ws,
                      void *xgt, void *ygt, float **partial, int *splits, cudaStream_t stream)
{
    return dispatch(a, mode, "weight gradient", [&](auto id, auto md) {
        return gw<decltype(id)::value, decltype(md)::value>(a, x, y, go, ws, xgt, ygt, partial, splits, stream);
    });
}

#else /* not built for sm_90a: planned() is false, so this is never reached */

fc_status forward_gemm(const fc_args *, int, const void *, const void *, const void *, void *, float *, float *,
                       cudaStream_t)
{
    fc_set_error("fcgp: this build has no sm_90a code (build with 9.0 among FLASHCLIFFORD_CUDA_ARCHS)");
    return FC_ERR_VALUE;
}

fc_status input_grad(const fc_args *, int, const void *, const void *, const void *, const void *, void *, void *,
                     void *, cudaStream_t)
{
    fc_set_error("fcgp: this build has no sm_90a code (build with 9.0 among FLASHCLIFFORD_CUDA_ARCHS)");
    return FC_ERR_VALUE;
}

fc_status weight_grad(const fc_args *, int, const void *, const void *, const void *, void *, void *, void *, float **,
                      int *, cudaStream_t)
{
    fc_set_error("fcgp: this build has no sm_90a code (build with 9.0 among FLASHCLIFFORD_CUDA_ARCHS)");
    return FC_ERR_VALUE;
}

#endif

} // namespace sm90
} // namespace fcgp
} // namespace fc

extern "C" {

int fc_fcgp_sm90_compiled(void) { return fc::fcgp::sm90::compiled(); }

int fc_fcgp_sm90_switch(int on)
{
    if (on >= 0)
        fc::fcgp::sm90::set_enabled(on != 0);
    return fc::fcgp::sm90::enabled();
}

int fc_fcgp_sm90_bwd_switch(int on)
{
    if (on >= 0)
        fc::fcgp::sm90::set_bwd_enabled(on != 0);
    return fc::fcgp::sm90::bwd_enabled();
}

} // extern "C"
