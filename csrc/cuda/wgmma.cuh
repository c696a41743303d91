/* wgmma.cuh — Hopper warpgroup MMA (sm_90a only): shared-memory descriptors, the fences and
 * groups that order it, and the register-A forms the FCGP kernels use: A (64 x K) formed in
 * registers by the 128 threads of a warpgroup, B (K x N) in shared memory, D (64 x N) in
 * fp32 registers. K = 8 (tf32) or 16 (bf16, f16); N = 32, 64 or 128 (the forward), 96, 128 and
 * 192 (tf32, bf16: the input gradient), 48 (tf32, bf16: the weight gradient).
 *
 * Register fragments (PTX ISA, "Register Fragments" of wgmma): warp w of the warpgroup
 * holds rows 16w .. 16w + 15; lane = 4 g + t holds
 *   A tf32:  a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
 *   A 16-bit: a0 (g, 2t..2t+1), a1 (g + 8, 2t..2t+1), a2 (g, 2t+8..2t+9), a3 (g + 8, 2t+8..2t+9)
 *   D:       d[4c + 0..1] (g, 8c + 2t .. + 1), d[4c + 2..3] (g + 8, 8c + 2t .. + 1)
 * B is K-major, without swizzle (8 x 16-byte core matrices, rows 16 bytes apart; the core
 * matrix of (N block nb, 16-byte K chunk kb) starts at nb * sbo + kb * lbo) or in the
 * 32-byte swizzle layout the copy engine writes (desc_kmajor_sw32).
 *
 * Compiled only where __CUDA_ARCH_FEAT_SM90_ALL is defined (an sm_90a target); elsewhere the
 * functions trap, and launchers must not select the kernels that call them.
 */
#pragma once

#include <cstdint>

#include "mma_ptx.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FC_HAVE_WGMMA 1
#else
#define FC_HAVE_WGMMA 0
#endif

