/* fcgp_sm90a.h — what fcgp.cu asks of the Hopper FCGP forward (fcgp_sm90a.cu): the GEMM
 * o_j = sum_p z_{j,p} @ W[p] on warpgroup MMA with TMA tiles, MVGELU applied as x and y load,
 * and the output, or the whole grade norm, in the epilogue; fcgp.cu keeps the other paths (and
 * the finalize pass they need) and everything around them.
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

/* Workspace bytes of the path: the prepared W^T (P paths, N_out padded to whole column blocks,
 * N_in padded to whole steps: in stage order, or (P, N_out, Nip) for the boxes; fwd_w_bulk), with
 * the gate the gate product g = Phi(x_0) Phi(y_0) (B, N_in), both in the operand type, and with
 * the norm a count a row block and a state a tile (FwdOut::kNorm). */
size_t workspace_bytes(const fc_args *a, int mode, int operand_bytes);

/* The column-block count of the partials: N_out over the tile's columns (512 / D). */
int64_t colblocks(const fc_args *a);

/* Whether the copy engine can read x and y and the epilogue write o (16-byte aligned). */
bool aligned(const void *x, const void *y, const void *o);

/* What the forward writes:
 *  kO     o (D, B, N_out) fp32 and, when partial != NULL, its grade-norm partials (colblocks, B,
 *         G) for fcgp.cu's finalize pass;
 *  kOut   out (D, B, N_out) in the data type (out_bytes 4: fp32, 2: bf16), no norm;
 *  kNorm  the whole grade norm: out = o / r_g in the data type and norms (B, G; may be NULL),
 *         with o (may be out when fp32) and partial as scratch: each tile waits (bounded,
 *         norm_wait_ns) for its row block's partials and scales its own output, the block's last
 *         tile scaling any that gave up (no finalize pass; bitwise the finalize pass's result). */
struct FwdOut {
    enum Kind { kO, kOut, kNorm };
    float *o, *partial;
    void *out;
    int out_bytes;
    float *norms;
    Kind kind;
};

/* Whether the forward finishes the norm in its epilogue (FwdOut::kNorm): on unless
 * FLASHCLIFFORD_FCGP_FWD_NORM == "0" at start-up (then o, the partials and the finalize pass). */
bool fused_norm();
void set_fused_norm(bool on);
/* ... and a tile's wait there for its row block (fc_fcgp_sm90_fwd_norm_wait) */
long long norm_wait_ns();
void set_norm_wait_us(long long us);
/* How the forward brings W^T (in stage order by bulk copies, or in boxes; fc_fcgp_sm90_fwd_wbulk)
 * and its cluster shape (0: by the rule, 1: 1 x 1, 2: 2 x 1, 3: 1 x 2; fc_fcgp_sm90_fwd_cluster);
 * both from the environment at start-up, settable for tests and measurements. Results are bitwise
 * the same under every setting. */
bool fwd_w_bulk();
void set_fwd_w_bulk(bool on);
/* Where the bf16 forward in one CTA reads W as stored, MN-major, with no W^T to prepare (with W^T
 * in stage order, N_out a multiple of 8 and W 16-byte aligned): 0 nowhere, 1 everywhere, 2 at
 * tiles of 128 columns or more, the default (FLASHCLIFFORD_FCGP_FWD_WMN). */
int fwd_w_mn();
/* Whether the forward in one CTA forms each component's A fragments while the component before's
 * wgmmas run (two register sets, where they fit: Cl(2,0)); on unless FLASHCLIFFORD_FCGP_FWD_PIPE
 * == "0" at start-up; bitwise the same result. */
bool fwd_pipe();
int fwd_cluster_setting();
void set_fwd_cluster(int shape);
/* The forward's component groups at D 8 (fc_fcgp_sm90_fwd_groups: 0 by the rule, 2 unless a
 * cluster or W as stored everywhere is asked for; 1 a CTA every component of 64 columns; 2 half the
 * components of 128 columns, where W^T comes in stage order, in one CTA);
 * FLASHCLIFFORD_FCGP_FWD_GROUPS at start-up. fwd_groups(D): what the forward runs with. */
int fwd_groups_setting();
void set_fwd_groups(int groups);
int fwd_groups(int D);

/* The forward GEMM into f. x, y (D, B, N_in), w (P, N_in, N_out) in the operand type, MVGELU
 * first when a->gate; ws: workspace_bytes of workspace.
 * Only after planned() and aligned() (of x, y, and of every pointer f writes). */
