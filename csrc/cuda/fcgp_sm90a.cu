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
#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled: the driver entry point, no -lcuda */

#include "fcgp_wgmma.cuh"
#endif

namespace fc {
namespace fcgp {
namespace sm90 {

namespace {

std::atomic<int> g_enabled{-1}; /* -1: FLASHCLIFFORD_FCGP_SM90 not read yet; on unless it is "0" */

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int kSteps(int mode) { return mode == kTF32 ? 8 : 16; } /* 32 bytes of K */
constexpr int kRows = 64;                                            /* rows a tile */
inline int64_t tile_cols(const fc_args *a) { return 512 / a->alg->D; }

} // namespace

bool compiled() { return FC_SM90A != 0; }

bool enabled()
{
    int v = g_enabled.load(std::memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("FLASHCLIFFORD_FCGP_SM90");
        int expected = -1;
        g_enabled.compare_exchange_strong(expected, e && strcmp(e, "0") == 0 ? 0 : 1);
        v = g_enabled.load();
    }
    return v == 1;
}

void set_enabled(bool on) { g_enabled.store(on ? 1 : 0); }

bool planned(const fc_args *a, int mode, int operand_bytes)
{
    if (!compiled() || !enabled() || a->alg->D > 8)
        return false;
    if (!((mode == kTF32 && operand_bytes == 4) || (mode == kBF16 && operand_bytes == 2)))
        return false;
    const int64_t B = a->B, Ni = a->N_in, No = a->N_out;
    if (B <= 0 || Ni <= 0 || No <= 0 || (Ni * operand_bytes) % 16 != 0)
        return false;
    /* the kernel's int sizes, its grid (column blocks in x, row blocks in y) and the
     * transpose's grid (32 x 32 tiles, N_out in y) */
    if (B > INT_MAX || Ni > INT_MAX || No > INT_MAX || cdiv(B, kRows) > 65535 || cdiv(No, 32) > 65535)
        return false;
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, a->device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, a->device) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return major == 9 && minor == 0; /* sm_90a code runs on 9.0 exactly */
}

namespace {
/* W^T's bytes, rounded up to 256 so that g after it stays aligned for the copy engine */
size_t wt_bytes(const fc_args *a, int mode, int operand_bytes)
{
    const int64_t nip = cdiv(a->N_in, kSteps(mode)) * kSteps(mode);
    return ((size_t)a->alg->P * (size_t)a->N_out * (size_t)nip * (size_t)operand_bytes + 255) & ~(size_t)255;
}
} // namespace

size_t workspace_bytes(const fc_args *a, int mode, int operand_bytes)
{
    return wt_bytes(a, mode, operand_bytes) + (a->gate ? (size_t)a->B * (size_t)a->N_in * (size_t)operand_bytes : 0);
}

int64_t colblocks(const fc_args *a) { return cdiv(a->N_out, tile_cols(a)); }

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

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encoder()
{
    static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
            cudaGetLastError();
            p = nullptr;
        }
        return (PFN_cuTensorMapEncodeTiled_v12000)p;
    }();
    return fn;
}

/* A 3-D map of a contiguous (d2, d1, d0) array, boxes of (b2, b1, b0); zeros past its end. */
fc_status make_map(CUtensorMap *m, const void *base, CUtensorMapDataType ty, size_t es, uint64_t d0, uint64_t d1,
                   uint64_t d2, uint32_t b0, uint32_t b1, uint32_t b2, CUtensorMapSwizzle swizzle)
{
    const PFN_cuTensorMapEncodeTiled_v12000 encode = encoder();
    if (!encode) {
        fc_set_error("fcgp: the driver has no cuTensorMapEncodeTiled");
        return FC_ERR_CUDA;
    }
    const cuuint64_t dims[3] = {d0, d1, d2}, strides[2] = {d0 * es, d0 * d1 * es};
    const cuuint32_t box[3] = {b0, b1, b2}, elem[3] = {1, 1, 1};
    const CUresult r = encode(m, ty, 3, const_cast<void *>(base), dims, strides, box, elem,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fc_set_error("fcgp: cuTensorMapEncodeTiled failed (%d) for dims (%llu, %llu, %llu)", (int)r,
                     (unsigned long long)d0, (unsigned long long)d1, (unsigned long long)d2);
        return FC_ERR_CUDA;
    }
    return FC_OK;
}

template <int ID, int MODE>
fc_status gemm(const fc_args *a, const void *x, const void *y, const void *w, void *ws, float *o, float *partial,
               cudaStream_t st)
{
    using C = Cfg<ID, MODE, 0>;
    using E = Elem<MODE>;
    const int64_t B = a->B, Ni = a->N_in, No = a->N_out, Nip = cdiv(Ni, C::KS) * C::KS;
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

    constexpr CUtensorMapDataType ty = MODE == kTF32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
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

template <int MODE>
fc_status by_algebra(const fc_args *a, const void *x, const void *y, const void *w, void *ws, float *o, float *partial,
                     cudaStream_t st)
{
    switch (a->alg->D) { /* the D <= 8 algebras: Cl(2,0) and Cl(3,0) (planned() checked D) */
    case AlgebraTraits<0>::D:
        return gemm<0, MODE>(a, x, y, w, ws, o, partial, st);
    case AlgebraTraits<1>::D:
        return gemm<1, MODE>(a, x, y, w, ws, o, partial, st);
    }
    fc_set_error("fcgp: no Hopper forward for %s", a->alg->name);
    return FC_ERR_VALUE;
}

} // namespace

fc_status forward_gemm(const fc_args *a, int mode, const void *x, const void *y, const void *w, void *ws, float *o,
                       float *partial, cudaStream_t stream)
{
    static_assert(AlgebraTraits<0>::D == 4 && AlgebraTraits<1>::D == 8, "ids 0, 1: Cl(2,0), Cl(3,0)");
    if (mode == kTF32)
        return by_algebra<kTF32>(a, x, y, w, ws, o, partial, stream);
    if (mode == kBF16)
        return by_algebra<kBF16>(a, x, y, w, ws, o, partial, stream);
    fc_set_error("fcgp: no Hopper forward for operand mode %d", mode);
    return FC_ERR_VALUE;
}

#else /* not built for sm_90a: planned() is false, so this is never reached */

fc_status forward_gemm(const fc_args *, int, const void *, const void *, const void *, void *, float *, float *,
                       cudaStream_t)
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

} // extern "C"
