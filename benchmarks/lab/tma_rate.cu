/* tma_rate.cu — how fast the copy engine fills shared memory with the Hopper forward's tiles,
 * with nothing computed, by the width of the rows it copies (NOTES_FCGP.md, session 19).
 *
 * The forward kernel (fcgp_wgmma.cuh) brings, each step, x and y (D components x 64 rows) and
 * every path's W^T (P x 64 columns) as boxes whose rows are one step of K: 32 bytes. Here one
 * block an SM streams exactly that traffic (Cl(3,0) fp32, B 4096, N_in = N_out = 512: 512 tiles
 * of 64 steps of 72 KB, tiles in the kernel's order, column blocks fastest) through a ring of
 * three stages, waiting for nothing but the copies, and the same bytes again
 *   - as boxes with 64- or 128-byte rows (fewer, longer rows of the same arrays), and
 *   - as contiguous 1-D bulk copies from arrays laid out in stage order (x, y a row block, W^T
 *     a column block: what a prepared layout would give), and
 *   - x, y as the library's boxes with W^T alone in stage order (the library since session 19).
 * Build and run: benchmarks/lab/run_wgmma_rate.sh (sm_90a), beside wgmma_rate.cu.
 */
#include <cstdio>
#include <cstdlib>

#include "../../csrc/cuda/tma.cuh"
#include "lab_check.h"

using namespace fc;

constexpr int D = 8, P = 20, B = 4096, NI = 512, NO = 512, BM = 64, NT = 64, KS = 8;
constexpr int XB = D * BM * 32, WB = P * NT * 32, STAGE = 2 * XB + WB, S = 3;
constexpr int STEPS = NI / KS, TILES = (NO / NT) * (B / BM);

/* ROW: the bytes of K a box row (32, 64, 128), 0 for the 1-D copies, -1 for x, y in boxes of 32-byte
 * rows and W^T in 1-D copies */
template <int ROW>
__global__ void __launch_bounds__(32, 1)
    fill_kernel(const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap ymap,
                const __grid_constant__ CUtensorMap wmap, const unsigned char *xs, const unsigned char *ys,
                const unsigned char *ws, unsigned *sink)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *smem = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = (uint64_t *)(smem + S * STAGE);
    if (threadIdx.x != 0)
        return;
    for (int b = 0; b < S; ++b)
        tma::mbar_init(&full[b], 1);
    tma::fence_mbar_init();
    /* this block's steps: tiles blockIdx.x, + gridDim.x, ...; 64 steps each */
    const int ntiles = (TILES - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x, total = ntiles * STEPS;
    auto issue = [&](int i) {
        const int tile = (int)blockIdx.x + (i / STEPS) * (int)gridDim.x, s = i % STEPS;
        const int cb = tile % (NO / NT), rb = tile / (NO / NT);
        unsigned char *buf = smem + (i % S) * STAGE;
        uint64_t *bar = &full[i % S];
        tma::mbar_arrive_expect_tx(bar, STAGE);
        if constexpr (ROW == -1) { /* x, y as the library's boxes, W^T in stage order */
            tma::load_3d(buf, &xmap, s * KS, rb * BM, 0, bar);
            tma::load_3d(buf + XB, &ymap, s * KS, rb * BM, 0, bar);
            tma::bulk_load(buf + 2 * XB, ws + ((size_t)cb * STEPS + s) * WB, WB / 2, bar);
            tma::bulk_load(buf + 2 * XB + WB / 2, ws + ((size_t)cb * STEPS + s) * WB + WB / 2, WB / 2, bar);
        } else if constexpr (ROW == 0) {
            tma::bulk_load(buf, xs + ((size_t)rb * STEPS + s) * XB, XB, bar);
            tma::bulk_load(buf + XB, ys + ((size_t)rb * STEPS + s) * XB, XB, bar);
            tma::bulk_load(buf + 2 * XB, ws + ((size_t)cb * STEPS + s) * WB, WB / 2, bar);
            tma::bulk_load(buf + 2 * XB + WB / 2, ws + ((size_t)cb * STEPS + s) * WB + WB / 2, WB / 2, bar);
        } else {
            /* the same array region a tile covers over its 64 steps, in boxes of ROW-byte rows */
            constexpr int KE = ROW / 4, RS = BM * 32 / ROW, PER = NI / KE; /* K elements, rows a box */
            const int k0 = (s % PER) * KE, r0 = (s / PER) * RS;
            tma::load_3d(buf, &xmap, k0, rb * BM + r0, 0, bar);
            tma::load_3d(buf + XB, &ymap, k0, rb * BM + r0, 0, bar);
            tma::load_3d(buf + 2 * XB, &wmap, k0, cb * NT + r0, 0, bar);
            tma::load_3d(buf + 2 * XB + WB / 2, &wmap, k0, cb * NT + r0, P / 2, bar);
        }
    };
    unsigned acc = 0;
    for (int i = 0; i < S && i < total; ++i)
        issue(i);
    for (int i = 0; i < total; ++i) {
        tma::mbar_wait(&full[i % S], (i / S) & 1);
        acc += smem[(i % S) * STAGE + (i & 1023)];
        if (i + S < total)
            issue(i + S);
    }
    if (acc == 0xdeadbeef)
        *sink = acc;
}

