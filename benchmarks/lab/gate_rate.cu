/* gate_rate.cu — how fast can the bf16 forward's gate product g = Phi(x_0) Phi(y_0) be written,
 * and what holds fwd_prep at a quarter of the copy rate there (session 45's ncu)? At Cl(2,0) bf16
 * (W read as stored) fwd_prep is the gate alone: 1024 blocks of one 16-byte piece a thread, 6.1 us
 * for 12 MB in the held timeline (NOTES_FCGP.md session 46). Its blocks carry wst_block's 33 KB
 * shared tile and 40 registers, so 6 fit an SM (792 slots on 132 SMs: 1.3 waves); session 45's
 * one-wave form (two pieces a thread, 46 registers) measured slower, not faster.
 *
 * Each variant writes g over n = B N_in values (B 4096, N_in 512 unless argv[1] gives n) after
 * an L2 flush, best of five launches, and its g is checked against variant 0's bit for bit:
 *   0  as fwd_prep at Cl(2,0) bf16: the 33 KB tile reserved (never touched), one piece a thread
 *   1  gate_product as the library has it (no tile, one piece a thread)
 *   2  1 under __launch_bounds__(256, 8): 32 registers, 8 blocks an SM (one wave at n = 2M)
 *   3  half a piece a thread (8 bytes of x_0 and y_0), twice the blocks
 *   4  no gate: g = x_0 + y_0, the same bytes (the memory floor of this traffic and grid)
 * Each line gives the blocks an SM (the occupancy query) and registers, the grid, us and GB/s of
 * the 3n bf16 moved. Session 46's answer (H200): forms 0, 1 and 3 within 0.4 us of each other, 2
 * slower, 4 only 1.1 us faster: a pass this short costs about 7 us whatever it computes, so the
 * grid is not what holds fwd_prep. Build and run (sm_90a):
 *   nvcc -std=c++17 -O3 -lineinfo -Icsrc -gencode=arch=compute_90a,code=sm_90a -DFC_SM90A=1 \
 *       benchmarks/lab/gate_rate.cu -o gate_rate && ./gate_rate
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../csrc/cuda/fcgp_wgmma.cuh"
#include "lab_timing.cuh"

using namespace fc::fcgp::sm90;
using E = __nv_bfloat16;
constexpr int kThreads = 256, kPiece = 16 / sizeof(E);

__global__ void __launch_bounds__(kThreads) as_fwd_prep(const E *x0, const E *y0, E *g, int64_t n, int64_t never)
{
    __shared__ E tile[8 * 16][128 + 1]; /* wst_block's tile at NT 128: reserved, used only if never > 0 */
    if (blockIdx.x < never) {
        tile[threadIdx.x % 128][threadIdx.x % 129] = x0[threadIdx.x];
        __syncthreads();
        g[threadIdx.x] = tile[(threadIdx.x + 1) % 128][threadIdx.x % 129];
        return;
    }
    gate_pieces(x0, y0, g, n, blockIdx.x, gridDim.x);
}

__global__ void __launch_bounds__(kThreads, 8) gate_8(const E *x0, const E *y0, E *g, int64_t n)
{
    gate_pieces(x0, y0, g, n, blockIdx.x, gridDim.x);
}

__global__ void __launch_bounds__(kThreads) gate_half(const E *x0, const E *y0, E *g, int64_t n)
{
    constexpr int V = kPiece / 2;
    for (int64_t i = ((int64_t)blockIdx.x * kThreads + threadIdx.x) * V; i < n;
         i += (int64_t)gridDim.x * kThreads * V) {
        const uint2 xv = __ldg((const uint2 *)(x0 + i)), yv = __ldg((const uint2 *)(y0 + i));
        const E *xe = (const E *)&xv, *ye = (const E *)&yv;
        alignas(8) E ge[V];
#pragma unroll
        for (int v = 0; v < V; ++v)
            ge[v] = fc::store<E>(fc::gate_of<E>(fc::load<E>(xe[v])) * fc::gate_of<E>(fc::load<E>(ye[v])));
        *(uint2 *)(g + i) = *(const uint2 *)ge;
    }
}

__global__ void __launch_bounds__(kThreads) sum_only(const E *x0, const E *y0, E *g, int64_t n)
{
    for (int64_t i = ((int64_t)blockIdx.x * kThreads + threadIdx.x) * kPiece; i < n;
         i += (int64_t)gridDim.x * kThreads * kPiece) {
        const uint4 xv = __ldg((const uint4 *)(x0 + i)), yv = __ldg((const uint4 *)(y0 + i));
        const __nv_bfloat162 *xe = (const __nv_bfloat162 *)&xv, *ye = (const __nv_bfloat162 *)&yv;
        alignas(16) __nv_bfloat162 ge[4];
#pragma unroll
        for (int v = 0; v < 4; ++v)
            ge[v] = __hadd2(xe[v], ye[v]);
        *(uint4 *)(g + i) = *(const uint4 *)ge;
    }
}

