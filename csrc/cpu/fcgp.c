/* fcgp.c — the C reference backend of the fully connected geometric product (FCGP),
 * SPEC section 2: out = RMSNorm(sum over terms sign (MVGELU(x)_i MVGELU(y)_k) @ W[path]),
 * and its backward; with fc_args.gate = 0 the MVGELU is the identity (the plain product).
 *
 *   x, y, grad_x, grad_y      (D, B, N_in)
 *   out, grad_out             (D, B, N_out)
 *   weight, grad_weight       (P, N_in, N_out)
 *   norms                     (B, G), r_g = sqrt(q_g + eps)
 *
 * The kernels are written once in fcgp_impl.h and instantiated here for float and double.
 * `precision` (tf32 / bf16 matrix products) is a tensor-core choice: the CPU reference
 * always computes in the full type. The weight gradient is split over output tiles, not
 * batch chunks: each tile sums its rows in order, so it is bitwise the same for any
 * thread count without a partial per chunk (a chunk partial here is a whole P x N_in x
 * N_out weight).
 */
#include "common.h"

#define real float
#define FC_T(name) name##_f32
#include "fcgp_impl.h"
#undef real
#undef FC_T

#define real double
#define FC_T(name) name##_f64
#include "fcgp_impl.h"
#undef real
#undef FC_T

FC_CPU_ENTRY(fc_fcgp_forward_cpu, fcgp_forward, 0)
FC_CPU_ENTRY(fc_fcgp_backward_cpu, fcgp_backward, 0)
