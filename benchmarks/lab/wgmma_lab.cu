/* wgmma_lab.cu — the first Hopper wgmma step of the FCGP forward (issue 4), standalone:
 *
 *  1. gemm check: one warpgroup, A (64 x K) in the register fragments of wgmma.cuh, B from
 *     shared memory in the unswizzled K-major layout under two choices of (lbo, sbo), tf32
 *     and bf16, against a CPU product. Proves the fragment maps and the descriptor.
 *  2. fcgp forward (no GELU, no norms: xg, yg given): o_j = sum_p z_{j,p} @ W[p], z formed
 *     in the A registers from xg_i, yg_k fragments, W[p] tiles from shared memory, against a
 *     float64 CPU reference (every row on a small shape, sampled rows on the timing shape),
 *     then timed against the same T' products in cuBLAS (batched, same precision).
 *
 *   bash benchmarks/lab/run_wgmma_lab.sh      (build, every mode below, SASS, sanitizers; NCU=1: ncu)
 *   nvcc -std=c++17 -O3 -I csrc -gencode=arch=compute_90a,code=sm_90a \
 *        benchmarks/lab/wgmma_lab.cu -o wgmma_lab [-DWITH_CUBLAS -lcublas]
 *   ./wgmma_lab             checks and timing      ./wgmma_lab --check    checks only (sanitizers)
 *   ./wgmma_lab --profile   timing with and without the tile copies (and one launch each for ncu)
 *   ./wgmma_lab --tma       the TMA / cluster-multicast kernels only
 *   ./wgmma_lab --tma-profile  one launch of each Cl(3,0) tf32 TMA shape (for ncu), then timings
 *
 * The kernel pieces and the TMA kernel live in csrc/cuda/fcgp_wgmma.cuh (namespace
 * fc::fcgp::sm90); this file keeps the cp.async-ring kernel of step 1, the checks and timing.
 *
 * Kernel (fwd): a block owns 64 rows x NT = 512 / D output columns of all D components and
 * has two warpgroups; warpgroup w owns components [w D/2, (w+1) D/2), so its accumulators are
 * D/2 x NT/2 = 128 fp32 registers a thread. K (N_in) streams in steps of 32 bytes a row
 * (8 tf32, 16 bf16) through a 3-stage cp.async ring: x and y tiles (D x 64 rows) and every
 * path's W tile (P x NT). Each thread loads its x, y fragments once a step (one 8-byte load
 * per component and row: the K order inside a step is permuted so a thread's two A columns
 * are adjacent in memory; W^T is stored in the same permuted order), forms z_{j,p} for one
 * component's pairs, fences and issues that component's wgmmas.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <cuda_bf16.h>


#include "../../csrc/cuda/fcgp_wgmma.cuh"
#include "lab_check.h"

#ifdef WITH_CUBLAS
#include <cublas_v2.h>
#endif


using namespace fc;
using namespace fc::fcgp;
using namespace fc::fcgp::sm90; /* the forward kernels and their pieces (csrc/cuda/fcgp_wgmma.cuh) */


/* ------------------------------------------------------------------ 1. gemm check */
/* C (64 x 64) = A (64 x K) B (K x 64), one step; A row-major, B given as B^T (64 x K). */
template <int MODE>
__global__ void gemm_check_kernel(const Elem<MODE> *a, const Elem<MODE> *bt, float *c, int lbo, int sbo)
{
    constexpr int K = MODE == kTF32 ? 8 : 16, T = 16 / sizeof(Elem<MODE>);
    __shared__ __align__(128) unsigned char sb[8192];
    const int tid = threadIdx.x, warp = tid / 32, g = (tid % 32) / 4, t = tid % 4;
    for (int c16 = tid; c16 < 64 * K / T; c16 += 128) { /* 16-byte chunk (n, kb) */
        const int n = c16 / (K / T), kb = c16 % (K / T);
        memcpy(sb + (n / 8) * sbo + kb * lbo + (n % 8) * 16, bt + n * K + kb * T, 16);
    }
    wg::fence_proxy_async();
    __syncthreads();
    uint32_t fr[4];
    const int r0 = 16 * warp + g;
    if constexpr (MODE == kTF32) {
        const float *A = (const float *)a;
        const float v[4] = {A[r0 * K + t], A[(r0 + 8) * K + t], A[r0 * K + t + 4], A[(r0 + 8) * K + t + 4]};
        for (int i = 0; i < 4; ++i)
            fr[i] = to_tf32(v[i]);
    } else {
        const uint32_t *A = (const uint32_t *)a; /* bf16 pairs */
        fr[0] = A[(r0 * K + 2 * t) / 2];
        fr[1] = A[((r0 + 8) * K + 2 * t) / 2];
        fr[2] = A[(r0 * K + 2 * t + 8) / 2];
        fr[3] = A[((r0 + 8) * K + 2 * t + 8) / 2];
    }
    float d[32];
    for (int i = 0; i < 32; ++i)
        d[i] = 0.f;
    wg::fence();
    wg::MmaRS<MODE, 64>::run(d, fr, wg::desc_kmajor(smem_u32(sb), lbo, sbo), 1);
    wg::commit();
    wg::wait<0>();
    wg::fence_operands(d);
    for (int cc = 0; cc < 8; ++cc)
        for (int h = 0; h < 2; ++h) {
            c[(r0 + 8 * h) * 64 + 8 * cc + 2 * t] = d[4 * cc + 2 * h];
            c[(r0 + 8 * h) * 64 + 8 * cc + 2 * t + 1] = d[4 * cc + 2 * h + 1];
        }
}

