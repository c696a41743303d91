/* tma.cuh — Hopper (sm_90) bulk tensor copies, mbarriers and thread-block clusters, for the
 * tile pipelines of the FCGP kernels:
 *  - a stage's tiles arrive by cp.async.bulk.tensor (one instruction a tile, issued by one
 *    thread) or, where the library lays an operand out in stage order, by cp.async.bulk of
 *    contiguous bytes; optionally multicast to several CTAs of a cluster, each completing bytes on the
 *    same-offset mbarrier of every destination CTA;
 *  - consumers wait on that "full" mbarrier's phase, and release the stage by arriving on the
 *    "empty" mbarriers of the CTAs that write into it (remote arrives through mapa).
 * Below sm_90 the functions trap; launchers must not select the kernels that call them.
 */
#pragma once

#include <cstdint>

#include <cuda.h>         /* CUtensorMap (a 128-byte opaque struct; no driver library is linked) */
#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled: the driver entry point */

#include "common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FC_HAVE_TMA 1
#else
#define FC_HAVE_TMA 0
#endif

namespace fc {
namespace tma {

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count)
{
#if FC_HAVE_TMA
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
#else
    __trap();
#endif
}

/* Makes mbarrier initialisation visible to the other CTAs of the cluster (and to the copy
 * engine) before the cluster barrier that follows it. */
__device__ __forceinline__ void fence_mbar_init()
{
#if FC_HAVE_TMA
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

/* One arrival that also expects `bytes` more to complete on this phase. */
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
#if FC_HAVE_TMA
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
#else
    __trap();
#endif
}

/* Wait until the phase with this parity has completed. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
#if FC_HAVE_TMA
    asm volatile("{\n.reg .pred done;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT_%=;\n}\n" ::"r"(smem_u32(bar)),
                 "r"(parity)
                 : "memory");
#else
    __trap();
#endif
}

/* Arrive (release, CTA scope) on this CTA's mbarrier: no cluster-scope fence (MEMBAR), for a
 * barrier no other CTA writes into the buffer of. */
__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
#if FC_HAVE_TMA
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#else
    __trap();
#endif
}

/* The shared::cluster address of this CTA's shared memory at p as seen in CTA `rank` of the
 * cluster (distributed shared memory; rank may be this CTA's own). */
__device__ __forceinline__ uint32_t cluster_addr(const void *p, uint32_t rank)
{
    uint32_t a = 0;
#if FC_HAVE_TMA
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(a) : "r"(smem_u32(p)), "r"(rank));
#else
    __trap();
#endif
    return a;
}

/* Arrive on the mbarrier at the same offset in CTA `rank` of this cluster (rank may be this
 * CTA's own). CLUSTER_RELEASE: a cluster-scope release, which is a fence (MEMBAR); without
 * it the default CTA-scope release, as CUTLASS's cluster pipelines release a stage to its
 * remote producers: enough for a consumer whose reads of the stage have all completed before
 * it arrives (wgmma waited for, fragments in registers). On a one-CTA cluster the local
 * mbar_arrive instead of the fenced arrive cost 16% less time (NOTES_FCGP.md). */
template <bool CLUSTER_RELEASE>
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t *bar, uint32_t rank)
{
#if FC_HAVE_TMA
    const uint32_t remote = cluster_addr(bar, rank);
    if constexpr (CLUSTER_RELEASE)
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
    else
        asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
#else
    __trap();
#endif
}

/* Every thread of every CTA of the cluster (a __syncthreads across the cluster). */
__device__ __forceinline__ void cluster_sync()
{
#if FC_HAVE_TMA
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}

/* A float from distributed shared memory (cluster_addr), after a cluster_sync that published it
 * (volatile keeps it after that barrier; no memory clobber, so ordinary loads around it may
 * still be scheduled across it). */
__device__ __forceinline__ float ld_cluster_f32(uint32_t addr)
{
    float v = 0.f;
#if FC_HAVE_TMA
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr));
#else
    __trap();
#endif
    return v;
}

/* This CTA's rank in its cluster (x fastest). */
__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r = 0;
#if FC_HAVE_TMA
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
    return r;
}

/* Copy the box at (c0, c1, c2) of a 3-D tensor map into shared memory at dst (128-byte
 * aligned), completing its bytes on `bar`; with a mask, into the same offset of every CTA of
 * the mask (bit = cluster rank), completing on each one's mbarrier at bar's offset. */
__device__ __forceinline__ void load_3d(void *dst, const CUtensorMap *map, int c0, int c1, int c2, uint64_t *bar)
{
#if FC_HAVE_TMA
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
                 "[%5];\n" ::"r"(smem_u32(dst)),
                 "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
                 : "memory");
#else
    __trap();
#endif
}
__device__ __forceinline__ void load_3d_multicast(void *dst, const CUtensorMap *map, int c0, int c1, int c2,
                                                  uint64_t *bar, uint16_t mask)
{
#if FC_HAVE_TMA
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                 "[%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(smem_u32(dst)),
                 "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar)), "h"(mask)
                 : "memory");
#else
    __trap();
#endif
}

