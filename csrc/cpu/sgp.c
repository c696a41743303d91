/* sgp.c — the C reference backend of the weighted geometric product (SGP), SPEC section 2:
 * out = RMSNorm(sum over terms sign w[:, path] MVGELU(x)_i MVGELU(y)_k), and its backward;
 * with fc_args.gate = 0 the MVGELU is the identity (the plain product).
 *
 *   x, y, grad_x, grad_y, out, grad_out   (D, B, N)
 *   weight, grad_weight                   (N, P)
 *   norms                                 (B, G), r_g = sqrt(q_g + eps)
 *
 * The kernels are written once in sgp_impl.h and instantiated here for float and double
 * (float32 data is computed in float arithmetic). The weight gradient is summed over
 * FC_CHUNKS batch chunks in a fixed order, so it is bitwise the same for any thread count.
 */
#include "common.h"

#define real float
#define FC_T(name) name##_f32
#include "sgp_impl.h"
#undef real
#undef FC_T

#define real double
#define FC_T(name) name##_f64
#include "sgp_impl.h"
#undef real
#undef FC_T

FC_CPU_ENTRY(fc_sgp_forward_cpu, sgp_forward, 1)
FC_CPU_ENTRY(fc_sgp_backward_cpu, sgp_backward, 1)
