/* lab_timing.cuh — what the gW labs (gw_pseq.cu, gw_pseq_lib.cu) share: random bf16 operands and
 * a launch's best time. */
#pragma once

#include <cstdint>

#include <cuda_bf16.h>

#include "lab_check.h"

/* bf16 values in [-1, 1) from a hash of the index: data that toggle like the library's (the
 * tensor cores' power, and with it the clock, depends on the data) */
__global__ void fill_random(__nv_bfloat16 *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
        p[i] = __float2bfloat16((float)(h & 0xffff) / 32768.f - 1.f);
    }
}

/* The best of five timed runs of launch() (after one untimed), in ms; before() runs ahead of each,
 * untimed. */
template <class Launch, class Before> float best_ms(Launch &&launch, Before &&before)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float best = 1e30f;
    for (int rep = 0; rep < 6; ++rep) {
        before();
        CK(cudaEventRecord(e0));
        launch();
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep > 0 && ms < best)
            best = ms;
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return best;
}
template <class Launch> float best_ms(Launch &&launch)
{
    return best_ms(launch, [] {});
}
