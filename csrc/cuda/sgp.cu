/* sgp.cu — the extern "C" entry points of the CUDA SGP (fc.h): pick the algebra's
 * instantiation (sgp_<id>.cu) and run it on the caller's stream and device. The kernels
 * and their design are in sgp_kernels.cuh, the launch shapes in sgp_launch.cuh. */
#include "sgp_launch.cuh"

namespace {

template <class R, class F> R by_algebra(const fc_args *a, R bad, F &&f)
{
    switch (a->alg->id) {
#define FC_CASE(id_, ...) \
    case id_:             \
        return f(fc::sgp::Entry<id_>{});
        FC_ALGEBRA_LIST(FC_CASE)
#undef FC_CASE
    }
    return bad;
}

} // namespace

extern "C" {

size_t fc_sgp_forward_workspace_cuda(const fc_args *a)
{
    (void)a;
    return 0;
}

size_t fc_sgp_backward_workspace_cuda(const fc_args *a)
{
    return by_algebra<size_t>(a, 0, [&](auto e) { return decltype(e)::workspace(a); });
}

fc_status fc_sgp_forward_cuda(const fc_args *a, void *stream)
{
    if (a->B == 0)
        return FC_OK;
    fc::DeviceGuard guard(a->device);
    if (guard.status != FC_OK)
        return guard.status;
    return by_algebra<fc_status>(a, FC_ERR_TYPE, [&](auto e) { return decltype(e)::forward(a, (cudaStream_t)stream); });
}

fc_status fc_sgp_config_cuda(const fc_args *a, int backward, long long out[6])
{
    fc::DeviceGuard guard(a->device);
    if (guard.status != FC_OK)
        return guard.status;
    return by_algebra<fc_status>(a, FC_ERR_TYPE, [&](auto e) { return decltype(e)::config(a, backward, out); });
}

void fc_sgp_shape_override(int rows, int stages) { fc::sgp::set_shape_override(rows, stages); }

fc_status fc_sgp_backward_cuda(const fc_args *a, void *stream)
{
    fc::DeviceGuard guard(a->device);
    if (guard.status != FC_OK)
        return guard.status;
    return by_algebra<fc_status>(a, FC_ERR_TYPE, [&](auto e) { return decltype(e)::backward(a, (cudaStream_t)stream); });
}

} // extern "C"
