/* fwd_spills.cu — the Hopper forward GEMM's register spills without the whole unit: this file
 * instantiates only fwd_tma_kernel's default (1 x 1) forms of the issue-4 cells, so ptxas -v
 * reports their spills in about 20 s where fcgp_sm90a.cu takes 4-8 minutes (session 32 bisected
 * the Cl(3,0) bf16 forward's spill to form_pair's sign-flipped copies this way). Compile only:
 *   nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a -DFC_SM90A=1 -Xptxas -v \
 *       -c benchmarks/lab/fwd_spills.cu -o /tmp/fwd_spills.o 2>&1 | grep -E "Compiling|spill" */
#include "cuda/common.cuh"
#include "cuda/fcgp_wgmma.cuh"
#include "cuda/mma_ptx.cuh"

namespace sm90 = fc::fcgp::sm90;

/* ID 0 Cl(2,0), 1 Cl(3,0); with the gate; fp32 out for tf32, bf16 out for bf16 */
void *fwd_spills_kernels[] = {
    (void *)sm90::fwd_tma_kernel<0, fc::fcgp::kTF32, 1, 1, true, float>,
    (void *)sm90::fwd_tma_kernel<1, fc::fcgp::kTF32, 1, 1, true, float>,
    (void *)sm90::fwd_tma_kernel<0, fc::fcgp::kBF16, 1, 1, true, __nv_bfloat16>,
    (void *)sm90::fwd_tma_kernel<1, fc::fcgp::kBF16, 1, 1, true, __nv_bfloat16>,
    /* bf16 reading W as stored (WMN) */
    (void *)sm90::fwd_tma_kernel<0, fc::fcgp::kBF16, 1, 1, true, __nv_bfloat16, true, true>,
    (void *)sm90::fwd_tma_kernel<1, fc::fcgp::kBF16, 1, 1, true, __nv_bfloat16, true, true>,
    /* each component's A fragments formed while the one before's wgmmas run (PIPE): the Cl(2,0)
     * defaults (at Cl(3,0) two A sets spill 312-636 bytes, so the library never launches them) */
    (void *)sm90::fwd_tma_kernel<0, fc::fcgp::kTF32, 1, 1, true, float, true, false, true>,
    (void *)sm90::fwd_tma_kernel<0, fc::fcgp::kBF16, 1, 1, true, __nv_bfloat16, true, true, true>,
};
