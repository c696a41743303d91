/* fc.h — the one interface between the Python bindings and the kernels.
 *
 * Shape letters, the same in every file: D components (2^n), G grades (n + 1),
 * P product paths, T non-zero Cayley terms, B batch rows, N features
 * (N_in / N_out for the fully connected product).
 *
 * Layouts (all C-contiguous, element strides only):
 *   x, y, grad_x, grad_y         (D, B, N_in)
 *   out, grad_out                (D, B, N_out)      N_out = N_in for sgp
 *   weight, grad_weight   sgp:   (N, P)
 *                         fcgp:  (P, N_in, N_out)
 *   norms                        (B, G), the grade RMS r_g[b] = sqrt(q_g[b] + eps),
 *                                in the compute type (float64 for float64 data, else float32)
 *
 * Kernels never touch Python: they return an fc_status, and for FC_ERR_CUDA* a message
 * with file:line is kept per thread (fc_error_message). The CUDA twins take the stream last.
 */
#ifndef FC_H
#define FC_H

#include <stddef.h>
#include <stdint.h>

#include "algebra_rules.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fc_status {
    FC_OK = 0,
    FC_ERR_VALUE,       /* a size the kernels cannot take (message set) */
    FC_ERR_TYPE,        /* a dtype this backend does not compute */
    FC_ERR_NOMEM,       /* host allocation failed */
    FC_ERR_CUDA,        /* a CUDA call failed (message set) */
    FC_ERR_CUDA_OOM,    /* device allocation failed */
    FC_ERR_NO_CUDA      /* CUDA op called in a build without CUDA */
} fc_status;

typedef enum fc_dtype { FC_F32 = 0, FC_F64 = 1, FC_BF16 = 2, FC_F16 = 3 } fc_dtype;

/* FCGP float32 matrix-product precision (SPEC section 2). */
typedef enum fc_precision { FC_PREC_HIGHEST = 0, FC_PREC_TF32 = 1, FC_PREC_BF16 = 2 } fc_precision;

/* An algebra, derived at run time from its metric by algebra_rules.h. */
typedef struct fc_algebra {
    int id;          /* index in FC_ALGEBRA_LIST */
    const char *name;
    int n, D, G, P, T;
    int metric[FC_MAX_N];
    unsigned blade[FC_MAX_D];        /* bitmaps, SPEC order */
    unsigned char grade[FC_MAX_D];   /* grade of each component */
    signed char grade_sign[FC_MAX_D];/* s_A */
    int grade_start[FC_MAX_G + 1];   /* components of grade g: [grade_start[g], grade_start[g+1]) */
    unsigned char path_grades[FC_MAX_P][3];
    fc_term term[FC_MAX_T];          /* ordered by (i, k) */
} fc_algebra;

/* The algebra with this id (0 .. FC_NUM_ALGEBRAS-1), NULL for an unknown id. Tables are
 * built once, thread-safely. */
const fc_algebra *fc_algebra_get(int id);
/* The id of the algebra with this metric (length n), or -1. */
int fc_algebra_find(int n, const int *metric);

/* Everything one op call needs. Forward reads x, y, weight and writes out (and norms when
 * normalize and norms != NULL); backward reads grad_out, x, y, weight (and norms when
 * given, else recomputes them) and writes grad_x, grad_y, grad_weight. Any grad pointer
 * may be NULL: that gradient is not computed. The CUDA FCGP backward also reads out, the
 * forward's output, when it is given with the norms (normalize): the norm's gradient is then
 * formed from it instead of from a recomputed product. */
typedef struct fc_args {
    const fc_algebra *alg;
    fc_dtype dtype;          /* of x, y, weight, out and all gradients */
    int64_t B, N_in, N_out;  /* N_out == N_in for sgp */
    int normalize;
    int gate;                /* 1: MVGELU on x and y first (the fused layer); 0: the plain product */
    fc_precision precision;  /* fcgp, float32 only */

    const void *x, *y, *weight;
    void *out;               /* forward: written; FCGP backward: read if non-NULL (with norms) */
    void *norms;             /* forward: written if non-NULL; backward: read if non-NULL */

    const void *grad_out;
    void *grad_x, *grad_y, *grad_weight;

    void *workspace;         /* CUDA: device scratch of fc_*_workspace_cuda() bytes */
    size_t workspace_bytes;
    int device;              /* CUDA device ordinal of every pointer */
} fc_args;

