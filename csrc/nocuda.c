/* nocuda.c — the CUDA entry points of fc.h in a build without nvcc: every op says
 * FC_ERR_NO_CUDA, so a CUDA array reaching a CPU-only build is an error, never a slow path. */
#include "fc.h"

size_t fc_sgp_forward_workspace_cuda(const fc_args *a) { (void)a; return 0; }
size_t fc_sgp_backward_workspace_cuda(const fc_args *a) { (void)a; return 0; }
size_t fc_fcgp_forward_workspace_cuda(const fc_args *a) { (void)a; return 0; }
size_t fc_fcgp_backward_workspace_cuda(const fc_args *a) { (void)a; return 0; }
fc_status fc_sgp_forward_cuda(const fc_args *a, void *s) { (void)a; (void)s; return FC_ERR_NO_CUDA; }
fc_status fc_sgp_backward_cuda(const fc_args *a, void *s) { (void)a; (void)s; return FC_ERR_NO_CUDA; }
fc_status fc_fcgp_forward_cuda(const fc_args *a, void *s) { (void)a; (void)s; return FC_ERR_NO_CUDA; }
fc_status fc_fcgp_backward_cuda(const fc_args *a, void *s) { (void)a; (void)s; return FC_ERR_NO_CUDA; }
fc_status fc_sgp_config_cuda(const fc_args *a, int b, long long o[6]) { (void)a; (void)b; (void)o; return FC_ERR_NO_CUDA; }
void fc_sgp_shape_override(int rows, int stages) { (void)rows; (void)stages; }
int fc_fcgp_sm90_compiled(void) { return 0; }
int fc_fcgp_sm90_switch(int on) { (void)on; return 0; }
int fc_fcgp_sm90_bwd_switch(int on) { (void)on; return 0; }
int fc_fcgp_sm90_fwd_norm_switch(int on) { (void)on; return 0; }
long long fc_fcgp_sm90_fwd_norm_wait(long long us) { (void)us; return 0; }
int fc_fcgp_sm90_fwd_wbulk_switch(int on) { (void)on; return 0; }
int fc_fcgp_sm90_bwd_pdl_switch(int on) { (void)on; return 0; }
int fc_fcgp_sm90_bwd_go_pairs_switch(int on) { (void)on; return 0; }
int fc_fcgp_sm90_gw_pseq(int mode) { (void)mode; return 0; }
int fc_fcgp_sm90_bwd_go_fused(int mode) { (void)mode; return 0; }
long long fc_fcgp_sm90_bwd_go_rows(long long rows) { (void)rows; return 0; }
int fc_fcgp_sm90_fwd_cluster(int shape) { (void)shape; return 0; }
int fc_fcgp_sm90_fwd_groups(int groups) { (void)groups; return 0; }

int fc_cuda_compiled(void) { return 0; }
int fc_cuda_device_count(void) { return 0; }
int fc_cuda_runtime_version(void) { return 0; }
const char *fc_cuda_archs(void) { return ""; }
fc_status fc_cuda_malloc(void **p, size_t n, int d, void *s) { (void)p; (void)n; (void)d; (void)s; return FC_ERR_NO_CUDA; }
fc_status fc_cuda_free(void *p, int d, void *s) { (void)p; (void)d; (void)s; return FC_ERR_NO_CUDA; }
fc_status fc_cuda_get_device(int *d) { *d = -1; return FC_ERR_NO_CUDA; }
fc_status fc_cuda_set_device(int d) { (void)d; return FC_ERR_NO_CUDA; }
fc_status fc_cuda_stream_wait(void *c, void *p, int d) { (void)c; (void)p; (void)d; return FC_ERR_NO_CUDA; }
