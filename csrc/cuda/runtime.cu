/* runtime.cu — the CUDA services of fc.h for the bindings: device queries, allocation on a
 * stream, device switching and stream ordering. cudart is linked statically, so on a
 * machine without a driver these report "no GPU" instead of failing to load. */
#include <mutex>

#include "common.cuh"

#ifndef FC_CUDA_ARCHS
#define FC_CUDA_ARCHS "unknown"
#endif

namespace fc {

const DeviceFacts &device_facts(int device)
{
    static DeviceFacts facts[64];
    static std::once_flag once[64];
    static const DeviceFacts fallback{1, 48 * 1024, 64 * 1024, 65536, 1024, 0, 0};
    if (device < 0 || device >= 64)
        return fallback;
    std::call_once(once[device], [device] {
        DeviceFacts f = fallback;
        const struct {
            cudaDeviceAttr attr;
            int *to;
        } want[] = {{cudaDevAttrMultiProcessorCount, &f.sms},
                    {cudaDevAttrMaxSharedMemoryPerBlockOptin, &f.smem_per_block},
                    {cudaDevAttrMaxSharedMemoryPerMultiprocessor, &f.smem_per_sm},
                    {cudaDevAttrMaxRegistersPerMultiprocessor, &f.regs_per_sm},
                    {cudaDevAttrMaxThreadsPerMultiProcessor, &f.threads_per_sm},
                    {cudaDevAttrComputeCapabilityMajor, &f.cc_major},
                    {cudaDevAttrComputeCapabilityMinor, &f.cc_minor}};
        for (const auto &w : want) {
            int v = 0;
            if (cudaDeviceGetAttribute(&v, w.attr, device) == cudaSuccess && v > 0)
                *w.to = v;
            else
                cudaGetLastError(); /* keep the conservative fallback */
        }
        facts[device] = f;
    });
    return facts[device];
}

int sm_count(int device) { return device_facts(device).sms; }

} // namespace fc

extern "C" {

int fc_cuda_compiled(void) { return 1; }

int fc_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* no driver or no GPU: not an error for the caller */
        return 0;
    }
    return n;
}

int fc_cuda_runtime_version(void) { return CUDART_VERSION; }

const char *fc_cuda_archs(void) { return FC_CUDA_ARCHS; }

/* stream == NULL: a plain cudaMalloc (DeviceBuffer, freed whenever Python lets go of it);
 * otherwise stream-ordered, so scratch is freed after the kernels that use it. */
fc_status fc_cuda_malloc(void **ptr, size_t bytes, int device, void *stream)
{
    fc::DeviceGuard guard(device);
    if (guard.status != FC_OK)
        return guard.status;
    *ptr = nullptr;
    if (stream)
        FC_CUDA_CHECK(cudaMallocAsync(ptr, bytes, (cudaStream_t)stream));
    else
        FC_CUDA_CHECK(cudaMalloc(ptr, bytes));
    return FC_OK;
}

fc_status fc_cuda_free(void *ptr, int device, void *stream)
{
    fc::DeviceGuard guard(device);
    if (guard.status != FC_OK)
        return guard.status;
    if (stream)
        FC_CUDA_CHECK(cudaFreeAsync(ptr, (cudaStream_t)stream));
    else
        FC_CUDA_CHECK(cudaFree(ptr));
    return FC_OK;
}

fc_status fc_cuda_get_device(int *device)
{
    FC_CUDA_CHECK(cudaGetDevice(device));
    return FC_OK;
}

fc_status fc_cuda_set_device(int device)
{
    FC_CUDA_CHECK(cudaSetDevice(device));
    return FC_OK;
}

fc_status fc_cuda_stream_wait(void *consumer, void *producer, int device)
{
    fc::DeviceGuard guard(device);
    if (guard.status != FC_OK)
        return guard.status;
    cudaEvent_t ev;
    FC_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cudaError_t e = cudaEventRecord(ev, (cudaStream_t)producer);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent((cudaStream_t)consumer, ev, 0);
    cudaEventDestroy(ev); /* released once the wait is satisfied */
    if (e != cudaSuccess)
        return fc::cuda_fail(e, __FILE__, __LINE__, "cudaStreamWaitEvent");
    return FC_OK;
}

} // extern "C"
