/* tma_ring.cuh — one CTA's ring of S shared-memory stages fed by the copy engine (tma.cuh), for
 * the Hopper FCGP backward kernels: thread 0 issues a step's copies as soon as its buffer is
 * free, polling the "empty" mbarriers (it also computes, so it must not block on them), and
 * blocks only when the step it is about to read has not been issued yet; each consumer
 * warpgroup releases a buffer once its reads of it have completed. Or (produce, consume_fed)
 * a producer warpgroup of its own issues the copies, as in the forward (fcgp_wgmma.cuh) and gW.
 */
#pragma once

#include "tma.cuh"

namespace fc {
namespace tma {

template <int S> struct Ring {
    uint64_t *full, *empty;
    int steps, issued = 0;

    /* Every thread of the CTA constructs it (a barrier inside); bars: 2 S mbarriers in shared memory. */
    __device__ Ring(uint64_t *bars, int steps_, int consumers) : full(bars), empty(bars + S), steps(steps_)
    {
        if (threadIdx.x == 0) {
            for (int b = 0; b < S; ++b) {
                mbar_init(&full[b], 1);
                mbar_init(&empty[b], consumers);
            }
            fence_mbar_init();
        }
        __syncthreads();
    }
    /* Thread 0, before reading step s (< steps): issue(t, full barrier) copies step t into buffer t % S. */
    template <class Issue> __device__ __forceinline__ void pump(int s, Issue &&issue)
    {
        while (issued < steps && issued < s + S &&
               (issued < S || mbar_test(&empty[issued % S], ((issued - S) / S) & 1))) {
            issue(issued, &full[issued % S]);
            ++issued;
        }
        if (issued == s) {
            mbar_wait(&empty[s % S], ((s - S) / S) & 1);
            issue(issued, &full[issued % S]);
            ++issued;
        }
    }
    /* The other way to feed the ring: one thread of a producer warpgroup issues every step in
     * order, each once its buffer is free (blocking: it computes nothing), ... */
    template <class Issue> __device__ __forceinline__ void produce(Issue &&issue)
    {
        for (int s = 0; s < steps; ++s) {
            if (s >= S)
                mbar_wait(&empty[s % S], ((s - S) / S) & 1);
            issue(s, &full[s % S]);
        }
    }
    /* ... and the consumer warpgroups go through steps [s0, s1): wait for the step's tiles,
     * body(s), one release a warpgroup. */
    template <class Body> __device__ __forceinline__ void consume_fed(int s0, int s1, Body &&body)
    {
        for (int s = s0; s < s1; ++s) {
            mbar_wait(&full[s % S], (s / S) & 1);
            body(s);
            if (threadIdx.x % 128 == 0)
                mbar_arrive(&empty[s % S]);
        }
    }
    /* Every step in order: thread 0 keeps the copies ahead, every thread waits for the step's
     * tiles, body(s) consumes them and returns once its warpgroup's reads of the buffer are
     * complete (wgmma waited for), and one thread a warpgroup releases the buffer. */
    template <class Issue, class Body> __device__ __forceinline__ void consume(Issue &&issue, Body &&body)
    {
        consume_range(0, steps, issue, body);
    }
    /* Steps [s0, s1) only, the earlier ones consumed already: a kernel that works through several
     * pieces in one ring, its copies running on into the next piece during a piece's epilogue. */
    template <class Issue, class Body>
    __device__ __forceinline__ void consume_range(int s0, int s1, Issue &&issue, Body &&body)
    {
        for (int s = s0; s < s1; ++s) {
            if (threadIdx.x == 0)
                pump(s, issue);
            mbar_wait(&full[s % S], (s / S) & 1);
            body(s);
            if (threadIdx.x % 128 == 0)
                mbar_arrive(&empty[s % S]);
            if (threadIdx.x == 0 && s + 1 < steps)
                pump(s + 1, issue);
        }
    }
};

} // namespace tma
} // namespace fc
