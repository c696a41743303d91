/* wgmma_rate.cu — how fast the forward's inner loop runs on the tensor cores when nothing is
 * copied, for tile shapes the library does not build (NOTES_FCGP.md, session 19).
 *
 * The question: the Hopper forward's kernel (fcgp_wgmma.cuh) issues one register-A wgmma
 * m64 x NT per (component, path) pair, NT = 512 / D (64 at Cl(3,0)), because each warpgroup
 * holds D / 2 components' accumulators. Its copy-free floor in the session-8 lab was ~200 TF/s
 * tf32, while torch.bmm of the same products runs at ~280. Would fewer, wider wgmmas (one or two
 * components a warpgroup, N = 128 or 256, the same 128 accumulators a thread) raise that floor?
 *
 * Each block (one an SM) has two warpgroups that, for `steps` steps, load their x, y fragments
 * from a static shared region (lds, as the kernel does), form the A fragments of their
 * components' pairs (form_pair) and issue the wgmmas on W tiles in shared memory. No copies and
 * no block barriers: this is an upper bound on what a kernel of that shape can reach.
 *   pure<MODE, N, NW>: NW wgmmas on fixed A registers, one commit and wait: the tensor ceiling.
 *   comp<ID, MODE, N, JW, J0>: warpgroup w takes components J0 + w JW .. + JW - 1 (the library's
 *   shape is JW = D / 2, N = 512 / D); a wait per component, as wg_step. MN (bf16, N 64 or 128):
 *   the W tiles read MN-major in the 128-byte swizzle (WLayoutMN's descriptor: the bf16 forward
 *   reading W as stored, FLASHCLIFFORD_FCGP_FWD_WMN) instead of K-major in the 32-byte one, the
 *   same bytes a wgmma (session 47: is the MN-major read what costs WMN 5-7% at N 64?).
 *   perj<ID, MODE, N, J0>: one component a warpgroup, a step's A formed while the step before
 *   still runs (two A register sets, wait<1>, as gw_step).
 *   gwloop<ID, MODE, KK, GR, RN, LDS>: the weight gradient's own step (gw_step) on two static
 *   stages (session 22).
 * RN: the tf32 pair products rounded (cvt.rna, the library up to session 21), else truncated by
 * the tensor cores (form_pair's default since session 22).
 * Build and run: benchmarks/lab/run_wgmma_rate.sh (sm_90a).
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "../../csrc/cuda/fcgp_wgmma_gw.cuh" /* and fcgp_wgmma.cuh */
#include "lab_check.h"

using namespace fc;
using namespace fc::fcgp;
using namespace fc::fcgp::sm90;

constexpr int kBM = 64;
constexpr int kXY = 2; /* x, y regions (each D x 64 rows x 32 bytes), alternated by step */
constexpr int kPW = 6; /* W tiles in shared memory; path p reads tile p % kPW */

template <int D, int N> __host__ __device__ constexpr int smem_bytes() { return kXY * 2 * D * kBM * 32 + kPW * N * 32; }

template <int MODE> __device__ __forceinline__ uint32_t small_value(int i)
{
    const float v = 0.001f * (float)(i % 13 - 6);
    if constexpr (MODE == kTF32)
        return __float_as_uint(v);
    else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(v, -v);
        return *(const uint32_t *)&h;
    }
}

/* the static region filled with small values; returns the shared address of its W tiles */
template <int MODE, int D, int N> __device__ uint32_t fill(unsigned char *sm)
{
    for (int i = threadIdx.x; i < smem_bytes<D, N>() / 4; i += blockDim.x)
        ((uint32_t *)sm)[i] = small_value<MODE>(i);
    __syncthreads();
    return smem_u32(sm + kXY * 2 * D * kBM * 32);
}

template <int N, int JW> __device__ void sink_acc(float (&acc)[JW][N / 2], float *sink)
{
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < JW; ++j) {
        wg::fence_operands(acc[j]);
#pragma unroll
        for (int i = 0; i < N / 2; ++i)
            s += acc[j][i];
    }
    if (s == 12345.f) /* never: keeps the accumulators live */
        sink[threadIdx.x] = s;
}

