/* wgmma.cuh — Hopper warpgroup MMA (sm_90a only): shared-memory descriptors, the fences and
 * groups that order it, and the register-A forms the FCGP kernels use: A (64 x K) formed in
 * registers by the 128 threads of a warpgroup, B (K x N) in shared memory, D (64 x N) in
 * fp32 registers. K = 8 (tf32) or 16 (bf16, f16); N = 32, 64 or 128 (the forward), 96, 128 and
 * 192 (tf32, bf16: the input gradient), 48 (tf32, bf16: the weight gradient), 256 (tf32, bf16:
 * benchmarks/lab/wgmma_rate.cu's wider shapes). One form reads A from shared memory too (MmaSS:
 * the bf16 input gradient's go^T panels, MN-major).
 *
 * Register fragments (PTX ISA, "Register Fragments" of wgmma): warp w of the warpgroup
 * holds rows 16w .. 16w + 15; lane = 4 g + t holds
 *   A tf32:  a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
 *   A 16-bit: a0 (g, 2t..2t+1), a1 (g + 8, 2t..2t+1), a2 (g, 2t+8..2t+9), a3 (g + 8, 2t+8..2t+9)
 *   D:       d[4c + 0..1] (g, 8c + 2t .. + 1), d[4c + 2..3] (g + 8, 8c + 2t .. + 1)
 * B is K-major, without swizzle (8 x 16-byte core matrices, rows 16 bytes apart; the core
 * matrix of (N block nb, 16-byte K chunk kb) starts at nb * sbo + kb * lbo) or in the
 * 32-, 64- or 128-byte swizzle layout the copy engine writes (desc_kmajor_swz).
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

/* Descriptor of a K-major B operand in rows of RB = 32, 64 or 128 bytes, in the copy engine's
 * swizzle of that width (CU_TENSOR_MAP_SWIZZLE_32B / 64B / 128B: layout types 3, 2, 1; with 32,
 * the two 16-byte halves of a row swapped in rows 4-7 of every 8), 8-row groups adjacent (sbo
 * 8 RB), the leading offset unused. The tile starts on an 8 RB boundary, where the pattern
 * repeats; the wgmma over K chunk kk of a row (32 bytes: 8 tf32, 16 bf16) takes addr + 32 kk, as
 * the hardware applies the swizzle to the whole address. */
template <int RB> __device__ __forceinline__ uint64_t desc_kmajor_swz(uint32_t addr)
{
    static_assert(RB == 32 || RB == 64 || RB == 128, "a swizzle of 32, 64 or 128 bytes");
    constexpr uint64_t layout = RB == 32 ? 3 : RB == 64 ? 2 : 1;
    return desc_kmajor(addr, 16, 8 * RB) | layout << 62;
}

/* Descriptor of an MN-major 16-bit B operand in the copy engine's 128-byte swizzle (layout type 1;
 * CU_TENSOR_MAP_SWIZZLE_128B): 8 K rows of 64 values (128 bytes) a 1024-byte swizzle atom, the
 * K groups of 8 rows sbo bytes apart and the atoms of 64 N columns lbo bytes apart (the roles
 * CUTLASS's make_gmma_desc<Major::MN> gives SW128). The tile starts on a 1024-byte boundary. */
__device__ __forceinline__ uint64_t desc_mn_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return desc_kmajor(addr, lbo, sbo) | (uint64_t)1 << 62;
}

/* Descriptor of an MN-major 16-bit operand in the 32-byte swizzle (layout type 3): atoms of 16
 * values along M or N (32 bytes) by 8 K rows 32 bytes apart (256 contiguous bytes, the two
 * 16-byte halves of a row swapped in rows 4-7), the next 16 values of M or N lbo bytes on, the
 * next 8 K rows sbo bytes on (the roles CUTLASS's make_gmma_desc<Major::MN> gives SW32). The
 * atom starts on a 256-byte boundary. */