#define FC_NORM_EPS 1e-6

/* The C reference backend (cpu/). float32 and float64. */
fc_status fc_sgp_forward_cpu(const fc_args *a);
fc_status fc_sgp_backward_cpu(const fc_args *a);
fc_status fc_fcgp_forward_cpu(const fc_args *a);
fc_status fc_fcgp_backward_cpu(const fc_args *a);

/* The CUDA backend (cuda/). Stream is a cudaStream_t. In a build without CUDA these
 * return FC_ERR_NO_CUDA. Workspace sizes depend on the shapes and on what a->device is (its
 * multiprocessor count, whether it takes the Hopper FCGP path), never on B for the
 * weight-gradient partials beyond a fixed cap; 0 means none needed. The FCGP backward's also
 * depends on whether grad_x and grad_y are given and 16-byte aligned (it may use them as
 * scratch before writing them): size it with the gradients the call will have. */
size_t fc_sgp_forward_workspace_cuda(const fc_args *a);
size_t fc_sgp_backward_workspace_cuda(const fc_args *a);
size_t fc_fcgp_forward_workspace_cuda(const fc_args *a);
size_t fc_fcgp_backward_workspace_cuda(const fc_args *a);
fc_status fc_sgp_forward_cuda(const fc_args *a, void *stream);
fc_status fc_sgp_backward_cuda(const fc_args *a, void *stream);
fc_status fc_fcgp_forward_cuda(const fc_args *a, void *stream);
fc_status fc_fcgp_backward_cuda(const fc_args *a, void *stream);
/* The Hopper FCGP forward (cuda/fcgp_sm90a.cu): whether this build has its sm_90a code, and
 * its process-wide switch (on >= 0 sets it; returns the state; initially on unless
 * FLASHCLIFFORD_FCGP_SM90 == "0"). */
int fc_fcgp_sm90_compiled(void);
int fc_fcgp_sm90_switch(int on);
/* The Hopper FCGP backward kernels' switch (the same convention; initially on unless
 * FLASHCLIFFORD_FCGP_SM90_BWD == "0"). */
int fc_fcgp_sm90_bwd_switch(int on);
/* The Hopper FCGP forward's norm in its epilogue (the same convention; initially on unless
 * FLASHCLIFFORD_FCGP_FWD_NORM == "0"; off: o, its partials and the finalize pass). */
int fc_fcgp_sm90_fwd_norm_switch(int on);
/* ... and how long (microseconds) a tile there waits for its row block before leaving its o to
 * the block's last tile (us >= 0 sets it; returns it; initially 100 unless
 * FLASHCLIFFORD_FCGP_FWD_NORM_WAIT_US says otherwise). */
long long fc_fcgp_sm90_fwd_norm_wait(long long us);
/* How the Hopper FCGP forward brings W^T (the same convention; initially on, in stage order by
 * bulk copies, unless FLASHCLIFFORD_FCGP_FWD_WBULK == "0"; off: boxes of W^T). */
int fc_fcgp_sm90_fwd_wbulk_switch(int on);
/* The rows of each slice of the Hopper FCGP backward's norm statistics and go^T transpose: rows >=
 * 0 sets it (0 a whole batch chunk, n > 0 n rows in 32-row blocks); returns the setting (initially
 * FLASHCLIFFORD_FCGP_BWD_GO_ROWS, else 0). */
long long fc_fcgp_sm90_bwd_go_rows(long long rows);
/* Whether the Hopper FCGP backward chains its kernels by programmatic dependent launch (the same
 * convention; initially on unless FLASHCLIFFORD_FCGP_BWD_PDL == "0"; off: plain stream order). */
