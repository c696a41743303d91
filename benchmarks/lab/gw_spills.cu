/* gw_spills.cu — the Hopper weight gradient's registers and spills without the whole unit: this
 * file instantiates only gw_tma_kernel's default forms of the issue-4 cells (KK 2; bf16 data in
 * bf16 mode, fp32 in tf32) and gw_pseq_kernel's, so ptxas -v reports them in well under a minute
 * where fcgp_sm90a.cu takes 4-8. Compile only:
 *   nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a -DFC_SM90A=1 -Xptxas -v \
 *       -c benchmarks/lab/gw_spills.cu -o /tmp/gw_spills.o 2>&1 | grep -E "Compiling|spill|registers" */
#include "cuda/common.cuh"
#include "cuda/fcgp_wgmma_gw.cuh"
#include "cuda/fcgp_wgmma_gw_pseq.cuh"

namespace sm90 = fc::fcgp::sm90;

/* ID 0 Cl(2,0), 1 Cl(3,0) */
void *gw_spills_kernels[] = {
    (void *)sm90::gw_tma_kernel<0, fc::fcgp::kTF32, float, 2>,
    (void *)sm90::gw_tma_kernel<1, fc::fcgp::kTF32, float, 2>,
    (void *)sm90::gw_tma_kernel<0, fc::fcgp::kBF16, __nv_bfloat16, 2>,
    (void *)sm90::gw_tma_kernel<1, fc::fcgp::kBF16, __nv_bfloat16, 2>,
    (void *)sm90::gw_pseq_kernel<0, fc::fcgp::kTF32, float>,
    (void *)sm90::gw_pseq_kernel<1, fc::fcgp::kTF32, float>,
    (void *)sm90::gw_pseq_kernel<0, fc::fcgp::kBF16, __nv_bfloat16>,
    (void *)sm90::gw_pseq_kernel<1, fc::fcgp::kBF16, __nv_bfloat16>,
};