static float bf16_round(float v) { return __bfloat162float(__float2bfloat16(v)); }

template <int MODE> static bool gemm_check(int lbo, int sbo)
{
    constexpr int K = MODE == kTF32 ? 8 : 16;
    std::mt19937 rng(7 + lbo);
    std::uniform_int_distribution<int> small(-8, 8);
    std::vector<float> A(64 * K), Bt(64 * K), C(64 * 64);
    for (auto &v : A)
        v = small(rng) / 4.0f; /* exact in tf32 and bf16 */
    for (auto &v : Bt)
        v = small(rng) / 4.0f;
    std::vector<Elem<MODE>> a(A.size()), bt(Bt.size());
    for (size_t i = 0; i < A.size(); ++i)
        a[i] = (Elem<MODE>)A[i], bt[i] = (Elem<MODE>)Bt[i];
    Elem<MODE> *da, *db;
    float *dc;
    CK(cudaMalloc(&da, a.size() * sizeof a[0]));
    CK(cudaMalloc(&db, bt.size() * sizeof bt[0]));
    CK(cudaMalloc(&dc, C.size() * 4));
    CK(cudaMemcpy(da, a.data(), a.size() * sizeof a[0], cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, bt.data(), bt.size() * sizeof bt[0], cudaMemcpyHostToDevice));
    CK(cudaMemset(dc, 0xff, C.size() * 4));
    gemm_check_kernel<MODE><<<1, 128>>>(da, db, dc, lbo, sbo);
    CK(cudaGetLastError());
    CK(cudaMemcpy(C.data(), dc, C.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int m = 0; m < 64; ++m)
        for (int n = 0; n < 64; ++n) {
            double ref = 0;
            for (int k = 0; k < K; ++k)
                ref += (double)A[m * K + k] * Bt[n * K + k];
            if (C[m * 64 + n] != (float)ref && bad++ < 4)
                printf("    C[%d][%d] = %g, expected %g\n", m, n, C[m * 64 + n], ref);
        }
    printf("gemm check %-4s lbo %4d sbo %4d: %s (%d of 4096 wrong)\n", MODE == kTF32 ? "tf32" : "bf16", lbo, sbo,
           bad ? "FAIL" : "ok", bad);
    cudaFree(da), cudaFree(db), cudaFree(dc);
    return bad == 0;
}


/* Copy step s (K columns [s KS, (s+1) KS)) of x, y and every path's W^T into stage buffer
 * `buf`. A thread copies fixed (row, half) positions of several components and paths, so its
 * addresses are a few bases plus multiples of B Ni and No Ni. Those bases pass through an
 * empty asm each call: otherwise the compiler hoists every chunk's 64-bit address out of the
 * K loop (tens of registers beside 128 accumulators, and the kernel spills). */
template <int ID, int MODE, int NTV>
__device__ __forceinline__ void load_step(unsigned char *buf, const Elem<MODE> *xg, const Elem<MODE> *yg,
                                          const Elem<MODE> *wt, int B, int Ni, int No, int m0, int n0, int s)
{
    using C = Cfg<ID, MODE, NTV>;
    using E = Elem<MODE>;
    constexpr int T = 16 / sizeof(E), D = C::D, P = C::P;
    constexpr int QSTEP = C::THREADS / 2 / C::BM, PSTEP = C::THREADS / 2 / C::NT;
    static_assert(QSTEP >= 1 && D % QSTEP == 0 && PSTEP >= 1, "whole components and paths a pass");
    int tid = threadIdx.x;
    size_t bni = (size_t)B * Ni, noni = (size_t)No * Ni;
    asm volatile("" : "+r"(tid), "+l"(bni), "+l"(noni));
    const int h = tid & 1, k0 = s * C::KS;
    { /* x and y: component qb + QSTEP r of x (first D) then y, row `row` */
        const int row = (tid >> 1) % C::BM, qb = (tid >> 1) / C::BM;
        const size_t off = ((size_t)qb * B + m0 + row) * Ni + k0 + h * T;
        unsigned char *d = buf + (qb * C::BM + row) * 32 + h * 16;
#pragma unroll
        for (int r = 0; r < 2 * D / QSTEP; ++r) {
            const int q = QSTEP * r, which = q / D, comp = q % D;
            copy16((E *)(d + which * C::XB + comp * C::BM * 32), (which ? yg : xg) + off + comp * bni, 16);
        }
    }
    { /* W^T: path pb + PSTEP r, output column n */
        const int n = (tid >> 1) % C::NT, pb = (tid >> 1) / C::NT;
        const E *src = wt + ((size_t)pb * No + n0 + n) * Ni + k0 + h * T;
        unsigned char *d = buf + 2 * C::XB + pb * C::NT * 32 + (n / 8) * C::SBO + h * C::LBO + (n % 8) * 16;
#pragma unroll
        for (int r = 0; r < (P + PSTEP - 1) / PSTEP; ++r)
            if (P % PSTEP == 0 || pb + PSTEP * r < P)
                copy16((E *)(d + PSTEP * r * C::NT * 32), src + PSTEP * r * noni, 16);
    }
}


/* xg, yg (D, B, Ni); wt (P, No, Ni) = W^T with K permuted inside each step; out (D, B, No)
 * fp32. B % 64 == 0, No % NT == 0, Ni % KS == 0 (the lab's shapes). Steps from `loads` on
 * copy nothing and reuse stale stages: a timing floor without the tile traffic (--profile). */
template <int ID, int MODE, int NTV>
__global__ void __launch_bounds__(256, 1)
    fwd_kernel(const Elem<MODE> *xg, const Elem<MODE> *yg, const Elem<MODE> *wt, float *out, int B, int Ni, int No,
               int loads)
{
    using C = Cfg<ID, MODE, NTV>;
    using WRing = WLayout<C::NT * 32, C::LBO, C::SBO>;
    constexpr int D = C::D;
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, g = (tid % 32) / 4, t = tid % 4;
    const int n0 = blockIdx.x * C::NT, m0 = blockIdx.y * C::BM, steps = Ni / C::KS;

    float acc[C::JW][C::NT / 2];
    zero_all(acc);

    load_step<ID, MODE, NTV>(smem, xg, yg, wt, B, Ni, No, m0, n0, 0);
    cp_commit();
    if (steps > 1)
        load_step<ID, MODE, NTV>(smem + C::STAGE, xg, yg, wt, B, Ni, No, m0, n0, 1);
    cp_commit();
    for (int s = 0; s < steps; ++s) {
        asm volatile("cp.async.wait_group 1;\n" ::: "memory"); /* step s has landed */
        wg::fence_proxy_async();
        __syncthreads(); /* ... for every thread; and step s - 1's buffer is free */
        if (s + 2 < steps && s + 2 < loads)
            load_step<ID, MODE, NTV>(smem + ((s + 2) % C::STAGES) * C::STAGE, xg, yg, wt, B, Ni, No, m0, n0, s + 2);
        cp_commit();
        const unsigned char *buf = smem + (s % C::STAGES) * C::STAGE;
        Frags<D> f;
        load_frags<D, C::BM>(f, buf, buf + C::XB, 16 * warp + g, t);
        const uint32_t w_smem = smem_u32(buf + 2 * C::XB);
        if (wgi == 0)
            wg_step<ID, MODE, NTV, 0, WRing>(acc, f, w_smem);
        else
            wg_step<ID, MODE, NTV, 1, WRing>(acc, f, w_smem);
    }
    store_out<float, C::JW, C::NT>(acc, out, B, No, wgi * C::JW, m0 + 16 * warp + g, n0, t);
}

/* ------------------------------------------------------------------ host side */
struct Problem {
    int B, Ni, No;
    std::vector<float> x, y, w; /* (D,B,Ni), (D,B,Ni), (P,Ni,No); bf16-representable */
};

template <int ID> static Problem make_problem(int B, int Ni, int No, unsigned seed)
{
    constexpr int D = AlgebraTraits<ID>::D, P = AlgebraTraits<ID>::P;
    Problem pr{B, Ni, No, {}, {}, {}};
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    pr.x.resize((size_t)D * B * Ni), pr.y.resize(pr.x.size()), pr.w.resize((size_t)P * Ni * No);
    for (auto &v : pr.x)
        v = bf16_round(nd(rng));
    for (auto &v : pr.y)
        v = bf16_round(nd(rng));
    const float ws = 1.f / sqrtf((float)Ni);
    for (auto &v : pr.w)
        v = bf16_round(nd(rng) * ws);
    return pr;
}

/* The problem with MVGELU applied to x and y (float64 math, stored in float): the reference
 * inputs of a kernel that gates as it loads. */
template <int ID> static Problem gated(const Problem &pr)
{
    constexpr int D = AlgebraTraits<ID>::D;
    Problem g = pr;
    const size_t plane = (size_t)pr.B * pr.Ni;
    for (std::vector<float> *v : {&g.x, &g.y})
        for (size_t e = 0; e < plane; ++e) {
            const double phi = 0.5 * (1.0 + erf((*v)[e] / sqrt(2.0))); /* from the raw component 0 */
            for (int c = 0; c < D; ++c)
                (*v)[c * plane + e] = (float)((*v)[c * plane + e] * phi);
        }
    return g;
}

static std::vector<int> all_rows(int B)
{
    std::vector<int> rows(B);
    for (int b = 0; b < B; ++b)
        rows[b] = b;
    return rows;
}

/* float64 reference of output row b (all components, all columns) into ref[D][No]. */
template <int ID> static void reference_row(const Problem &pr, int b, std::vector<double> &ref)
{
    constexpr int D = AlgebraTraits<ID>::D;
    constexpr auto &pl = Plans<ID>::pair;
    const int B = pr.B, Ni = pr.Ni, No = pr.No;
    ref.assign((size_t)D * No, 0.0);
    std::vector<double> z(Ni);
    for (int q = 0; q < pl.np; ++q) {
        const int j = pl.pj[q], p = pl.pp[q];
        for (int k = 0; k < Ni; ++k) {
            double s = 0;
            for (int u = pl.tbegin[q]; u < pl.tbegin[q + 1]; ++u) {
                const int code = pl.code[u], i = code & 15, kk = (code >> 4) & 15;
                s += ((code >> 8) ? -1.0 : 1.0) * pr.x[((size_t)i * B + b) * Ni + k] * pr.y[((size_t)kk * B + b) * Ni + k];
            }
            z[k] = s;
        }
        for (int k = 0; k < Ni; ++k)
            for (int n = 0; n < No; ++n)
                ref[(size_t)j * No + n] += z[k] * pr.w[((size_t)p * Ni + k) * No + n];
    }
}

/* Mean time of `reps` back-to-back calls after 3 warm-up calls, by CUDA events. */
template <class L> static double event_ms(int reps, L &&call)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; ++i)
        call();
    CK(cudaEventRecord(a));
    for (int i = 0; i < reps; ++i)
        call();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a), cudaEventDestroy(b);
    return ms / reps;
}