namespace fc {
namespace fcgp {
namespace wg {

/* Descriptor of a K-major, unswizzled B operand at shared address `addr` (16-byte aligned). */
__device__ __forceinline__ uint64_t desc_kmajor(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | (uint64_t)((lbo & 0x3FFFF) >> 4) << 16 |
           (uint64_t)((sbo & 0x3FFFF) >> 4) << 32;
}

/* Descriptor of a K-major B operand in the 32-byte swizzle layout (what the copy engine writes
 * with CU_TENSOR_MAP_SWIZZLE_32B): rows of 32 bytes, the two 16-byte halves of a row swapped
 * in rows 4-7 of every 8; 8-row groups `sbo` apart (256 when rows are adjacent). The tile must
 * start on a 256-byte boundary, where the pattern repeats; the leading offset is unused. */
__device__ __forceinline__ uint64_t desc_kmajor_sw32(uint32_t addr, uint32_t sbo)
{
    return desc_kmajor(addr, 16, sbo) | (uint64_t)3 << 62;
}

/* Orders this thread's earlier register writes (A fragments, accumulators) before the
 * wgmma that reads them; every warp of the warpgroup executes it. */
__device__ __forceinline__ void fence()
{
#if FC_HAVE_WGMMA
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}
__device__ __forceinline__ void commit()
{
#if FC_HAVE_WGMMA
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}
/* Wait until at most N committed groups are pending. */
template <int N> __device__ __forceinline__ void wait()
{
#if FC_HAVE_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
    __trap();
#endif
}
/* Shared memory written by ordinary stores or cp.async and read next by wgmma (the async
 * proxy) needs this in each writing thread before the barrier. */
__device__ __forceinline__ void fence_proxy_async()
{
#if FC_HAVE_WGMMA
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
/* Keeps the compiler from moving accesses to an accumulator across the asm around it. */
template <int N> __device__ __forceinline__ void fence_operands(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* Keeps a register A operand live (its registers not reused) up to this point: after the
 * wait that retires the wgmmas reading it. */
template <int N> __device__ __forceinline__ void fence_operands(uint32_t (&r)[N][4])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+r"(r[i][0]), "+r"(r[i][1]), "+r"(r[i][2]), "+r"(r[i][3])::"memory");
}

/* The operand strings of one wgmma: D registers, A registers and the B descriptor, the
 * scale-d flag; and D's constraints. */
#define FC_WG_D32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define FC_WG_A32 "{%16, %17, %18, %19}, %20"
#define FC_WG_S32 "%21"
#define FC_WG_C32(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define FC_WG_D64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FC_WG_A64 "{%32, %33, %34, %35}, %36"
#define FC_WG_S64 "%37"
#define FC_WG_C64(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define FC_WG_D128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define FC_WG_A128 "{%64, %65, %66, %67}, %68"
#define FC_WG_S128 "%69"
#define FC_WG_C128(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

/* N = 48: the weight gradient's tiles (its paths' accumulators a position); 96, 128 and 192: the
 * input gradient's, where one wgmma covers all the paths of an output component (3 to 6 tiles
 * of 32 columns) */
#define FC_WG_D48 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}"
#define FC_WG_A48 "{%24, %25, %26, %27}, %28"
#define FC_WG_S48 "%29"
#define FC_WG_C48(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
#define FC_WG_D96 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}"
#define FC_WG_A96 "{%48, %49, %50, %51}, %52"
#define FC_WG_S96 "%53"
#define FC_WG_C96(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])

#define FC_WG_D192 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"
#define FC_WG_A192 "{%96, %97, %98, %99}, %100"
#define FC_WG_S192 "%101"
#define FC_WG_C192(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])

/* d (+)= A * B: MmaRS<MODE, N>::run(d, a, desc_b, scale_d); scale_d = 0 ignores d's old value. */
template <int MODE, int N> struct MmaRS;
#if FC_HAVE_WGMMA
#define FC_WG_RS(MODE, N, K, TY, TAIL)                                                                   \
    template <> struct MmaRS<MODE, N> {                                                                  \
        static __device__ __forceinline__ void run(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, \
                                                   int scale_d)                                          \
        {                                                                                                \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " FC_WG_S##N ", 0;\n"                        \
                         "wgmma.mma_async.sync.aligned.m64n" #N "k" #K ".f32." TY "." TY " " FC_WG_D##N    \
                         ", " FC_WG_A##N ", p, 1, 1" TAIL ";\n}\n"                                      \
                         : FC_WG_C##N(d)                                                                 \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));           \
        }                                                                                                \
    };
#else
#define FC_WG_RS(MODE, N, K, TY, TAIL)                                                                   \
    template <> struct MmaRS<MODE, N> {                                                                  \
        static __device__ __forceinline__ void run(float (&)[N / 2], const uint32_t (&)[4], uint64_t, int) \
        {                                                                                                \
            __trap();                                                                                    \
        }                                                                                                \
    };
#endif
/* tf32 takes no transpose flag; the 16-bit forms take imm-trans-b = 0 (B K-major) */
FC_WG_RS(kTF32, 48, 8, "tf32", "")
FC_WG_RS(kBF16, 48, 16, "bf16", ", 0")
FC_WG_RS(kTF32, 96, 8, "tf32", "")
FC_WG_RS(kBF16, 96, 16, "bf16", ", 0")
FC_WG_RS(kTF32, 192, 8, "tf32", "")
FC_WG_RS(kBF16, 192, 16, "bf16", ", 0")
FC_WG_RS(kTF32, 32, 8, "tf32", "")
FC_WG_RS(kTF32, 64, 8, "tf32", "")
FC_WG_RS(kTF32, 128, 8, "tf32", "")
FC_WG_RS(kBF16, 32, 16, "bf16", ", 0")
FC_WG_RS(kBF16, 64, 16, "bf16", ", 0")
FC_WG_RS(kBF16, 128, 16, "bf16", ", 0")
FC_WG_RS(kF16, 32, 16, "f16", ", 0")
FC_WG_RS(kF16, 64, 16, "f16", ", 0")
FC_WG_RS(kF16, 128, 16, "f16", ", 0")
#undef FC_WG_RS

} // namespace wg
} // namespace fcgp
} // namespace fc