/* the tensor ceiling: NW wgmmas m64 x N on fixed A fragments a step */
template <int MODE, int N, int NW> __global__ void __launch_bounds__(256, 1) pure(int steps, float *sink)
{
    extern __shared__ __align__(1024) unsigned char sm[];
    const uint32_t w = fill<MODE, 8, N>(sm);
    uint32_t a[4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
        a[r] = small_value<MODE>(threadIdx.x + r);
    float acc[1][N / 2];
    zero_all(acc);
    for (int s = 0; s < steps; ++s) {
        wg::fence();
#pragma unroll
        for (int i = 0; i < NW; ++i)
            wg::MmaRS<MODE, N>::run(acc[0], a, wg::desc_kmajor_swz<32>(w + (i % kPW) * N * 32), 1);
        wg::commit();
        wg::wait<0>();
    }
    sink_acc<N, 1>(acc, sink);
}

/* component j's pairs: form their A fragments into a, fence, issue their wgmmas on acc (path p
 * reads W tile p % kPW) and commit them, as wg_step does at N = 512 / D */
template <int ID, int MODE, int N, int j, int nq, bool RN = false, bool MN = false>
__device__ __forceinline__ void form_issue(float (&acc)[N / 2], uint32_t (&a)[nq][4], const Frags<AlgebraTraits<ID>::D> &f,
                                           uint32_t w)
{
    constexpr int q0 = Plans<ID>::pair.jbegin[j];
    static_for<nq>([&](auto u) { form_pair<ID, MODE, q0 + decltype(u)::value, RN>(a[decltype(u)::value], f); });
    wg::fence();
    static_for<nq>([&](auto u) {
        constexpr int p = Plans<ID>::pair.pp[q0 + decltype(u)::value];
        if constexpr (MN) /* kPW paths' 1024-byte atoms a K group, the 64-column atoms 2 kPW KB apart */
            wg::MmaRS<MODE, N, 1>::run(acc, a[decltype(u)::value],
                                       wg::desc_mn_sw128(w + (p % kPW) * 1024, 2 * kPW * 1024, kPW * 1024), 1);
        else
            wg::MmaRS<MODE, N>::run(acc, a[decltype(u)::value], wg::desc_kmajor_swz<32>(w + (p % kPW) * N * 32), 1);
    });
    wg::commit();
}

/* the library's loop shape at any N and components a warpgroup */
template <int ID, int MODE, int N, int JW, int J0, bool LDS = true, bool RN = false, bool MN = false>
__global__ void __launch_bounds__(256, 1) comp(int steps, float *sink)
{
    constexpr int D = AlgebraTraits<ID>::D;
    extern __shared__ __align__(1024) unsigned char sm[];
    const uint32_t w = fill<MODE, D, N>(sm);
    const int wg_ = threadIdx.x / 128, wt = threadIdx.x % 128, lane = wt % 32;
    const int r0 = (wt / 32) * 16 + lane / 4, t = lane % 4;
    float acc[JW][N / 2];
    zero_all(acc);
    Frags<D> f;
    load_frags<D, kBM>(f, sm, sm + D * kBM * 32, r0, t);
    for (int s = 0; s < steps; ++s) {
        const unsigned char *xs = sm + (s % kXY) * 2 * D * kBM * 32, *ys = xs + D * kBM * 32;
        if (LDS) /* else the first fragments throughout: what the loads cost */
            load_frags<D, kBM>(f, xs, ys, r0, t);
        auto run = [&](auto wgc) {
            constexpr int WG = decltype(wgc)::value;
            static_for<JW>([&](auto jj) {
                constexpr int j = J0 + WG * JW + decltype(jj)::value;
                constexpr int nq = Plans<ID>::pair.jbegin[j + 1] - Plans<ID>::pair.jbegin[j];
                uint32_t a[nq][4];
                form_issue<ID, MODE, N, j, nq, RN, MN>(acc[decltype(jj)::value], a, f, w);
                wg::wait<0>();
            });
        };
        if (wg_ == 0)
            run(std::integral_constant<int, 0>{});
        else
            run(std::integral_constant<int, 1>{});
    }
    sink_acc<N, JW>(acc, sink);
}

/* one component a warpgroup; step s + 1's A formed while step s's wgmmas run */
template <int ID, int MODE, int N, int J0> __global__ void __launch_bounds__(256, 1) perj(int steps, float *sink)
{
    constexpr int D = AlgebraTraits<ID>::D;
    extern __shared__ __align__(1024) unsigned char sm[];
    const uint32_t w = fill<MODE, D, N>(sm);
    const int wg_ = threadIdx.x / 128, wt = threadIdx.x % 128, lane = wt % 32;
    const int r0 = (wt / 32) * 16 + lane / 4, t = lane % 4;
    float acc[1][N / 2];
    zero_all(acc);
    auto run = [&](auto wgc) {
        constexpr int j = J0 + decltype(wgc)::value;
        constexpr int nq = Plans<ID>::pair.jbegin[j + 1] - Plans<ID>::pair.jbegin[j];
        uint32_t a[2][nq][4];
        /* as gw_step: form into one set and issue, and only then wait for the other set's wgmmas */
        auto step = [&](int s, uint32_t (&aa)[nq][4], uint32_t (&other)[nq][4]) {
            const unsigned char *xs = sm + (s % kXY) * 2 * D * kBM * 32, *ys = xs + D * kBM * 32;
            Frags<D> f;
            load_frags<D, kBM>(f, xs, ys, r0, t);
            form_issue<ID, MODE, N, j, nq>(acc[0], aa, f, w);
            wg::wait<1>();
            wg::fence_operands(other);
        };
        for (int s = 0; s < steps; s += 2) {
            step(s, a[0], a[1]);
            step(s + 1, a[1], a[0]);
        }
        wg::wait<0>();
        wg::fence_operands(a[1]);
    };
    if (wg_ == 0)
        run(std::integral_constant<int, 0>{});
    else
        run(std::integral_constant<int, 1>{});
    sink_acc<N, 1>(acc, sink);
}

/* the weight gradient's step (gw_step of fcgp_wgmma_gw.cuh, path group GR) on two static stages,
 * no copies (session 22: neither its step-end drain nor its go^T copy rate moved the kernel) */
template <int ID, int MODE, int KK, int GR, bool RN, bool LDS>
__global__ void __launch_bounds__(256, 1) gwloop(int steps, float *sink)
{
    using C = GwCfg<ID, MODE, KK>;
    extern __shared__ __align__(1024) unsigned char sm[];
    for (int i = threadIdx.x; i < 2 * C::STAGE / 4; i += blockDim.x)
        ((uint32_t *)sm)[i] = small_value<MODE>(i);
    __syncthreads();
    const int wg_ = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
    float acc[C::PH][C::NT / 2];
    zero_all(acc);
    for (int s = 0; s < steps; ++s) {
        const unsigned char *buf = sm + (s % 2) * C::STAGE;
        if (wg_ == 0)
            gw_step<ID, MODE, KK, GR, 0, RN, LDS>(acc, buf, 16 * warp + g, t);
        else
            gw_step<ID, MODE, KK, GR, 1, RN, LDS>(acc, buf, 16 * warp + g, t);
    }
    sink_acc<C::NT, C::PH>(acc, sink);
}
/* f(integral_constant<int, i>) for i = 0 .. L - 1, on the host (static_for is __host__ __device__,
 * and nvcc warns when it calls a host lambda) */
template <class F, int... I> void host_for_impl(F &&f, std::integer_sequence<int, I...>)
{
    (f(std::integral_constant<int, I>{}), ...);
}
template <int L, class F> void host_for(F &&f) { host_for_impl(f, std::make_integer_sequence<int, L>{}); }

struct Timer {
    cudaEvent_t a, b;
    Timer()
    {
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
    }
    ~Timer() { cudaEventDestroy(a), cudaEventDestroy(b); }
    template <class F> float ms(F &&launch)
    {
        launch(); /* warm-up */
        CK(cudaGetLastError());
        CK(cudaEventRecord(a));
        launch();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t;
        CK(cudaEventElapsedTime(&t, a, b));
        return t;
    }
};

static int g_sms;
static float *g_sink;
constexpr int kSteps = 4096;

template <class K> void prep(K kernel, int smem)
{
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
}

/* flops of warpgroup components j0 .. j0 + n - 1 a step */
template <int ID, int MODE, int N> double comp_flops(int j0, int n)
{
    constexpr int KS = MODE == kTF32 ? 8 : 16;
    double pairs = 0;
    for (int j = j0; j < j0 + n; ++j)
        pairs += Plans<ID>::pair.jbegin[j + 1] - Plans<ID>::pair.jbegin[j];
    return pairs * 2.0 * kBM * N * KS;
}

template <int MODE, int N, int NW> void run_pure()
{
    constexpr int smem = smem_bytes<8, N>();
    prep(pure<MODE, N, NW>, smem);
    Timer tm;
    const float ms = tm.ms([&] { pure<MODE, N, NW><<<g_sms, 256, smem>>>(kSteps, g_sink); });
    const double fl = (double)g_sms * kSteps * 2 * NW * 2.0 * kBM * N * (MODE == kTF32 ? 8 : 16);
    printf("pure  %s N %3d, %d wgmmas a wait: %7.1f TF/s\n", MODE == kTF32 ? "tf32" : "bf16", N, NW, fl / ms / 1e9);
}

/* the components J0 .. of all launches that together cover 0 .. D - 1 */
template <int ID, int MODE, int N, int JW, bool LDS = true, bool RN = false, bool MN = false> void run_comp(const char *name)
{
    /* the region's kPW N 32 bytes are exactly N / 64 atoms of kPW paths x two K groups x 1 KB */
    static_assert(!MN || (MODE == kBF16 && N % 64 == 0), "MN-major: bf16, whole 64-column atoms");
    constexpr int D = AlgebraTraits<ID>::D, L = D / (2 * JW);
    double fl = 0, ms = 0;
    host_for<L>([&](auto l) {
        constexpr int J0 = decltype(l)::value * 2 * JW;
        constexpr int smem = smem_bytes<D, N>();
        prep(comp<ID, MODE, N, JW, J0, LDS, RN, MN>, smem);
        Timer tm;
        ms += tm.ms([&] { comp<ID, MODE, N, JW, J0, LDS, RN, MN><<<g_sms, 256, smem>>>(kSteps, g_sink); });
        fl += (double)g_sms * kSteps * comp_flops<ID, MODE, N>(J0, 2 * JW);
    });
    printf("comp  %s %s N %3d, %d components a warpgroup%s%s%s: %7.1f TF/s\n", name, MODE == kTF32 ? "tf32" : "bf16",
           N, JW, LDS ? "" : ", fragments loaded once", RN ? ", products rounded (cvt.rna)" : "",
           MN ? ", W MN-major (128-byte swizzle)" : "", fl / ms / 1e9);
}

template <int ID, int MODE, int N> void run_perj(const char *name)
{
    constexpr int D = AlgebraTraits<ID>::D;
    double fl = 0, ms = 0;
    host_for<D / 2>([&](auto l) {
        constexpr int J0 = decltype(l)::value * 2;
        constexpr int smem = smem_bytes<D, N>();
        prep(perj<ID, MODE, N, J0>, smem);
        Timer tm;
        ms += tm.ms([&] { perj<ID, MODE, N, J0><<<g_sms, 256, smem>>>(kSteps, g_sink); });
        fl += (double)g_sms * kSteps * comp_flops<ID, MODE, N>(J0, 2);
    });
    printf("perj  %s %s N %3d, 1 component, A of the next step formed under the wgmmas: %7.1f TF/s\n", name,
           MODE == kTF32 ? "tf32" : "bf16", N, fl / ms / 1e9);
}

/* gW's loop over all its path groups; the kernel's rate (fcgp_parts.py) beside it */
template <int ID, int MODE, int KK, bool RN = false, bool LDS = false> void run_gw(const char *name)
{
    using C = GwCfg<ID, MODE, KK>;
    double fl = 0, ms = 0;
    host_for<C::GROUPS>([&](auto gr) {
        constexpr int GR = decltype(gr)::value, smem = 2 * C::STAGE;
        prep(gwloop<ID, MODE, KK, GR, RN, LDS>, smem);
        Timer tm;
        ms += tm.ms([&] { gwloop<ID, MODE, KK, GR, RN, LDS><<<g_sms, 256, smem>>>(kSteps, g_sink); });
        double pairs = 0; /* constant-evaluated: Plans is not device data */
        host_for<C::PG>([&](auto pl) {
            constexpr int n = path_pairs<ID>(GR * C::PG + decltype(pl)::value);
            pairs += n;
        });
        fl += (double)g_sms * kSteps * pairs * 2.0 * C::BM * C::NT * C::KS * KK;
    });
    printf("gw    %s %s N %3d, %d sub-steps a step, copy-free%s%s: %7.1f TF/s\n", name, MODE == kTF32 ? "tf32" : "bf16",
           C::NT, KK, RN ? ", products rounded (cvt.rna)" : "", LDS ? ", ld.shared" : "", fl / ms / 1e9);
}
int main()
{
    int dev;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    g_sms = prop.multiProcessorCount;
    CK(cudaMalloc(&g_sink, 256 * sizeof(float)));
    printf("%s, %d SMs; %d steps a block, one block an SM, two warpgroups\n", prop.name, g_sms, kSteps);
    run_pure<kTF32, 64, 4>();
    run_pure<kTF32, 64, 16>();
    run_pure<kTF32, 128, 8>();
    run_pure<kTF32, 256, 4>();
    run_pure<kBF16, 64, 16>();
    run_pure<kBF16, 256, 4>();
    run_pure<kTF32, 48, 11>(); /* gW's wgmma shape, a warpgroup's wgmmas a step */
    run_pure<kBF16, 48, 11>();
    run_gw<1, kTF32, 1>("Cl(3,0)"); /* the library's gW (KK 1 at Cl(3,0) tf32, else 2) */
    run_gw<1, kTF32, 1, true>("Cl(3,0)");
    run_gw<1, kTF32, 1, false, true>("Cl(3,0)");
    run_gw<1, kTF32, 2>("Cl(3,0)");
    run_gw<1, kBF16, 2>("Cl(3,0)");
    run_gw<1, kBF16, 2, false, true>("Cl(3,0)");
    run_gw<0, kTF32, 2>("Cl(2,0)");
    run_gw<0, kTF32, 2, true>("Cl(2,0)");
    run_gw<0, kBF16, 2>("Cl(2,0)");
    run_gw<0, kBF16, 2, false, true>("Cl(2,0)");
    run_comp<1, kTF32, 64, 4, true, true>("Cl(3,0)");
    run_comp<0, kTF32, 128, 2, true, true>("Cl(2,0)");
    run_comp<1, kTF32, 64, 4>("Cl(3,0)"); /* the library's shape */
    run_comp<1, kTF32, 64, 4, false>("Cl(3,0)");
    run_comp<1, kTF32, 128, 2>("Cl(3,0)");
    run_comp<1, kTF32, 256, 1>("Cl(3,0)");
    run_perj<1, kTF32, 256>("Cl(3,0)");
    run_comp<1, kBF16, 64, 4>("Cl(3,0)");
    run_comp<1, kBF16, 64, 4, true, false, true>("Cl(3,0)"); /* the Cl(3,0) bf16 forward under WMN */
    run_comp<1, kBF16, 64, 4, false>("Cl(3,0)");
    run_comp<1, kBF16, 128, 2>("Cl(3,0)");
    run_comp<1, kBF16, 256, 1>("Cl(3,0)");
    run_perj<1, kBF16, 256>("Cl(3,0)");
    run_comp<0, kTF32, 128, 2>("Cl(2,0)"); /* the library's shape */
    run_comp<0, kTF32, 128, 2, false>("Cl(2,0)");
    run_comp<0, kTF32, 256, 1>("Cl(2,0)");
    run_perj<0, kTF32, 256>("Cl(2,0)");
    run_comp<0, kBF16, 128, 2>("Cl(2,0)");
    run_comp<0, kBF16, 128, 2, true, false, true>("Cl(2,0)"); /* the Cl(2,0) bf16 forward (WMN, the default) */
    run_comp<0, kBF16, 256, 1>("Cl(2,0)");
    run_perj<0, kBF16, 256>("Cl(2,0)");
    CK(cudaFree(g_sink));
    return 0;
}
