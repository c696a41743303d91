/* tma_ring.cuh — one CTA's ring of S shared-memory stages fed by the copy engine (tma.cuh), for
 * the Hopper FCGP backward kernels: one thread of a producer warpgroup issues each step's copies
 * once its buffer is free, and each consumer warpgroup releases a buffer once its reads of it
 * have completed. Until session 21 thread 0 issued them between its own steps; it held its whole
 * warpgroup at every stall, and the producer took gW 1019 -> 615 us at Cl(3,0) tf32
 * (benchmarks/NOTES_FCGP.md). The forward (fcgp_wgmma.cuh) keeps its own ring, which also
 * releases across a cluster.
 */
#pragma once

#include "tma.cuh"

namespace fc {
namespace tma {

template <int S> struct Ring {
    uint64_t *full, *empty;
    int steps;

    /* Every thread of the CTA constructs it (a barrier inside); bars: 2 S mbarriers in shared
     * memory; consumer_threads: the threads of the warpgroups that run consume_fed, whose warps
     * each release every buffer, so the empty barriers count their warps. (A count given in warps
     * or warpgroups by the caller went stale once in a lab: 2 where 8 warps released, NOTES_FCGP.md
     * session 55; the threads are what the kernels already name.) */
    __device__ Ring(uint64_t *bars, int steps_, int consumer_threads)
        : full(bars), empty(bars + S), steps(steps_)
    {
        if (threadIdx.x == 0) {
            for (int b = 0; b < S; ++b) {
                mbar_init(&full[b], 1);
                mbar_init(&empty[b], consumer_threads / 32);
            }
            fence_mbar_init();
        }
        __syncthreads();
    }
    /* The producer's thread: issue(s, full barrier) copies step s into buffer s % S, every step
     * in order, each once the consumers have released its buffer. */
    template <class Issue> __device__ __forceinline__ void produce(Issue &&issue) { produce_range(0, steps, issue); }
    /* ... steps [s0, s1) of them only (a kernel may issue its pieces' steps in loops of their own) */
    template <class Issue> __device__ __forceinline__ void produce_range(int s0, int s1, Issue &&issue)
    {
        for (int s = s0; s < s1; ++s) {
            if (s >= S)
                mbar_wait(&empty[s % S], ((s - S) / S) & 1);
            issue(s, &full[s % S]);
        }
    }
    /* The consumer warpgroups, through steps [s0, s1) (a kernel may work through several pieces
     * in one ring, the next piece's copies in flight during a piece's epilogue): wait for the
     * step's tiles, body(s) consumes them and returns once its warpgroup's reads of the buffer
     * are complete (wgmma waited for), then one thread a warp releases the buffer (the ring is
     * made with its consumers' threads and counts their warps). A warp, not a warpgroup: the bodies' threads also
     * read the buffer themselves (LDS), and wgmma.wait_group orders only its own warp's reads
     * before it, so a warpgroup's first thread could pass it while another warp still reads.
     * (compute-sanitizer's racecheck reports the one-path gW's bulk copies into a reused buffer
     * against such reads under either release, and under a proxy fence: NOTES_FCGP.md session 42.) */
    template <class Body> __device__ __forceinline__ void consume_fed(int s0, int s1, Body &&body)
    {
        for (int s = s0; s < s1; ++s) {
            mbar_wait(&full[s % S], (s / S) & 1);
            body(s);
            __syncwarp();
            if (threadIdx.x % 32 == 0)
                mbar_arrive(&empty[s % S]);
        }
    }
};

} // namespace tma
} // namespace fc
