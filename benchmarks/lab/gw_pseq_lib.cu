/* gw_pseq_lib.cu — the library's one-path-a-tile weight gradient (gw_pseq_kernel,
 * fcgp_wgmma_gw_pseq.cuh) alone, on synthetic operands, beside gw_pseq.cu's loop (NOTES_FCGP.md
 * session 41): its loop ran at 510-690 TF/s in that lab, while the kernel in the backward took
 * about twice the lab's time a step. Here the kernel runs outside the backward (no transposes just
 * before it, no chain), on random bf16 operands in its layouts (xg^T, yg^T in stage order, go^T in
 * step panels), a batch chunk of 2048 rows, with the backward's schedule (PseqSched: whole units to
 * the least-loaded block where that is cheaper, else make_gw_sched's rounds) for
 *   - N 512 x 512 (the issue's cells: Cl(3,0)'s 160 units, a round and segments; Cl(2,0)'s 80, all
 *     in segments), and
 *   - N_in 2048 x N_out 512 (four times the units: whole rounds, few segments),
 *   - Cl(3,0)'s three-pair paths alone in whole rounds (the lab's "three pairs a path"),
 * and reports each launch's time and TF/s (the units' pairs x 2 x 128 x 256 x 2048 flops).
 * Build and run (sm_90a):
 *   nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a -DFC_SM90A=1 \
 *       benchmarks/lab/gw_pseq_lib.cu -o gw_pseq_lib && ./gw_pseq_lib [case]
 */
#include <cstdio>
#include <cstdlib>

#include "../../csrc/cuda/common.cuh"
#include "../../csrc/cuda/fcgp_wgmma_gw_pseq.cuh"
#include "lab_timing.cuh"

using namespace fc;
using namespace fc::fcgp;
using namespace fc::fcgp::sm90;

/* paths: the units of the first `paths` paths in unit order only (0: all), e.g. Cl(3,0)'s 12
 * three-pair paths over N_in = 128 (SMs / 12) x 512: whole rounds of the heaviest units alone, the
 * lab's "three pairs a path" in the library's kernel */
static bool g_once = false; /* case 7: one launch, no timing */
static bool g_lpt = true; /* whole units to the least-loaded block where cheaper (PseqSched), else rounds */

template <int ID> void run(int sms, int Ni, int No, int paths = 0)
{
    using C = PseqCfg<ID, kBF16>;
    using E = __nv_bfloat16;
    constexpr int D = C::D, P = C::P;
    const int Bp = 2048, steps = Bp / C::KS;
    const int64_t dcs = (int64_t)Ni * Bp, gcs = (int64_t)No * Bp; /* components apart, elements */
    E *xg, *yg, *go, *gw;
    float *slots;
    int *flags;
    const int np = paths > 0 ? paths : P, units = np * (Ni / C::BM) * (No / C::NT);
    constexpr PseqCosts<ID> wc = pseq_costs<ID>(); /* the first np paths' costs lead (unit order) */
    const PseqSched sch = make_pseq_sched(wc.w, np, units / np, steps, sms, kPseqHand, 4, g_lpt);
    CK(cudaMalloc(&xg, (size_t)D * dcs * sizeof(E)));
    CK(cudaMalloc(&yg, (size_t)D * dcs * sizeof(E)));
    CK(cudaMalloc(&go, (size_t)D * gcs * sizeof(E)));
    CK(cudaMalloc(&gw, (size_t)P * Ni * No * sizeof(E)));
    CK(cudaMalloc(&slots, ((size_t)sch.slots() + 1) * C::SLOT * sizeof(float)));
    CK(cudaMalloc(&flags, ((size_t)sch.slots() + 1) * sizeof(int)));
    fill_random<<<1024, 256>>>(xg, (size_t)D * dcs, 1u);
    fill_random<<<1024, 256>>>(yg, (size_t)D * dcs, 2u);
    fill_random<<<1024, 256>>>(go, (size_t)D * gcs, 3u);
    CK(cudaGetLastError());
    auto k = gw_pseq_kernel<ID, kBF16, E>;
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM));
    auto launch = [&] {
        k<<<sch.grid, kSplitThreads, C::SMEM>>>(xg, yg, dcs, go, gcs, No, sch, slots, flags, 1, nullptr, nullptr, gw, Ni,
                                                No);
    };
    /* the flags zeroed before each launch (untimed), as the backward zeroes them a call */
    auto zero_flags = [&] { CK(cudaMemset(flags, 0, ((size_t)sch.slots() + 1) * sizeof(int))); };
    float best = 0.f;
    if (g_once) { /* one launch, for compute-sanitizer */
        zero_flags();
        launch();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        printf("one launch: %d units of %d steps on %d blocks\n", units, steps, sch.grid);
    } else {
        best = best_ms(launch, zero_flags);
    }
    const AlgebraTable &tb = AlgebraTraits<ID>::table;
    /* the units' pairs (distinct (j, path)), each an N_in x N_out x batch product over its tile */
    constexpr PseqOrder<ID> order = make_pseq_order<ID>();
    bool seen[FC_MAX_D][FC_MAX_P] = {};
    int tp = 0;
    for (int t = 0; t < tb.T; ++t) {
        bool in = false;
        for (int i = 0; i < np; ++i)
            in = in || order.path[i] == tb.term[t].path;
        if (in && !seen[tb.term[t].j][tb.term[t].path])
            seen[tb.term[t].j][tb.term[t].path] = true, ++tp;
    }
    const double flops = 2.0 * tp * (double)Ni * No * Bp;
    if (!g_once)
        printf("gw_pseq_kernel Cl(%d,0) bf16  N_in %4d N_out %4d, %2d paths: %3d units, grid %3d, %s: %7.1f us  "
               "%6.1f TF/s\n",
               tb.n, Ni, No, np, units, sch.grid, !sch.lpt ? "rounds" : sch.slots() ? "weighted segments" : "whole units",
               best * 1e3, flops / best / 1e9);
    CK(cudaFree(xg));
    CK(cudaFree(yg));
    CK(cudaFree(go));
    CK(cudaFree(gw));
    CK(cudaFree(slots));
    CK(cudaFree(flags));
}

/* ./gw_pseq_lib [case [lpt]]: every case (-1), or only case 0-7 (in the order below: one to
 * profile); lpt 0 keeps the rounds schedule */
int main(int argc, char **argv)
{
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int only = argc > 1 ? atoi(argv[1]) : -1;
    g_lpt = !(argc > 2 && atoi(argv[2]) == 0); /* a second argument 0: the rounds */
    auto want = [&](int c) { return only < 0 || only == c; };
    if (want(0))
        run<1>(sms, 512, 512);
    if (want(1))
        run<1>(sms, 2048, 512);
    if (want(2))
        run<1>(sms, 128 * (sms / 12 > 0 ? sms / 12 : 1), 512, 12); /* the three-pair paths alone, whole rounds */
    if (want(3))
        run<0>(sms, 512, 512);
    if (want(4))
        run<0>(sms, 2048, 512);
    if (want(5)) /* the three-pair paths alone over 512 x 512 on 96 SMs: gw_pseq.cu's "three-pair units alone" */
        run<1>(sms * 96 / 132, 512, 512, 12);
    if (only == 7) { /* 12 three-pair units of 128 steps, once: the ring wraps (racecheck) */
        g_once = true;
        run<1>(12, 128, 256, 12);
    }
    if (want(6)) /* the same on 24 SMs over 128 x 512 (its operands 24 MB, the L2's): beside gw_pseq mix's 24 blocks */
        run<1>(24, 128, 512, 12);
    return 0;
}
