/* gz_spills.cu — the Hopper input gradient's register spills without the whole unit: this file
 * instantiates only gz_tma_kernel's default forms of the issue-4 cells (KK 4 at Cl(2,0), 2 at
 * Cl(3,0); bf16 data in bf16 mode, fp32 in tf32), so ptxas -v reports their spills in well under a
 * minute where fcgp_sm90a.cu takes 4-8. Compile only:
 *   nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a -DFC_SM90A=1 -Xptxas -v \
 *       -c benchmarks/lab/gz_spills.cu -o /tmp/gz_spills.o 2>&1 | grep -E "Compiling|spill" */
#include "cuda/common.cuh"
#include "cuda/fcgp_wgmma_gz.cuh"

namespace sm90 = fc::fcgp::sm90;

/* ID 0 Cl(2,0), 1 Cl(3,0) */
void *gz_spills_kernels[] = {
    (void *)sm90::gz_tma_kernel<0, fc::fcgp::kTF32, float, 4>,
    (void *)sm90::gz_tma_kernel<1, fc::fcgp::kTF32, float, 2>,
    (void *)sm90::gz_tma_kernel<0, fc::fcgp::kBF16, __nv_bfloat16, 4>,
    (void *)sm90::gz_tma_kernel<1, fc::fcgp::kBF16, __nv_bfloat16, 2>,
};