fc_status forward_gemm(const fc_args *a, int mode, const void *x, const void *y, const void *w, void *ws,
                       const FwdOut &f, cudaStream_t stream);

/* The backward on the same machinery (fcgp_wgmma_gw.cuh, fcgp_wgmma_gz.cuh): whether it runs for
 * this call (its switch, the device, algebra, operand mode and grid-sized shapes: no row
 * alignment, as it reads only copies it makes), its workspace, and the launch.
 *
 * The launch writes go^T, the output gradient through the norm's backward, transposed (one copy:
 * gz and gW both read it), then the weight gradient and the input gradients; its kernels form
 * one programmatic chain (pdl.cuh; bwd_pdl); in two
 * chunks of the batch from 2048 rows on (bwd_chunks), so that go^T and, unless grad_x and grad_y
 * hold them, gW's xg^T, yg^T span half the batch. `in`: x, y, w the inputs in the operand type
 * (converted copies for fp32 data with bf16 products); v the forward's out (v_bytes: the data
 * type's size) or the recomputed o (fp32, v_bytes 4), and stats (B, 2 G: 1 / r_g, then the norm
 * backward's coefficient, per row: fcgp.cu's norm_stats), both NULL without the norm. stats_rows,
 * when not NULL, forms rows [b0, b0 + n) of stats (norm_stats, given stats_ctx; chained: launched
 * as a free kernel of the backward's programmatic chain, pdl.cuh): the backward calls it for each
 * slice of a chunk (go_rows_setting; by default the whole chunk) just before go^T's transpose of
 * those rows; NULL: stats hold every row already. grad_out and
 * the gradients are the args' (data type; grad_x, grad_y and grad_weight NULL when not wanted);
 * all three are written here (the weight gradient summed on chip in a fixed order: no
 * reduction left to the caller). */
struct BwdInputs {
    const void *x, *y, *w, *v;
    int v_bytes;
    const float *stats;
    fc_status (*stats_rows)(const void *ctx, int64_t b0, int64_t n, cudaStream_t stream, bool chained);
    const void *stats_ctx;
    /* what the fused pass (go_fused) forms the statistics from, as stats_rows does: the forward's
     * norms (B, G), else its nparts partial sums (nparts, B, G); v is out (from_out) or o */
    const float *norms, *partial;
    int nparts;
    bool from_out;
};
bool bwd_planned(const fc_args *a, int mode, int operand_bytes);
size_t bwd_workspace_bytes(const fc_args *a, int mode, int operand_bytes);
fc_status backward(const fc_args *a, int mode, const BwdInputs &in, void *ws, cudaStream_t stream);

/* The rows of a slice of go^T's transpose with stats_rows: 0 (the default) a chunk in one slice,
 * n > 0 n rows in whole 32-row blocks (FLASHCLIFFORD_FCGP_BWD_GO_ROWS at start-up; set_go_rows). */
long long go_rows_setting();
void set_go_rows(long long rows);
/* Whether the backward chains its kernels by programmatic dependent launch (pdl.cuh;
 * fc_fcgp_sm90_bwd_pdl_switch): bitwise the same result either way. */
bool bwd_pdl();
void set_bwd_pdl(bool on);
/* Whether go^T's passes move two columns a thread or load where N_out and the arrays allow
 * (go_transpose's CW 2, and go_rows' at D 8; FLASHCLIFFORD_FCGP_BWD_GO_PAIRS;
 * fc_fcgp_sm90_bwd_go_pairs_switch): bitwise the same result either way. */
bool go_pairs_setting();
void set_go_pairs(bool on);
/* How the weight gradient is tiled: 0 by the rule, 1 one path a tile where the shapes allow
 * (gw_pseq_kernel), 2 by path groups (gw_tma_kernel); FLASHCLIFFORD_FCGP_GW_PSEQ;
 * fc_fcgp_sm90_gw_pseq. */
int gw_pseq_setting();
void set_gw_pseq(int mode);
/* How the backward forms the norm's statistics and go^T (go_rows in one pass, or two passes):
 * 0 by the rule, 1 one pass, 2 two passes (FLASHCLIFFORD_FCGP_BWD_GO_FUSED; fc_fcgp_sm90_bwd_go_fused). */
int go_fused_setting();
void set_go_fused(int mode);

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
