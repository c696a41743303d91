/* fcgp_sm90a.h — what fcgp.cu asks of the Hopper FCGP forward (fcgp_sm90a.cu): the GEMM
 * o_j = sum_p z_{j,p} @ W[p] on warpgroup MMA with TMA tiles, MVGELU applied as x and y load,
 * and the grade-norm partials in the epilogue; fcgp.cu keeps the finalize pass, the other
 * paths and everything around them.
 *
 * Eligible: the unit built for sm_90a (FC_SM90A), the path switched on (the default;
 * FLASHCLIFFORD_FCGP_SM90=0 at start-up or set_enabled(false) keeps mma.sync), a device of
 * compute capability 9.0 exactly, Cl(2,0) or Cl(3,0) (D <= 8: the 16-component algebras'
 * fragments do not fit beside the accumulators), tf32 or bf16 operands, rows of x and y a
 * multiple of 16 bytes (the copy engine's stride rule), and grid-sized shapes.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "../fc.h"

namespace fc {
namespace fcgp {
namespace sm90 {

/* Whether the path would run for this call's algebra, operand mode (mma_ptx.cuh Mode),
 * operand size in bytes and shape on a->device. Pointer alignment is checked at launch. */
bool planned(const fc_args *a, int mode, int operand_bytes);

/* Workspace bytes of the path: the prepared W^T (P, N_out, N_in padded to whole steps) and,
 * with the gate, the gate product g = Phi(x_0) Phi(y_0) (B, N_in), both in the operand type. */
size_t workspace_bytes(const fc_args *a, int mode, int operand_bytes);

/* The column-block count of the partials: N_out over the tile's columns (512 / D). */
int64_t colblocks(const fc_args *a);

/* Whether the copy engine can read x and y and the epilogue write o (16-byte aligned). */
bool aligned(const void *x, const void *y, const void *o);

/* o (D, B, N_out) fp32 and, when partial != NULL, the grade-norm partials (colblocks, B, G).
 * x, y (D, B, N_in), w (P, N_in, N_out) in the operand type, MVGELU first when a->gate;
 * ws: workspace_bytes of workspace.
 * Only after planned() and aligned(). */
fc_status forward_gemm(const fc_args *a, int mode, const void *x, const void *y, const void *w, void *ws, float *o,
                       float *partial, cudaStream_t stream);

/* The weight gradient gW[p] = sum_j z_{j,p}^T go_j on the same machinery (fcgp_wgmma_gw.cuh):
 * whether it runs for this call (its switch, the device, algebra, operand mode and sizes: the
 * same as the forward's but for the row alignment, which its own transposed copies meet), its
 * batch splits, its workspace (xg^T, yg^T, go^T in the operand type and `splits` fp32
 * partials (P, N_in, N_out)), and the launch: x, y the raw inputs (a->gate: MVGELU), go
 * (D, B, N_out) the output gradient through the norm, all in the operand type; it returns the
 * partials (inside ws) for the caller's ordered reduction. xg^T and yg^T may lie outside the
 * workspace (transposes_outside; the launch's xgt, ygt, both 16-byte aligned and
 * gw_transpose_bytes each; NULL: in ws): the caller's grad_x and grad_y before the input
 * gradients overwrite them. */
bool gw_planned(const fc_args *a, int mode, int operand_bytes);
/* The input gradients on the same machinery (fcgp_wgmma_gz.cuh): whether they run for this call
 * (the backward switch, and rows of go a multiple of 16 bytes; go's alignment is the caller's
 * to check), their workspace (W with N_out permuted, in the operand type), and the launch: go
 * (D, B, N_out), w (P, N_in, N_out), x, y the inputs (a->gate: MVGELU), all in the operand
 * type; grad_x, grad_y in the data type (a->dtype), either NULL. */
bool gz_planned(const fc_args *a, int mode, int operand_bytes);
size_t gz_workspace_bytes(const fc_args *a, int mode, int operand_bytes);
fc_status input_grad(const fc_args *a, int mode, const void *go, const void *w, const void *x, const void *y,
                     void *grad_x, void *grad_y, void *ws, cudaStream_t stream);
int gw_splits(const fc_args *a, int mode, int64_t *rows_per_split);
size_t gw_workspace_bytes(const fc_args *a, int mode, int operand_bytes, bool transposes_outside);
size_t gw_transpose_bytes(const fc_args *a, int mode, int operand_bytes);
fc_status weight_grad(const fc_args *a, int mode, const void *x, const void *y, const void *go, void *ws,
                      void *xgt, void *ygt, float **partial, int *splits, cudaStream_t stream);

/* The switches (initially on unless FLASHCLIFFORD_FCGP_SM90 == "0", FLASHCLIFFORD_FCGP_SM90_BWD
 * == "0" for the backward kernels) and whether the unit has sm_90a code. */
void set_enabled(bool on);
bool enabled();
void set_bwd_enabled(bool on);
bool bwd_enabled();
bool compiled();

} // namespace sm90
} // namespace fcgp
} // namespace fc