/* A 3-D tensor map (tma.cuh encode_3d); the lab stops on failure. */
static CUtensorMap make_map_3d(void *base, CUtensorMapDataType ty, size_t es, uint64_t d0, uint64_t d1, uint64_t d2,
                               uint32_t b0, uint32_t b1, uint32_t b2,
                               CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE)
{
    CUtensorMap m;
    const CUresult r = tma::encode_3d(&m, base, ty, es, d0, d1, d2, b0, b1, b2, swizzle);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled: error %d%s\n", (int)r,
                tma::tensor_map_encoder() ? "" : " (the driver has none)");
        exit(2);
    }
    return m;
}

template <int ID, int MODE, int NTV> struct Run {
    using C = Cfg<ID, MODE, NTV>;
    using E = Elem<MODE>;
    E *x = nullptr, *y = nullptr, *wt = nullptr, *wst = nullptr, *g = nullptr;
    float *out = nullptr;
    const Problem &pr;
    CUtensorMap xm, ym, wm, gm; /* the TMA kernel's views of x, y, W^T and the gate product */

    explicit Run(const Problem &p) : pr(p)
    {
        constexpr int P = C::P;
        const int B = pr.B, Ni = pr.Ni, No = pr.No, Nip = nip();
        /* W^T (P, No, Nip): K permuted inside each step, padded with zeros to whole steps */
        std::vector<E> hx(pr.x.size()), hy(pr.y.size()), hw((size_t)P * No * Nip, (E)0.f);
        for (size_t i = 0; i < hx.size(); ++i)
            hx[i] = (E)pr.x[i], hy[i] = (E)pr.y[i];
        for (int p = 0; p < P; ++p)
            for (int n = 0; n < No; ++n)
                for (int k0 = 0; k0 < Ni; k0 += C::KS)
                    for (int L = 0; L < C::KS; ++L)
                        if (k0 + phys_col(MODE, L) < Ni)
                            hw[((size_t)p * No + n) * Nip + k0 + L] =
                                (E)pr.w[((size_t)p * Ni + k0 + phys_col(MODE, L)) * No + n];
        /* the TMA kernel's W^T: the same values in stage order (wst_offset), column blocks whole */
        const int cbs = (No + C::NT - 1) / C::NT, steps = Nip / C::KS;
        std::vector<E> hs((size_t)P * cbs * C::NT * Nip, (E)0.f);
        for (int p = 0; p < P; ++p)
            for (int n = 0; n < No; ++n)
                for (int k = 0; k < Nip; ++k)
                    hs[wst_offset<MODE>(P, C::NT, steps, n / C::NT, k / C::KS, p, n % C::NT, k % C::KS)] =
                        hw[((size_t)p * No + n) * Nip + k];
        CK(cudaMalloc(&wst, hs.size() * sizeof(E)));
        CK(cudaMemcpy(wst, hs.data(), hs.size() * sizeof(E), cudaMemcpyHostToDevice));
        CK(cudaMalloc(&x, hx.size() * sizeof(E)));
        CK(cudaMalloc(&y, hy.size() * sizeof(E)));
        CK(cudaMalloc(&wt, hw.size() * sizeof(E)));
        CK(cudaMalloc(&out, (size_t)C::D * B * No * 4));
        CK(cudaMemcpy(x, hx.data(), hx.size() * sizeof(E), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(y, hy.data(), hy.size() * sizeof(E), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(wt, hw.data(), hw.size() * sizeof(E), cudaMemcpyHostToDevice));
        CK(cudaMemset(out, 0xff, (size_t)C::D * B * No * 4)); /* NaN: unwritten outputs show */
        CK(cudaFuncSetAttribute(fwd_kernel<ID, MODE, NTV>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM));
        constexpr CUtensorMapDataType ty = MODE == kTF32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
        xm = make_map_3d(x, ty, sizeof(E), Ni, B, C::D, C::KS, C::BM, C::D);
        ym = make_map_3d(y, ty, sizeof(E), Ni, B, C::D, C::KS, C::BM, C::D);
        /* a step's 32 bytes of K a box row, in the swizzle wgmma reads (desc_kmajor_swz<32>);
         * half the paths a box, so a 2-row cluster multicasts one half each (the kernel reads
         * it when given no W^T in stage order) */
        wm = make_map_3d(wt, ty, sizeof(E), Nip, No, C::P, C::KS, C::NT, C::P / 2, CU_TENSOR_MAP_SWIZZLE_32B);
        /* the gate product Phi(x_0) Phi(y_0) the GATE kernels scale x by (fcgp_wgmma.cuh) */
        CK(cudaMalloc(&g, (size_t)B * Ni * sizeof(E)));
        gate_product<E><<<(B * Ni + 255) / 256, 256>>>(x, y, g, (int64_t)B * Ni);
        CK(cudaGetLastError());
        gm = make_map_3d(g, ty, sizeof(E), Ni, B, 1, C::KS, C::BM, 1);
    }
    ~Run() { cudaFree(x), cudaFree(y), cudaFree(wt), cudaFree(wst), cudaFree(g), cudaFree(out); }
    int nip() const { return (pr.Ni + C::KS - 1) / C::KS * C::KS; }

    /* the TMA kernel in a CN x CM cluster (1 x 1: no cluster) */
    /* its launch configuration; attr: storage for the cluster-shape attribute cfg points to */
    template <int CN, int CM, bool GATE = false, bool NORM = false, bool MC = true>
    cudaLaunchConfig_t tma_config(cudaLaunchAttribute *attr)
    {
        (void)NORM; /* the partials are the epilogue's run-time choice (FwdEpi) */
        auto kern = fwd_tma_kernel<ID, MODE, CN, CM, GATE, float, MC>;
        constexpr int smem = tma_smem_bytes<ID, MODE, GATE>();
        static const bool opted_in = [&] { /* once a kernel */
            CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            return true;
        }();
        (void)opted_in;
        cudaLaunchConfig_t cfg = {};
        /* tiles past the tensor (tails, and the grid rounded up to whole clusters) load zeros
         * and store nothing */
        const int gx = (pr.No + C::NT - 1) / C::NT, gy = (pr.B + C::BM - 1) / C::BM;
        cfg.gridDim = dim3((gx + CN - 1) / CN * CN, (gy + CM - 1) / CM * CM);
        cfg.blockDim = dim3(kSplitThreads); /* with the producer warpgroup */
        cfg.dynamicSmemBytes = smem;
        attr->id = cudaLaunchAttributeClusterDimension;
        attr->val.clusterDim.x = CN;
        attr->val.clusterDim.y = CM;
        attr->val.clusterDim.z = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        return cfg;
    }
    /* how many CN x CM clusters of this kernel the GPU holds at once */
    template <int CN, int CM> int max_clusters()
    {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = tma_config<CN, CM>(&attr);
        int n = 0;
        CK(cudaOccupancyMaxActiveClusters(&n, fwd_tma_kernel<ID, MODE, CN, CM, false>, &cfg));
        return n;
    }
    template <int CN, int CM, bool GATE = false, bool NORM = false, bool MC = true>
    void launch_tma(float *partial = nullptr, float *norms = nullptr)
    {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = tma_config<CN, CM, GATE, NORM, MC>(&attr);
        /* kEpiO writes o by store_out (tma_out 0): x's map stands in for the output's, unread */
        const FwdEpi<float> ep{out, NORM ? partial : nullptr, out, nullptr, nullptr, nullptr, 0, kEpiO, 0};
        CK(cudaLaunchKernelEx(&cfg, fwd_tma_kernel<ID, MODE, CN, CM, GATE, float, MC>, xm, ym, wm, wst, gm, xm, ep,
                              pr.B, pr.Ni, pr.No));
        if constexpr (NORM)
            norm_finalize<ID><<<pr.B, 256>>>(out, norms, partial, pr.B, pr.No, (pr.No + C::NT - 1) / C::NT);
    }
    int loads = 1 << 30;
    void launch(cudaStream_t st = 0)
    {
        dim3 grid(pr.No / C::NT, pr.B / C::BM);
        fwd_kernel<ID, MODE, NTV><<<grid, C::THREADS, C::SMEM, st>>>(x, y, wt, out, pr.B, pr.Ni, pr.No, loads);
    }
    /* relative Frobenius error over the rows checked, against the reference of `ref_inputs`
     * (default: the inputs themselves; the gated inputs when the kernel applies MVGELU) */
    double check(const std::vector<int> &rows, const Problem *ref_inputs = nullptr)
    {
        const int B = pr.B, No = pr.No;
        std::vector<float> h((size_t)C::D * B * No);
        CK(cudaMemcpy(h.data(), out, h.size() * 4, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        int shown = 0;
        std::vector<double> ref;
        for (int b : rows) {
            reference_row<ID>(ref_inputs ? *ref_inputs : pr, b, ref);
            for (int j = 0; j < C::D; ++j)
                for (int n = 0; n < No; ++n) {
                    const double r = ref[(size_t)j * No + n], v = h[((size_t)j * B + b) * No + n];
                    const double e = v - r;
                    num += e * e, den += r * r;
                    if (!(fabs(e) <= 0.05 * (fabs(r) + 1)) && shown++ < 4)
                        printf("    out[%d][%d][%d] = %g, expected %g\n", j, b, n, v, r);
                }
        }
        return sqrt(num / (den > 0 ? den : 1));
    }
    double time_ms(int reps)
    {
        return event_ms(reps, [&] { launch(); });
    }
};

#ifdef WITH_CUBLAS
/* The yardstick: T' products (B x Ni) @ (Ni x No) in the same precision, one batched call. */
static double cublas_ms(int mode, int T, int B, int Ni, int No, int reps)
{
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
        return -1;
    const size_t es = mode == kTF32 ? 4 : 2;
    void *a, *b, *c;
    CK(cudaMalloc(&a, (size_t)T * B * Ni * es));
    CK(cudaMalloc(&b, (size_t)T * Ni * No * es));
    CK(cudaMalloc(&c, (size_t)T * B * No * 4));
    CK(cudaMemset(a, 0, (size_t)T * B * Ni * es));
    CK(cudaMemset(b, 0, (size_t)T * Ni * No * es));
    const float one = 1.f, zero = 0.f;
    const cudaDataType ty = mode == kTF32 ? CUDA_R_32F : CUDA_R_16BF;
    const cublasComputeType_t ct = mode == kTF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    auto call = [&] { /* column-major: C^T (No x B) = W^T (No x Ni) * Z^T (Ni x B) */
        return cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, No, B, Ni, &one, b, ty, No, (long long)Ni * No, a,
                                          ty, Ni, (long long)B * Ni, &zero, c, CUDA_R_32F, No, (long long)B * No, T, ct,
                                          CUBLAS_GEMM_DEFAULT);
    };
    const double ms = call() == CUBLAS_STATUS_SUCCESS ? event_ms(reps, call) : -1;
    cudaFree(a), cudaFree(b), cudaFree(c), cublasDestroy(h);
    return ms;
}
#endif

template <int ID, int MODE, int NTV = 0> static bool fcgp_case(const char *name, bool timing)
{
    using C = Cfg<ID, MODE, NTV>;
    const char *mname = MODE == kTF32 ? "tf32" : "bf16";
    const double tol = MODE == kTF32 ? 2e-3 : 2e-2;
    bool ok = true;
    { /* every row of a small shape: two column blocks, several K steps */
        Problem pr = make_problem<ID>(128, 4 * C::KS, 2 * C::NT, 11);
        Run<ID, MODE, NTV> r(pr);
        r.launch();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        const std::vector<int> rows = all_rows(pr.B);
        const double e = r.check(rows);
        ok = e < tol;
        printf("fcgp fwd %s %s NT %d B %d Ni %d No %d: rel err %.2e (tol %.0e) %s\n", name, mname, C::NT, pr.B, pr.Ni, pr.No, e, tol,
               ok ? "ok" : "FAIL");
    }
    if (!timing)
        return ok;
    const int B = 4096, Ni = 512, No = 512, T = Plans<ID>::pair.np;
    Problem pr = make_problem<ID>(B, Ni, No, 12);
    Run<ID, MODE, NTV> r(pr);
    r.launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    const double e = r.check({0, 1, 63, 64, 1000, 2047, 3001, 4095});
    const bool ok2 = e < tol;
    const double ms = r.time_ms(20), tf = 2.0 * T * B * Ni * No / (ms * 1e-3) / 1e12;
    printf("fcgp fwd %s %s NT %d B %d Ni %d No %d: rel err %.2e (8 rows) %s; %.3f ms, %.0f TF/s", name, mname, C::NT, B, Ni, No, e,
           ok2 ? "ok" : "FAIL", ms, tf);
#ifdef WITH_CUBLAS
    const double bm = cublas_ms(MODE, T, B, Ni, No, 20);
    if (bm > 0)
        printf("; cuBLAS batched %d products %.3f ms (%.0f TF/s): ratio %.2fx", T, bm,
               2.0 * T * B * Ni * No / (bm * 1e-3) / 1e12, ms / bm);
#endif
    printf("\n");
    return ok && ok2;
}

/* The TMA kernel in a CN x CM cluster: every row of a small shape, then the timing shape
 * beside the cp.async kernel of the same run. */
template <int ID, int MODE, int CN, int CM> static bool tma_case(const char *name, bool timing)
{
    using C = Cfg<ID, MODE, 0>;
    const char *mname = MODE == kTF32 ? "tf32" : "bf16";
    const double tol = MODE == kTF32 ? 2e-3 : 2e-2;
    Problem small = make_problem<ID>(256, 8 * C::KS, 2 * C::NT, 21); /* 8 steps: every buffer refilled */
    Run<ID, MODE, 0> r(small);
    r.template launch_tma<CN, CM>();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    const std::vector<int> rows = all_rows(small.B);
    const double e = r.check(rows);
    bool ok = e < tol;
    if (!timing) {
        printf("tma fwd %s %s cluster %dx%d B %d Ni %d No %d: rel err %.2e %s\n", name, mname, CN, CM, small.B, small.Ni,
               small.No, e, ok ? "ok" : "FAIL");
        return ok;
    }
    const int B = 4096, Ni = 512, No = 512, T = Plans<ID>::pair.np;
    Problem pr = make_problem<ID>(B, Ni, No, 12);
    Run<ID, MODE, 0> big(pr);
    big.template launch_tma<CN, CM>();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    const double e2 = big.check({0, 1, 63, 64, 1000, 2047, 3001, 4095});
    ok = ok && e2 < tol;
    const double ms = event_ms(20, [&] { big.template launch_tma<CN, CM>(); }), ring = big.time_ms(20);
    printf("tma fwd %s %s cluster %dx%d: rel err %.2e small, %.2e large %s; %.3f ms (%.0f TF/s), cp.async ring %.3f ms; "
           "%d clusters resident\n",
           name, mname, CN, CM, e, e2, ok ? "ok" : "FAIL", ms, 2.0 * T * B * Ni * No / (ms * 1e-3) / 1e12, ring,
           big.template max_clusters<CN, CM>());
    return ok;
}

/* MVGELU applied in the TMA kernel's fragment loads, without and with a 2 x 2 cluster:
 * every row of a small shape against the reference on gated inputs. */
template <int ID, int MODE> static bool gate_case(const char *name)
{
    using C = Cfg<ID, MODE, 0>;
    const double tol = MODE == kTF32 ? 2e-3 : 2e-2;
    Problem small = make_problem<ID>(256, 8 * C::KS, 2 * C::NT, 31);
    const Problem ref = gated<ID>(small);
    const std::vector<int> rows = all_rows(small.B);
    Run<ID, MODE, 0> r(small);
    bool ok = true;
    for (int v = 0; v < 2; ++v) {
        CK(cudaMemset(r.out, 0xff, (size_t)C::D * small.B * small.No * 4));
        if (v == 0)
            r.template launch_tma<1, 1, true>();
        else
            r.template launch_tma<2, 2, true>();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        const double e = r.check(rows, &ref);
        ok = ok && e < tol;
        printf("tma fwd with MVGELU %s %s cluster %s: rel err %.2e (tol %.0e) %s\n", name,
               MODE == kTF32 ? "tf32" : "bf16", v ? "2x2" : "1x1", e, tol, e < tol ? "ok" : "FAIL");
    }
    return ok;
}

/* The whole forward (MVGELU, product, grade RMSNorm) with the TMA kernel, 1 x 1 and 2 x 2:
 * out and norms of every row of a shape with tails in every dimension (B not a multiple of
 * 64, N_in of the step, N_out of the tile; N_in != N_out) against the float64 reference. */
template <int ID, int MODE> static bool norm_case(const char *name)
{
    using C = Cfg<ID, MODE, 0>;
    constexpr int D = C::D, G = AlgebraTraits<ID>::G;
    constexpr auto &tb = AlgebraTraits<ID>::table;
    const double tol = MODE == kTF32 ? 2e-3 : 2e-2;
    /* the copy engine needs 16-byte row strides: N_in a multiple of 4 (tf32) or 8 (bf16) */
    Problem small = make_problem<ID>(200, 8 * C::KS - 16 / (int)sizeof(Elem<MODE>), 2 * C::NT - 24, 41);
    const Problem ref = gated<ID>(small);
    const int B = small.B, No = small.No;
    std::vector<double> o_ref((size_t)D * B * No), n_ref((size_t)B * G), row;
    for (int b = 0; b < B; ++b) {
        reference_row<ID>(ref, b, row);
        for (int g = 0; g < G; ++g) {
            double q = 0;
            for (int n = 0; n < No; ++n) {
                double tg = 0;
                for (int A = tb.grade_start[g]; A < tb.grade_start[g + 1]; ++A)
                    tg += tb.grade_sign[A] * row[(size_t)A * No + n] * row[(size_t)A * No + n];
                q += fabs(tg);
            }
            n_ref[(size_t)b * G + g] = sqrt(q / No + 1e-6);
        }
        for (int A = 0; A < D; ++A)
            for (int n = 0; n < No; ++n)
                o_ref[((size_t)A * B + b) * No + n] = row[(size_t)A * No + n] / n_ref[(size_t)b * G + tb.grade[A]];
    }
    Run<ID, MODE, 0> r(small);
    float *partial, *norms;
    CK(cudaMalloc(&partial, (size_t)((No + C::NT - 1) / C::NT) * B * G * 4));
    CK(cudaMalloc(&norms, (size_t)B * G * 4));
    bool ok = true;
    for (int v = 0; v < 2; ++v) {
        CK(cudaMemset(r.out, 0xff, (size_t)D * B * No * 4));
        CK(cudaMemset(norms, 0xff, (size_t)B * G * 4));
        if (v == 0)
            r.template launch_tma<1, 1, true, true>(partial, norms);
        else
            r.template launch_tma<2, 2, true, true>(partial, norms);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<float> ho((size_t)D * B * No), hn((size_t)B * G);
        CK(cudaMemcpy(ho.data(), r.out, ho.size() * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hn.data(), norms, hn.size() * 4, cudaMemcpyDeviceToHost));
        double eo = 0, ro = 0, en = 0, rn = 0;
        for (size_t i = 0; i < ho.size(); ++i)
            eo += (ho[i] - o_ref[i]) * (ho[i] - o_ref[i]), ro += o_ref[i] * o_ref[i];
        for (size_t i = 0; i < hn.size(); ++i)
            en += (hn[i] - n_ref[i]) * (hn[i] - n_ref[i]), rn += n_ref[i] * n_ref[i];
        const double e1 = sqrt(eo / ro), e2 = sqrt(en / rn); /* NaN (unwritten) fails both */
        const bool good = e1 < tol && e2 < tol;
        ok = ok && good;
        printf("tma fwd with MVGELU and norm %s %s cluster %s B %d Ni %d No %d: rel err out %.2e, norms %.2e (tol "
               "%.0e) %s\n",
               name, MODE == kTF32 ? "tf32" : "bf16", v ? "2x2" : "1x1", B, small.Ni, No, e1, e2, tol, good ? "ok" : "FAIL");
    }
    cudaFree(partial), cudaFree(norms);
    return ok;
}

/* --profile: the timing shape once (for ncu), then timed with and without the tile copies */
template <int ID, int MODE, int NTV = 0> static void profile(const char *name)
{
    using C = Cfg<ID, MODE, NTV>;
    const int B = 4096, Ni = 512, No = 512, T = Plans<ID>::pair.np;
    Problem pr = make_problem<ID>(B, Ni, No, 12);
    Run<ID, MODE, NTV> r(pr);
    r.launch();
    CK(cudaDeviceSynchronize());
    const double full = r.time_ms(20);
    r.loads = 2;
    const double floor_ms = r.time_ms(20);
    const double gflop = 2.0 * T * B * Ni * No / 1e9;
    const double bytes = (double)(2 * C::XB + C::WB) * (Ni / C::KS) * (B / C::BM) * (No / C::NT); /* into shared memory */
    printf("profile %s %s NT %d: %.3f ms (%.0f TF/s, tiles %.2f TB/s into shared memory); without tile copies %.3f ms "
           "(%.0f TF/s)\n",
           name, MODE == kTF32 ? "tf32" : "bf16", C::NT, full, gflop / full, bytes / full / 1e9, floor_ms, gflop / floor_ms);
}

/* --tma-profile: one launch each of the Cl(3,0) tf32 TMA kernels on the timing shape, for ncu
 * (1 x 1; 2 x 2 multicast; 2 x 2 with every CTA loading its own tiles), timed beside each other */
static void tma_profile()
{
    using C = Cfg<1, kTF32, 0>;
    Problem pr = make_problem<1>(4096, 512, 512, 12);
    Run<1, kTF32, 0> r(pr);
    r.launch_tma<1, 1>();
    r.launch_tma<2, 2>();
    r.launch_tma<2, 2, false, false, false>();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    if (getenv("NO_TIMING"))
        return;
    const double a = event_ms(20, [&] { r.launch_tma<1, 1>(); }), b = event_ms(20, [&] { r.launch_tma<2, 2>(); }),
                 c = event_ms(20, [&] { r.launch_tma<2, 2, false, false, false>(); }),
                 d = event_ms(20, [&] { r.launch_tma<2, 1, false, false, false>(); });
    const double e = r.check({0, 1, 63, 64, 1000, 2047, 3001, 4095});
    printf("tma profile Cl(3,0) tf32 (stage %d KB, %d stages, %s release): 1x1 %.3f ms; 2x2 multicast %.3f ms (%d "
           "clusters); 2x2 no multicast %.3f ms; 2x1 no multicast %.3f ms; rel err of the last %.2e\n",
           C::STAGE / 1024, C::STAGES, RELEASE_CLUSTER ? "cluster-scope" : "CTA-scope remote", a, b,
           r.max_clusters<2, 2>(), c, d, e);
}

int main(int argc, char **argv)
{
    const bool timing = !(argc > 1 && !strcmp(argv[1], "--check"));
    if (argc > 1 && !strcmp(argv[1], "--tma-profile")) {
        tma_profile();
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--profile")) {
        profile<1, kTF32>("Cl(3,0)");
        profile<1, kBF16>("Cl(3,0)");
        profile<0, kTF32>("Cl(2,0)");
        profile<0, kBF16>("Cl(2,0)");
        return 0;
    }
    int dev;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("%s, %d SMs, sm_%d%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
    bool ok = true;
    const bool tma_only = argc > 1 && !strcmp(argv[1], "--tma");
    if (tma_only)
        goto tma_cases;
    /* (lbo, sbo) = (128, 256): K chunks adjacent, 8-row groups 256 bytes apart;
     * (1024, 128): 8-row groups adjacent, the second K chunk after all 64 rows */
    ok &= gemm_check<kTF32>(128, 256);
    ok &= gemm_check<kTF32>(1024, 128);
    ok &= gemm_check<kBF16>(128, 256);
    ok &= gemm_check<kBF16>(1024, 128);
    ok &= fcgp_case<1, kTF32>("Cl(3,0)", timing);
    ok &= fcgp_case<1, kBF16>("Cl(3,0)", timing);
    ok &= fcgp_case<1, kTF32, 32>("Cl(3,0)", timing); /* 64 accumulators: wgmma not serialized */
    ok &= fcgp_case<1, kBF16, 32>("Cl(3,0)", timing);
    ok &= fcgp_case<0, kTF32>("Cl(2,0)", timing);
    ok &= fcgp_case<0, kBF16>("Cl(2,0)", timing);
tma_cases:
    ok &= tma_case<1, kTF32, 1, 1>("Cl(3,0)", timing);
    ok &= tma_case<1, kTF32, 2, 1>("Cl(3,0)", timing);
    ok &= tma_case<1, kTF32, 1, 2>("Cl(3,0)", timing);
    ok &= tma_case<1, kTF32, 2, 2>("Cl(3,0)", timing);
    ok &= tma_case<1, kBF16, 1, 1>("Cl(3,0)", timing);
    ok &= tma_case<1, kBF16, 2, 2>("Cl(3,0)", timing);
    ok &= tma_case<0, kTF32, 2, 2>("Cl(2,0)", timing);
    ok &= tma_case<0, kBF16, 2, 2>("Cl(2,0)", timing);
    ok &= gate_case<1, kTF32>("Cl(3,0)");
    ok &= gate_case<1, kBF16>("Cl(3,0)");
    ok &= gate_case<0, kTF32>("Cl(2,0)");
    ok &= norm_case<1, kTF32>("Cl(3,0)");
    ok &= norm_case<1, kBF16>("Cl(3,0)");
    ok &= norm_case<0, kTF32>("Cl(2,0)"); /* grade 1 split between the warpgroups */
    printf("wgmma_lab: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
