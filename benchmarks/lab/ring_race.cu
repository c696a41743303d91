/* ring_race.cu — what compute-sanitizer's racecheck reports for a ring of shared-memory stages
 * filled by the copy engine and released through mbarriers (tma_ring.cuh's protocol), with nothing
 * else in the kernel: is the one-path gW's report (bulk copies into a released stage against the
 * consumers' LDS of it, NOTES_FCGP.md session 42) the protocol's or the tool's?
 *
 * One CTA: a producer thread copies step s (STEP bytes of a global array) into stage s % S once
 * the stage's empty barrier has completed; 8 consumer warps wait for its full barrier, each thread
 * reads its words of the stage (LDS) and sums them, then each warp's lane 0 arrives on the empty
 * barrier (after __syncwarp), as Ring::consume_fed does. The sum is checked against the host's.
 * Modes (argv[1]):
 *   0  bulk copies (cp.async.bulk, as gw_pseq_kernel), released after the reads: correct
 *   1  bulk copies, released before the reads: a real race (the next copy may overwrite them)
 *   2  tensor copies (cp.async.bulk.tensor, a 2-D map, as gw_tma_kernel), released after: correct
 *   3  tensor copies, released before the reads: a real race
 * If 0 reports hazards as 1 does, racecheck does not order bulk copies by the mbarriers; if 3
 * reports none, it does not see tensor copies' writes at all.
 * Build and run (sm_90a):
 *   nvcc -std=c++17 -O3 -lineinfo -Icsrc -gencode=arch=compute_90a,code=sm_90a -DFC_SM90A=1 \
 *       benchmarks/lab/ring_race.cu -o ring_race
 *   compute-sanitizer --tool racecheck ./ring_race 0
 */
#include <cstdio>
#include <vector>

#include "../../csrc/cuda/common.cuh"
#include "../../csrc/cuda/tma.cuh"
#include "lab_check.h"

using namespace fc;

constexpr int S = 4, STEP = 4096, STEPS = 64, CONSUMERS = 256; /* a step: 1024 floats, 4 a consumer */

__global__ void __launch_bounds__(CONSUMERS + 32, 1)
    ring_race(const float *__restrict__ src, const __grid_constant__ CUtensorMap map, int mode, float *out)
{
    __shared__ __align__(1024) float stage[S][STEP / 4];
    __shared__ __align__(8) uint64_t full[S], empty[S];
    const int tid = threadIdx.x;
    const bool tensor = mode >= 2, early = mode % 2 == 1;
    if (tid == 0) {
        for (int b = 0; b < S; ++b) {
            tma::mbar_init(&full[b], 1);
            tma::mbar_init(&empty[b], CONSUMERS / 32);
        }
        tma::fence_mbar_init();
    }
    __syncthreads();
    if (tid >= CONSUMERS) { /* the producer warp: its first thread */
        if (tid != CONSUMERS)
            return;
        for (int s = 0; s < STEPS; ++s) {
            if (s >= S)
                tma::mbar_wait(&empty[s % S], ((s - S) / S) & 1);
            tma::mbar_arrive_expect_tx(&full[s % S], STEP);
            if (tensor) /* the array as (STEPS, 4, 256) floats: box (1, 4, 256) at step s */
                tma::load_3d(stage[s % S], &map, 0, 0, s, &full[s % S]);
            else
                tma::bulk_load(stage[s % S], src + (size_t)s * (STEP / 4), STEP, &full[s % S]);
        }
        return;
    }
    float sum = 0.f;
    for (int s = 0; s < STEPS; ++s) {
        tma::mbar_wait(&full[s % S], (s / S) & 1);
        if (early) { /* the bug: the stage released before its reads */
            __syncwarp();
            if (tid % 32 == 0)
                tma::mbar_arrive(&empty[s % S]);
        }
        const float4 v = *(const float4 *)&stage[s % S][4 * tid];
        sum += v.x + v.y + v.z + v.w;
        if (!early) {
            __syncwarp();
            if (tid % 32 == 0)
                tma::mbar_arrive(&empty[s % S]);
        }
    }
    out[tid] = sum;
}

int main(int argc, char **argv)
{
    const int mode = argc > 1 ? atoi(argv[1]) : 0;
    const size_t n = (size_t)STEPS * STEP / 4;
    std::vector<float> h(n);
    for (size_t i = 0; i < n; ++i)
        h[i] = (float)(i % 97) - 48.f;
    float *src, *out;
    CK(cudaMalloc(&src, n * sizeof(float)));
    CK(cudaMalloc(&out, CONSUMERS * sizeof(float)));
    CK(cudaMemcpy(src, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CUtensorMap map{};
    if (tma::encode_3d(&map, src, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, 256, STEP / 1024, STEPS, 256, STEP / 1024, 1,
                       CU_TENSOR_MAP_SWIZZLE_NONE) != CUDA_SUCCESS) {
        fprintf(stderr, "tensor map encoding failed\n");
        return 2;
    }
    ring_race<<<1, CONSUMERS + 32>>>(src, map, mode, out);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<float> o(CONSUMERS);
    CK(cudaMemcpy(o.data(), out, CONSUMERS * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int t = 0; t < CONSUMERS; ++t) {
        double want = 0;
        for (int s = 0; s < STEPS; ++s)
            for (int e = 0; e < 4; ++e)
                want += h[(size_t)s * (STEP / 4) + 4 * t + e];
        bad += o[t] != (float)want;
    }
    printf("mode %d: %s, %d of %d sums differ\n", mode, bad ? "WRONG" : "ok", bad, CONSUMERS);
    CK(cudaFree(src));
    CK(cudaFree(out));
    return bad ? 1 : 0;
}