/* The same for a 4-D tensor map, without multicast. */
__device__ __forceinline__ void load_4d(void *dst, const CUtensorMap *map, int c0, int c1, int c2, int c3, uint64_t *bar)
{
#if FC_HAVE_TMA
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
                 "%5}], [%6];\n" ::"r"(smem_u32(dst)),
                 "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
                 : "memory");
#else
    __trap();
#endif
}

/* The same for a 5-D tensor map, without multicast. */
__device__ __forceinline__ void load_5d(void *dst, const CUtensorMap *map, int c0, int c1, int c2, int c3, int c4,
                                        uint64_t *bar)
{
#if FC_HAVE_TMA
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
                 "%5, %6}], [%7];\n" ::"r"(smem_u32(dst)),
                 "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(smem_u32(bar))
                 : "memory");
#else
    __trap();
#endif
}

/* A 3-D box from shared memory (src: the box's smem image, laid out as the map's swizzle says)
 * to global memory through map at (c0, c1, c2), in this thread's bulk group; parts of the box
 * past the tensor's ends are not written. The writes into src must be visible to the async proxy
 * first (fence_proxy_async_shared by every writer, then a barrier). */
__device__ __forceinline__ void store_3d(const CUtensorMap *map, const void *src, int c0, int c1, int c2)
{
#if FC_HAVE_TMA
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(map),
                 "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(src))
                 : "memory");
#else
    __trap();
#endif
}
/* this thread's bulk copies issued so far as one group; then waiting until every group of this
 * thread has read its shared memory (which may then be reused or freed) */
__device__ __forceinline__ void bulk_commit_wait_read()
{
#if FC_HAVE_TMA
    asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
#else
    __trap();
#endif
}
/* this thread's shared-memory writes made visible to the copy engine (the async proxy) */
__device__ __forceinline__ void fence_proxy_async_shared()
{
#if FC_HAVE_TMA
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#else
    __trap();
#endif
}

/* Copy `bytes` (a multiple of 16) of contiguous global memory at src (16-byte aligned) into
 * shared memory at dst (16-byte aligned), completing them on `bar`; with a mask, into the same
 * offset of every CTA of the mask, as load_3d_multicast. One request stream of whole lines:
 * boxes whose rows are 32 bytes filled shared memory at 5.0 TB/s on an H100, these at 8.3
 * (benchmarks/lab/tma_rate.cu, NOTES_FCGP.md session 19). */
__device__ __forceinline__ void bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
#if FC_HAVE_TMA
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
#else
    __trap();
#endif
}
__device__ __forceinline__ void bulk_load_multicast(void *dst, const void *src, uint32_t bytes, uint64_t *bar,
                                                    uint16_t mask)
{
#if FC_HAVE_TMA
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, "
                 "[%3], %4;\n" ::"r"(smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar)), "h"(mask)
                 : "memory");
#else
    __trap();
#endif
}

/* Host: cuTensorMapEncodeTiled from the driver through the runtime (no driver library linked),
 * looked up once; nullptr where the driver lacks it. */
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
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

/* Host: a 3-D map of a (d2, d1, d0) array of es-byte elements, rows contiguous and the d2 index
 * stride2 bytes apart (0: contiguous, d0 d1 es), boxes of (b2, b1, b0), zeros past its end;
 * CUDA_ERROR_NOT_FOUND where the driver has no encoder. */
inline CUresult encode_3d(CUtensorMap *m, const void *base, CUtensorMapDataType ty, size_t es, uint64_t d0,
                          uint64_t d1, uint64_t d2, uint32_t b0, uint32_t b1, uint32_t b2, CUtensorMapSwizzle swizzle,
                          uint64_t stride2 = 0)
{
    const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (!encode)
        return CUDA_ERROR_NOT_FOUND;
    const cuuint64_t dims[3] = {d0, d1, d2}, strides[2] = {d0 * es, stride2 ? stride2 : d0 * d1 * es};
    const cuuint32_t box[3] = {b0, b1, b2}, elem[3] = {1, 1, 1};
    return encode(m, ty, 3, const_cast<void *>(base), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}
/* Host: an N-D map (N = 2 to 5), dims[0] contiguous and dims[i] strides[i - 1] bytes apart,
 * boxes of box[], in `swizzle`, zeros past its end. */
template <int N>
inline CUresult encode_nd(CUtensorMap *m, const void *base, CUtensorMapDataType ty, const uint64_t (&dims)[N],
                          const uint64_t (&strides)[N - 1], const uint32_t (&box)[N],
                          CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE)
{
    static_assert(N >= 2 && N <= 5, "the copy engine's ranks");
    const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (!encode)
        return CUDA_ERROR_NOT_FOUND;
    cuuint64_t d[N], st[N - 1];
    cuuint32_t b[N], elem[N];
    for (int i = 0; i < N; ++i) {
        d[i] = dims[i], b[i] = box[i], elem[i] = 1;
        if (i < N - 1)
            st[i] = strides[i];
    }
    return encode(m, ty, N, const_cast<void *>(base), d, st, b, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

} // namespace tma
} // namespace fc