int fc_fcgp_sm90_bwd_pdl_switch(int on);
/* Whether the Hopper FCGP backward's go^T passes move two columns a thread or load (go_rows: at
 * D 8) where N_out is even and the arrays aligned (the same convention; initially on unless
 * FLASHCLIFFORD_FCGP_BWD_GO_PAIRS == "0"): bitwise the same result either way. */
int fc_fcgp_sm90_bwd_go_pairs_switch(int on);
/* How the Hopper FCGP weight gradient is tiled: mode >= 0 sets it (0 by the rule, today the same
 * as 1; 1 one path a tile, gw_pseq_kernel, wherever N_in is a multiple of 128 and N_out of 256,
 * its tiles whole to the least-loaded block by cost where that beats rounds; 2 the path-group
 * kernel everywhere; 3 as 1 always in rounds); returns the setting (initially
 * FLASHCLIFFORD_FCGP_GW_PSEQ's, else 0). */
int fc_fcgp_sm90_gw_pseq(int mode);
/* How the Hopper FCGP backward forms the norm's row statistics and go^T: mode >= 0 sets it (0 by
 * the rule, 1 in one pass a batch block, go_rows, where N_out <= 512, 2 in two passes, norm_stats
 * then go_transpose in the slices of fc_fcgp_sm90_bwd_go_rows); returns the setting (initially
 * FLASHCLIFFORD_FCGP_BWD_GO_FUSED, else 0). */
int fc_fcgp_sm90_bwd_go_fused(int mode);
/* ... and its cluster shape: shape >= 0 sets it (0 by the rule, 1 one CTA, 2 two column tiles,
 * 3 two row tiles); returns the setting (initially FLASHCLIFFORD_FCGP_FWD_CLUSTER, else 0). */
int fc_fcgp_sm90_fwd_cluster(int shape);
/* ... and its component groups at D 8: groups >= 0 sets it (0 by the rule: 2 unless a forced
 * cluster shape or W as stored everywhere asks for one group; 1 every component a CTA, 2 half the
 * components a CTA over twice the columns); returns the setting (initially
 * FLASHCLIFFORD_FCGP_FWD_GROUPS, else 0). */
int fc_fcgp_sm90_fwd_groups(int groups);
/* The launch shape the CUDA SGP takes for a's algebra, dtype, B and N_in on a->device with
 * aligned inputs (diagnostics and tuning): out = threads a row, rows a block, input stages,
 * mode (0 resident, 1 long with shared weights, 2 long), grid, shared-memory bytes. */
fc_status fc_sgp_config_cuda(const fc_args *a, int backward, long long out[6]);
/* Tuning only: later launches of resident rows take `rows` rows a block and `stages` stages
 * where that shape fits (0, 0: the default choice). Process-wide. */
void fc_sgp_shape_override(int rows, int stages);

/* CUDA runtime services for the bindings (cuda/runtime.cu). */
int fc_cuda_compiled(void);                   /* 1 in a CUDA build */
int fc_cuda_device_count(void);               /* 0 when no usable driver/GPU */
int fc_cuda_runtime_version(void);            /* e.g. 13000; 0 without CUDA */
const char *fc_cuda_archs(void);              /* e.g. "sm_80 sm_90 compute_90" */
fc_status fc_cuda_malloc(void **ptr, size_t bytes, int device, void *stream);
fc_status fc_cuda_free(void *ptr, int device, void *stream);
fc_status fc_cuda_get_device(int *device);
fc_status fc_cuda_set_device(int device);
/* Make `consumer` wait for all work queued so far on `producer` (event record + wait). */
fc_status fc_cuda_stream_wait(void *consumer, void *producer, int device);

/* The message of the last FC_ERR_CUDA* status on this thread ("" if none). */
const char *fc_error_message(void);
/* Record a message for this thread (printf-style); used by the kernels' check macro. */
void fc_set_error(const char *fmt, ...);

#ifdef __cplusplus
}
#endif
#endif /* FC_H */