__device__ __forceinline__ uint64_t desc_mn_sw32(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return desc_kmajor(addr, lbo, sbo) | (uint64_t)3 << 62;
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
/* Register reallocation between the warpgroups of a warp-specialized block (every warp of
 * the warpgroup executes it): a producer gives registers back (dec), consumers take them
 * (inc); N a multiple of 8 in [24, 256]. The kernel needs __launch_bounds__ with a minimum of
 * blocks, else ptxas ignores it (C7508), and the counts must add up to what the launch holds. */
template <int N> __device__ __forceinline__ void setmaxnreg_dec()
{
#if FC_HAVE_WGMMA
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#else
    __trap();
#endif
}
template <int N> __device__ __forceinline__ void setmaxnreg_inc()
{
#if FC_HAVE_WGMMA
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
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

/* The operand strings of one wgmma: D registers (operands 0 .. N/2 - 1), A registers and the B
 * descriptor, the scale-d flag; and D's constraints. Built from runs of eight, so each shape is
 * one line: N = 32, 64 and 128 for the forward, 48 for the weight gradient, 96, 128 and 192 for
 * the input gradient (one wgmma over all the paths of an output component). */
#define FC_WG_R0 "%0, %1, %2, %3, %4, %5, %6, %7"
#define FC_WG_R8 "%8, %9, %10, %11, %12, %13, %14, %15"
#define FC_WG_R16 "%16, %17, %18, %19, %20, %21, %22, %23"
#define FC_WG_R24 "%24, %25, %26, %27, %28, %29, %30, %31"
#define FC_WG_R32 "%32, %33, %34, %35, %36, %37, %38, %39"
#define FC_WG_R40 "%40, %41, %42, %43, %44, %45, %46, %47"
#define FC_WG_R48 "%48, %49, %50, %51, %52, %53, %54, %55"
#define FC_WG_R56 "%56, %57, %58, %59, %60, %61, %62, %63"
#define FC_WG_R64 "%64, %65, %66, %67, %68, %69, %70, %71"
#define FC_WG_R72 "%72, %73, %74, %75, %76, %77, %78, %79"
#define FC_WG_R80 "%80, %81, %82, %83, %84, %85, %86, %87"
#define FC_WG_R88 "%88, %89, %90, %91, %92, %93, %94, %95"
#define FC_WG_R96 "%96, %97, %98, %99, %100, %101, %102, %103"
#define FC_WG_R104 "%104, %105, %106, %107, %108, %109, %110, %111"
#define FC_WG_R112 "%112, %113, %114, %115, %116, %117, %118, %119"
#define FC_WG_R120 "%120, %121, %122, %123, %124, %125, %126, %127"
#define FC_WG_C8(d, b) "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3]), "+f"(d[b + 4]), "+f"(d[b + 5]), \
    "+f"(d[b + 6]), "+f"(d[b + 7])
#define FC_WG_D32 "{" FC_WG_R0 ", " FC_WG_R8 "}"
#define FC_WG_A32 "{%16, %17, %18, %19}, %20"
#define FC_WG_S32 "%21"
#define FC_WG_C32(d) FC_WG_C8(d, 0), FC_WG_C8(d, 8)
#define FC_WG_D48 "{" FC_WG_R0 ", " FC_WG_R8 ", " FC_WG_R16 "}"
#define FC_WG_A48 "{%24, %25, %26, %27}, %28"
#define FC_WG_S48 "%29"
#define FC_WG_C48(d) FC_WG_C8(d, 0), FC_WG_C8(d, 8), FC_WG_C8(d, 16)
#define FC_WG_D64 "{" FC_WG_R0 ", " FC_WG_R8 ", " FC_WG_R16 ", " FC_WG_R24 "}"
#define FC_WG_A64 "{%32, %33, %34, %35}, %36"
#define FC_WG_S64 "%37"
#define FC_WG_C64(d) FC_WG_C8(d, 0), FC_WG_C8(d, 8), FC_WG_C8(d, 16), FC_WG_C8(d, 24)
#define FC_WG_D96 "{" FC_WG_R0 ", " FC_WG_R8 ", " FC_WG_R16 ", " FC_WG_R24 ", " FC_WG_R32 ", " FC_WG_R40 "}"
#define FC_WG_A96 "{%48, %49, %50, %51}, %52"
#define FC_WG_S96 "%53"
#define FC_WG_C96(d) FC_WG_C8(d, 0), FC_WG_C8(d, 8), FC_WG_C8(d, 16), FC_WG_C8(d, 24), FC_WG_C8(d, 32), FC_WG_C8(d, 40)
#define FC_WG_D128 "{" FC_WG_R0 ", " FC_WG_R8 ", " FC_WG_R16 ", " FC_WG_R24 ", " FC_WG_R32 ", " FC_WG_R40 ", " FC_WG_R48 ", " FC_WG_R56 "}"
#define FC_WG_A128 "{%64, %65, %66, %67}, %68"
#define FC_WG_S128 "%69"
#define FC_WG_C128(d) FC_WG_C8(d, 0), FC_WG_C8(d, 8), FC_WG_C8(d, 16), FC_WG_C8(d, 24), FC_WG_C8(d, 32), FC_WG_C8(d, 40), FC_WG_C8(d, 48), FC_WG_C8(d, 56)
#define FC_WG_D192 "{" FC_WG_R0 ", " FC_WG_R8 ", " FC_WG_R16 ", " FC_WG_R24 ", " FC_WG_R32 ", " FC_WG_R40 ", " FC_WG_R48 ", " FC_WG_R56 ", " FC_WG_R64 ", " FC_WG_R72 ", " FC_WG_R80 ", " FC_WG_R88 "}"
#define FC_WG_A192 "{%96, %97, %98, %99}, %100"
#define FC_WG_S192 "%101"
#define FC_WG_C192(d) FC_WG_C8(d, 0), FC_WG_C8(d, 8), FC_WG_C8(d, 16), FC_WG_C8(d, 24), FC_WG_C8(d, 32), FC_WG_C8(d, 40), FC_WG_C8(d, 48), FC_WG_C8(d, 56), FC_WG_C8(d, 64), FC_WG_C8(d, 72), FC_WG_C8(d, 80), FC_WG_C8(d, 88)

#define FC_WG_D256 "{" FC_WG_R0 ", " FC_WG_R8 ", " FC_WG_R16 ", " FC_WG_R24 ", " FC_WG_R32 ", " FC_WG_R40 ", " FC_WG_R48 ", " FC_WG_R56 ", " \
    FC_WG_R64 ", " FC_WG_R72 ", " FC_WG_R80 ", " FC_WG_R88 ", " FC_WG_R96 ", " FC_WG_R104 ", " FC_WG_R112 ", " FC_WG_R120 "}"
#define FC_WG_A256 "{%128, %129, %130, %131}, %132"
#define FC_WG_S256 "%133"
#define FC_WG_C256(d) FC_WG_C128(d), FC_WG_C8(d, 64), FC_WG_C8(d, 72), FC_WG_C8(d, 80), FC_WG_C8(d, 88), FC_WG_C8(d, 96), \
    FC_WG_C8(d, 104), FC_WG_C8(d, 112), FC_WG_C8(d, 120)

/* d (+)= A * B: MmaRS<MODE, N>::run(d, a, desc_b, scale_d); scale_d = 0 ignores d's old value.
 * TB = 1 (16-bit types): B MN-major (imm-trans-b = 1, desc_mn_sw128). */
template <int MODE, int N, int TB = 0> struct MmaRS;
#if FC_HAVE_WGMMA
#define FC_WG_RS(MODE, N, K, TY, TB, TAIL)                                                               \
    template <> struct MmaRS<MODE, N, TB> {                                                              \
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
#define FC_WG_RS(MODE, N, K, TY, TB, TAIL)                                                               \
    template <> struct MmaRS<MODE, N, TB> {                                                              \
        static __device__ __forceinline__ void run(float (&)[N / 2], const uint32_t (&)[4], uint64_t, int) \
        {                                                                                                \
            __trap();                                                                                    \
        }                                                                                                \
    };
#endif
/* tf32 takes no transpose flag; the 16-bit forms take imm-trans-b = 0 (B K-major), or 1 (B
 * MN-major: the bf16 forward reading W as stored, fwd_tma_kernel's WMN) */
FC_WG_RS(kTF32, 48, 8, "tf32", 0, "")
FC_WG_RS(kBF16, 48, 16, "bf16", 0, ", 0")
FC_WG_RS(kTF32, 96, 8, "tf32", 0, "")
FC_WG_RS(kBF16, 96, 16, "bf16", 0, ", 0")
FC_WG_RS(kTF32, 192, 8, "tf32", 0, "")
FC_WG_RS(kBF16, 192, 16, "bf16", 0, ", 0")
FC_WG_RS(kTF32, 32, 8, "tf32", 0, "")
FC_WG_RS(kTF32, 64, 8, "tf32", 0, "")
FC_WG_RS(kTF32, 128, 8, "tf32", 0, "")
FC_WG_RS(kBF16, 32, 16, "bf16", 0, ", 0")
FC_WG_RS(kBF16, 64, 16, "bf16", 0, ", 0")
FC_WG_RS(kBF16, 128, 16, "bf16", 0, ", 0")
FC_WG_RS(kF16, 32, 16, "f16", 0, ", 0")
FC_WG_RS(kF16, 64, 16, "f16", 0, ", 0")
FC_WG_RS(kF16, 128, 16, "f16", 0, ", 0")
FC_WG_RS(kTF32, 256, 8, "tf32", 0, "")
FC_WG_RS(kBF16, 256, 16, "bf16", 0, ", 0")
FC_WG_RS(kBF16, 64, 16, "bf16", 1, ", 1")
FC_WG_RS(kBF16, 128, 16, "bf16", 1, ", 1")
#undef FC_WG_RS

/* d (+)= A * B with both operands in shared memory, bf16: MmaSS<MODE, N>::run(d, desc_a,
 * desc_b, scale_d), A MN-major (imm-trans-a = 1: gz's go^T panels, desc_mn_sw32), B K-major
 * (imm-trans-b = 0). No A registers, so a step's wgmmas can stay in flight while the next
 * step's issue. Operands: D, then the two descriptors and the scale-d flag. */
template <int MODE, int N> struct MmaSS;
#if FC_HAVE_WGMMA
#define FC_WG_SS(MODE, N, TY, AB, S)                                                                       \
    template <> struct MmaSS<MODE, N> {                                                                    \
        static __device__ __forceinline__ void run(float (&d)[N / 2], uint64_t a, uint64_t b, int scale_d) \
        {                                                                                                  \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " S ", 0;\n"                                    \
                         "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " FC_WG_D##N ", " AB   \
                         ", p, 1, 1, 1, 0;\n}\n"                                                           \
                         : FC_WG_C##N(d)                                                                   \
                         : "l"(a), "l"(b), "r"(scale_d));                                                  \
        }                                                                                                  \
    };
#else
#define FC_WG_SS(MODE, N, TY, AB, S)                                                                       \
    template <> struct MmaSS<MODE, N> {                                                                    \
        static __device__ __forceinline__ void run(float (&)[N / 2], uint64_t, uint64_t, int) { __trap(); } \
    };
#endif
FC_WG_SS(kBF16, 32, "bf16", "%16, %17", "%18")
FC_WG_SS(kBF16, 48, "bf16", "%24, %25", "%26")
FC_WG_SS(kBF16, 64, "bf16", "%32, %33", "%34")
FC_WG_SS(kBF16, 96, "bf16", "%48, %49", "%50")
FC_WG_SS(kBF16, 128, "bf16", "%64, %65", "%66")
FC_WG_SS(kBF16, 192, "bf16", "%96, %97", "%98")
#undef FC_WG_SS

} // namespace wg
} // namespace fcgp
} // namespace fc