/* blocks an SM (the occupancy query) and registers a thread */
template <class K> int2 fit(K kern)
{
    int b = 0;
    cudaFuncAttributes at{};
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kern, kThreads, 0));
    CK(cudaFuncGetAttributes(&at, kern));
    return make_int2(b, at.numRegs);
}

int main(int argc, char **argv)
{
    const int64_t n = argc > 1 ? atoll(argv[1]) : 4096LL * 512;
    if (n <= 0 || n % kPiece) {
        fprintf(stderr, "n must be a positive multiple of %d\n", kPiece);
        return 2;
    }
    E *x0, *y0, *g;
    char *flush;
    const size_t flush_bytes = 256u << 20; /* past the H100's and H200's 50 MB L2 */
    CK(cudaMalloc(&x0, n * sizeof(E)));
    CK(cudaMalloc(&y0, n * sizeof(E)));
    CK(cudaMalloc(&g, n * sizeof(E)));
    CK(cudaMalloc(&flush, flush_bytes));
    fill_random<<<1024, 256>>>(x0, n, 1u);
    CK(cudaGetLastError());
    fill_random<<<1024, 256>>>(y0, n, 2u);
    CK(cudaGetLastError());
    const auto blocks = [&](int per_thread) { return (unsigned)((n / per_thread + kThreads - 1) / kThreads); };
    const unsigned g1 = blocks(kPiece), g2 = blocks(kPiece / 2);
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    struct Variant {
        const char *name;
        int2 fit; /* blocks an SM, registers */
        unsigned grid;
        bool gate; /* writes the gate product (checked against the first variant's) */
        void (*run)(const E *, const E *, E *, int64_t, unsigned);
    };
    const Variant vs[] = {
        {"as fwd_prep (33 KB tile reserved)", fit(as_fwd_prep), g1, true,
         [](const E *a, const E *b, E *c, int64_t m, unsigned gr) { as_fwd_prep<<<gr, kThreads>>>(a, b, c, m, 0); }},
        {"gate_product", fit(gate_product<E>), g1, true,
         [](const E *a, const E *b, E *c, int64_t m, unsigned gr) { gate_product<E><<<gr, kThreads>>>(a, b, c, m); }},
        {"launch_bounds(256, 8)", fit(gate_8), g1, true,
         [](const E *a, const E *b, E *c, int64_t m, unsigned gr) { gate_8<<<gr, kThreads>>>(a, b, c, m); }},
        {"half a piece a thread", fit(gate_half), g2, true,
         [](const E *a, const E *b, E *c, int64_t m, unsigned gr) { gate_half<<<gr, kThreads>>>(a, b, c, m); }},
        {"no gate: x_0 + y_0", fit(sum_only), g1, false,
         [](const E *a, const E *b, E *c, int64_t m, unsigned gr) { sum_only<<<gr, kThreads>>>(a, b, c, m); }},
    };
    printf("n %lld, %d SMs\n", (long long)n, sms);
    std::vector<E> want(n), got(n);
    int status = 0;
    for (int v = 0; v < (int)(sizeof vs / sizeof vs[0]); ++v) {
        CK(cudaMemset(g, 0, n * sizeof(E)));
        const float ms = best_ms([&] { vs[v].run(x0, y0, g, n, vs[v].grid); },
                                 [&] { CK(cudaMemsetAsync(flush, v, flush_bytes)); });
        CK(cudaDeviceSynchronize());
        bool same = true;
        if (vs[v].gate) {
            CK(cudaMemcpy(v == 0 ? want.data() : got.data(), g, n * sizeof(E), cudaMemcpyDeviceToHost));
            same = v == 0 || memcmp(want.data(), got.data(), n * sizeof(E)) == 0;
            status |= same ? 0 : 1;
        }
        const double us = ms * 1e3, gbs = 3.0 * n * sizeof(E) / (us * 1e-6) / 1e9;
        printf("%d  %-36s %d/SM (%2d regs)  grid %6u (%.2f waves)  %7.2f us  %7.1f GB/s%s\n", v, vs[v].name,
               vs[v].fit.x, vs[v].fit.y, vs[v].grid, (double)vs[v].grid / ((double)vs[v].fit.x * sms), us, gbs,
               same ? "" : "  g DIFFERS from variant 0");
    }
    CK(cudaFree(x0));
    CK(cudaFree(y0));
    CK(cudaFree(g));
    CK(cudaFree(flush));
    return status;
}
