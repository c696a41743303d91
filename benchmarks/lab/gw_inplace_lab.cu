/* gw_inplace_lab.cu — the first step of an in-place tf32 weight gradient (NOTES_FCGP.md, the
 * one-gW-launch plan, session 28): gW's A operand (z^T: rows of N_in, K = batch) formed from x's
 * own layout (D, B, N_in) instead of the transposed copy xg^T.
 *
 * wgmma reads gW's B operand (go^T) in its physical K order, where position P = 2g + h of each
 * 16-position block holds batch row g + 8h (got_row). A thread's tf32 A fragment of K slice s
 * needs positions 8s + t and 8s + t + 4 (t = lane % 4) at rows m = 16 w + g and m + 8 of N_in.
 * Read from x's rows in natural order under the 128-byte swizzle, those loads conflict four
 * ways. If shared memory row S holds position P with S % 8 = 2 (P % 4) + (P % 8) / 4, they hit
 * the 32 banks once. That row order is linear in S's bits: batch row R = 2 s0 + 8 s1 + s2 + 4 s3
 * of a 16-row block. So one TMA box can write it: a 5-D map of x's rows (N_in; s0: 2 x 2 rows;
 * s1: 2 x 8 rows; s2: 2 x 1 row; q: D B / 4 x 4 rows, where the block and the component sit in
 * q's coordinate), whose strides alias.
 *
 *   order: every box of a small x, loaded this way and through a plain 3-D box (16 rows x 32
 *          columns), un-swizzled on the host and compared with x, element by element (also
 *          whether the driver accepts the aliasing strides);
 *   cost:  eight warps load A fragments of one K slice over and over from a 2 KB tile, with the
 *          three row orders (today's got_row positions on natural rows, natural positions, the
 *          permuted box), in clock cycles a load. Meant to measure the bank-conflict ways; on the
 *          H100 (session 29) it read 0.35 cycles in all three orders, so the loop is bound by
 *          something else and does not show the conflicts (gw_inplace_banks.py counts them).
 *
 * The in-place gW this served was built, correct and 1.7-2.6x slower (NOTES_FCGP.md session 29):
 * dropped. The order check above still holds.
 *
 * Build and run: benchmarks/lab/run_gw_inplace_lab.sh (sm_90a).
 */
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../csrc/cuda/tma.cuh"
#include "lab_check.h"

using namespace fc;

constexpr int D = 2, B = 64, NI = 64, BLOCKS = B / 16, HALVES = NI / 32, BOXES = D * BLOCKS * HALVES;
constexpr int BOX_FLOATS = 16 * 32; /* 16 rows of 128 bytes */

/* The batch row (within its 16-row block) that shared row S holds in the permuted box. */
__host__ __device__ constexpr int permuted_row(int S) { return 2 * (S & 1) + 8 * ((S >> 1) & 1) + ((S >> 2) & 1) + 4 * ((S >> 3) & 1); }

/* Every box of x into shared memory (the permuted 5-D map when PERM, else a 3-D box of 16 rows),
 * then shared memory as it lies to out (BOXES x BOX_FLOATS). */
template <bool PERM>
__global__ void __launch_bounds__(128) order_kernel(const __grid_constant__ CUtensorMap map, float *out)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    float *smem = (float *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    __shared__ uint64_t bar;
    if (threadIdx.x == 0) {
        tma::mbar_init(&bar, 1);
        tma::fence_mbar_init();
        tma::mbar_arrive_expect_tx(&bar, BOXES * BOX_FLOATS * 4);
        for (int i = 0; i < BOXES; ++i) {
            const int c = i / (BLOCKS * HALVES), blk = i / HALVES % BLOCKS, half = i % HALVES;
            if constexpr (PERM)
                tma::load_5d(smem + i * BOX_FLOATS, &map, 32 * half, 0, 0, 0, (c * B + 16 * blk) / 4, &bar);
            else
                tma::load_3d(smem + i * BOX_FLOATS, &map, 32 * half, 16 * blk, c, &bar);
        }
    }
    __syncthreads();
    tma::mbar_wait(&bar, 0);
    for (int i = threadIdx.x; i < BOXES * BOX_FLOATS; i += blockDim.x)
        out[i] = smem[i];
}

/* Cycles a fragment load: eight warps, each its warp w % 4's A fragments (a[0..3]) of K slice
 * iteration % 2, ITERS times, from one tile of 16 rows x 64 columns (two 128-byte-swizzled
 * halves, 4 KB); ORDER 0: today's got_row positions on natural rows, 1: natural positions, 2:
 * the permuted box. */
