/* pdl.cuh — programmatic dependent launch (compute capability 9.0 on): a kernel launched with
 * it may start while the kernel before it in the stream still runs, so that a memory-bound pass
 * fills the SMs a GEMM's last partial wave leaves idle (the Hopper FCGP backward,
 * fcgp_sm90a.cu).
 *
 * Two roles keep the stream's order where it matters:
 *   waiting: wait() at the top (the kernel before it, and with it every earlier one, has
 *            completed and its writes are visible), then open(): for kernels that read what
 *            earlier ones wrote or overwrite what they read.
 *   free:    open() at the top, and one block waits (wait_in_one_block): the kernel touches
 *            nothing any kernel back to the last waiting one touches, so it may overlap them;
 *            its one waiting block makes its completion imply theirs, so a waiting kernel
 *            after it still waits for everything before.
 * A dependent starts only once every block of its predecessor has opened (or exited), so the
 * first kernel of a sequence is launched without the attribute: what ran before it is not ours.
 * On older devices and without the attribute both instructions do nothing. */
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace fc {
namespace pdl {

/* Wait until the kernel this one depends on has completed and its memory operations are visible. */
__device__ __forceinline__ void wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/* Let the next kernel (launched with the attribute) start once every block of this one has come here. */
__device__ __forceinline__ void open()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* The waiting role's start. */
__device__ __forceinline__ void waiting() { wait(), open(); }

/* The free role's start: open, and block (0, 0, 0) alone waits. */
__device__ __forceinline__ void free_start()
{
    open();
    if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
        wait();
}

/* Launch kernel k with or without the attribute (chained: whether the kernel before it in the
 * stream is one of the same sequence). */
template <class... P, class... Args>
cudaError_t launch(bool chained, void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, Args &&...args)
{
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = st;
    cfg.attrs = attr, cfg.numAttrs = chained ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, std::forward<Args>(args)...);
}

/* A sequence of launches on one stream: the first without the attribute, the rest with it when on. */
struct Chain {
    bool on, started = false;
    explicit Chain(bool enabled) : on(enabled) {}
    bool next()
    {
        const bool c = on && started;
        started = true;
        return c;
    }
};

} // namespace pdl
} // namespace fc
