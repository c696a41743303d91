/* gw_pseq_spills.cu — the Hopper weight gradient's (one path a unit) register spills without the
 * whole unit: gw_pseq_kernel in the issue-4 cells (bf16 data in bf16 mode, fp32 in tf32), whose
 * consumers run at PseqCfg::CONSUMER_REGS and producer at PRODUCER_REGS (the next chunk's
 * gelu_transpose_warps). Compile only:
 *   nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a -DFC_SM90A=1 -Xptxas -v \
 *       -c benchmarks/lab/gw_pseq_spills.cu -o /tmp/gw_pseq_spills.o 2>&1 | grep -E "Compiling|spill" */
#include "cuda/common.cuh"
#include "cuda/fcgp_wgmma_gw_pseq.cuh"

namespace sm90 = fc::fcgp::sm90;

/* ID 0 Cl(2,0), 1 Cl(3,0) */
void *gw_pseq_spills_kernels[] = {
    (void *)sm90::gw_pseq_kernel<0, fc::fcgp::kTF32, float>,
    (void *)sm90::gw_pseq_kernel<1, fc::fcgp::kTF32, float>,
    (void *)sm90::gw_pseq_kernel<0, fc::fcgp::kBF16, __nv_bfloat16>,
    (void *)sm90::gw_pseq_kernel<1, fc::fcgp::kBF16, __nv_bfloat16>,
};