template <int ORDER>
__global__ void __launch_bounds__(256) cost_kernel(long long *cycles, unsigned *sink)
{
    constexpr int ITERS = 4096;
    __shared__ __align__(1024) float tile[2][16 * 32];
    for (int i = threadIdx.x; i < 2 * 16 * 32; i += blockDim.x)
        (&tile[0][0])[i] = (float)i;
    __syncthreads();
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32 % 4, g = lane / 4, t = lane % 4;
    auto row_of = [](int P) { /* the shared row holding K position P (0-15) */
        if (ORDER == 0)
            return P / 2 + 8 * (P % 2);
        if (ORDER == 1)
            return P;
        return 2 * (P % 4) + (P % 8) / 4 + 8 * (P / 8);
    };
    uint32_t addr[2][4];
    for (int s = 0; s < 2; ++s)
        for (int f = 0; f < 4; ++f) {
            const int m = 16 * w + g + (f % 2 ? 8 : 0), S = row_of(8 * s + t + (f >= 2 ? 4 : 0)), mm = m % 32;
            addr[s][f] = smem_u32(&tile[m / 32][0]) + S * 128 + (((mm / 4) ^ (S % 8)) * 16) + (mm % 4) * 4;
        }
    unsigned acc = 0;
    __syncthreads();
    const long long t0 = clock64();
#pragma unroll 4
    for (int it = 0; it < ITERS; ++it) {
        const int s = it % 2;
#pragma unroll
        for (int f = 0; f < 4; ++f) {
            uint32_t v;
            asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr[s][f]));
            acc ^= v;
        }
    }
    __syncthreads();
    const long long t1 = clock64();
    if (threadIdx.x == 0)
        *cycles = t1 - t0;
    if (acc == 0x12345678u)
        *sink = acc;
}

static CUresult encode_5d(CUtensorMap *m, const float *x)
{
    const uint64_t row = NI * sizeof(float);
    const uint64_t dims[5] = {NI, 2, 2, 2, (uint64_t)D * B / 4}, strides[4] = {2 * row, 8 * row, row, 4 * row};
    const uint32_t box[5] = {32, 2, 2, 2, 2};
    return tma::encode_nd<5>(m, x, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

/* Shared memory as loaded against x: mismatching elements (smem row S of box i holds batch row
 * 16 blk + R(S), chunk k of it at chunk k ^ (S % 8)). */
static int check(const std::vector<float> &sm, const std::vector<float> &x, bool perm)
{
    int bad = 0;
    for (int i = 0; i < BOXES; ++i) {
        const int c = i / (BLOCKS * HALVES), blk = i / HALVES % BLOCKS, half = i % HALVES;
        for (int S = 0; S < 16; ++S)
            for (int col = 0; col < 32; ++col) {
                const int R = perm ? permuted_row(S) : S;
                const int stored = ((col / 4) ^ (S % 8)) * 4 + col % 4;
                const float want = x[((size_t)c * B + 16 * blk + R) * NI + 32 * half + col];
                const float got = sm[(size_t)i * BOX_FLOATS + S * 32 + stored];
                if (got != want && bad++ < 5)
                    printf("  box %d row %d col %d: %g, want %g\n", i, S, col, got, want);
            }
    }
    return bad;
}

int main()
{
    int status = 0;
    std::vector<float> hx((size_t)D * B * NI);
    for (int c = 0; c < D; ++c)
        for (int b = 0; b < B; ++b)
            for (int n = 0; n < NI; ++n)
                hx[((size_t)c * B + b) * NI + n] = (float)(c * 100000 + b * 100 + n);
    float *x, *out;
    CK(cudaMalloc(&x, hx.size() * 4));
    CK(cudaMalloc(&out, (size_t)BOXES * BOX_FLOATS * 4));
    CK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
    const int smem = BOXES * BOX_FLOATS * 4 + 1024;
    std::vector<float> sm((size_t)BOXES * BOX_FLOATS);

    for (int perm = 0; perm < 2; ++perm) {
        alignas(64) CUtensorMap map;
        const CUresult r = perm ? encode_5d(&map, x)
                                : tma::encode_3d(&map, x, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, NI, B, D, 32, 16, 1,
                                                 CU_TENSOR_MAP_SWIZZLE_128B);
        printf("%s map: encode %s (%d)\n", perm ? "permuted 5-D" : "plain 3-D", r == CUDA_SUCCESS ? "ok" : "FAILED", (int)r);
        if (r != CUDA_SUCCESS) {
            status = 1;
            continue;
        }
        auto k = perm ? order_kernel<true> : order_kernel<false>;
        CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaMemset(out, 0xff, sm.size() * 4));
        k<<<1, 128, smem>>>(map, out);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(sm.data(), out, sm.size() * 4, cudaMemcpyDeviceToHost));
        const int bad = check(sm, hx, perm);
        printf("%s order: %s (%d of %zu elements wrong)\n", perm ? "permuted" : "plain", bad ? "FAILED" : "ok", bad,
               sm.size());
        status |= bad != 0;
    }

    long long *cyc;
    unsigned *sink;
    CK(cudaMalloc(&cyc, sizeof(long long)));
    CK(cudaMalloc(&sink, sizeof(unsigned)));
    const char *names[3] = {"today (got_row positions, natural rows)", "natural positions, natural rows",
                            "permuted box"};
    void (*kernels[3])(long long *, unsigned *) = {cost_kernel<0>, cost_kernel<1>, cost_kernel<2>};
    for (int o = 0; o < 3; ++o) {
        long long best = -1;
        for (int rep = 0; rep < 5; ++rep) {
            kernels[o]<<<1, 256>>>(cyc, sink);
            CK(cudaGetLastError());
            long long c;
            CK(cudaMemcpy(&c, cyc, sizeof c, cudaMemcpyDeviceToHost));
            best = best < 0 || c < best ? c : best;
        }
        /* 8 warps x 4096 iterations x 4 loads through one shared-memory pipe */
        printf("fragment loads, %-42s %6.2f cycles a warp's load\n", names[o], (double)best / (8.0 * 4096 * 4));
    }
    printf("%s\n", status ? "gw_inplace_lab: FAILED" : "gw_inplace_lab: ok");
    return status;
}