static CUtensorMap map3(const void *base, uint64_t d0, uint64_t d1, uint64_t d2, uint32_t b0, uint32_t b1, uint32_t b2,
                        CUtensorMapSwizzle sw)
{
    CUtensorMap m;
    const CUresult r = tma::encode_3d(&m, base, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, d0, d1, d2, b0, b1, b2, sw);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled failed (%d)\n", (int)r);
        exit(2);
    }
    return m;
}

template <int ROW> void run(const char *what, float *x, float *y, float *w, unsigned *sink, int sms)
{
    constexpr int KE = ROW > 0 ? ROW / 4 : 8, RS = ROW > 0 ? BM * 32 / ROW : BM;
    /* the library's swizzle for W^T rows of 32 bytes; wider rows take the matching swizzle */
    const CUtensorMapSwizzle wsw = ROW == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                   : ROW == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
                                                : CU_TENSOR_MAP_SWIZZLE_32B;
    const CUtensorMap xm = map3(x, NI, B, D, KE, RS, D, CU_TENSOR_MAP_SWIZZLE_NONE);
    const CUtensorMap ym = map3(y, NI, B, D, KE, RS, D, CU_TENSOR_MAP_SWIZZLE_NONE);
    const CUtensorMap wm = map3(w, NI, NO, P, KE, RS, P / 2, wsw);
    const int smem = S * STAGE + 1024 + 64;
    CK(cudaFuncSetAttribute(fill_kernel<ROW>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    auto launch = [&] {
        fill_kernel<ROW><<<sms, 32, smem>>>(xm, ym, wm, (const unsigned char *)x, (const unsigned char *)y,
                                            (const unsigned char *)w, sink);
    };
    launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    float best = 1e30f;
    for (int r = 0; r < 5; ++r) {
        CK(cudaEventRecord(a));
        launch();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        best = ms < best ? ms : best;
    }
    cudaEventDestroy(a), cudaEventDestroy(b);
    const double bytes = (double)TILES * STEPS * STAGE;
    printf("fill %-44s %7.1f us  %5.2f TB/s into shared memory\n", what, best * 1e3, bytes / best / 1e9);
}

int main()
{
    int dev, sms;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    float *x, *y, *w;
    unsigned *sink;
    const size_t xn = (size_t)D * B * NI, wn = (size_t)P * NO * NI;
    CK(cudaMalloc(&x, xn * 4));
    CK(cudaMalloc(&y, xn * 4));
    CK(cudaMalloc(&w, wn * 4));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMemset(x, 0, xn * 4));
    CK(cudaMemset(y, 0, xn * 4));
    CK(cudaMemset(w, 0, wn * 4));
    printf("Cl(3,0) fp32 forward tiles: %d tiles x %d steps x %d KB, %d blocks, %d stages, no compute\n", TILES, STEPS,
           STAGE / 1024, sms, S);
    run<32>("boxes of 32-byte rows (the library's)", x, y, w, sink, sms);
    run<64>("boxes of 64-byte rows", x, y, w, sink, sms);
    run<128>("boxes of 128-byte rows", x, y, w, sink, sms);
    run<0>("1-D bulk copies, arrays in stage order", x, y, w, sink, sms);
    run<-1>("x, y boxes of 32-byte rows, W^T 1-D bulk copies", x, y, w, sink, sms);
    cudaFree(x), cudaFree(y), cudaFree(w), cudaFree(sink);
    return 0;
}
