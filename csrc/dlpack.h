/* dlpack.h — the DLPack ABI (version 1.3) as this project consumes and produces it.
 *
 * Declared here from the published protocol (data-apis DLPack): the structs are an ABI, so
 * their layout must not change. Only what flashclifford uses is declared.
 */
#ifndef FC_DLPACK_H
#define FC_DLPACK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FC_DLPACK_MAJOR 1
#define FC_DLPACK_MINOR 3

typedef struct { uint32_t major, minor; } DLPackVersion;

typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLROCM = 10,
    kDLCUDAManaged = 13,
} DLDeviceType;

typedef struct { int32_t device_type; int32_t device_id; } DLDevice;

typedef enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 } DLDataTypeCode;

typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL means compact row-major (before 1.2) */
    uint64_t byte_offset;
} DLTensor;

/* The unversioned (0.x) managed tensor, capsule name "dltensor". */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1ULL << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1ULL << 1)

/* The versioned (1.x) managed tensor, capsule name "dltensor_versioned". */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* The C exchange API (1.2/1.3): a function table found on the producer's type as the
 * capsule attribute __dlpack_c_exchange_api__ named "dlpack_exchange_api". */
typedef struct DLPackExchangeAPIHeader {
    DLPackVersion version;
    struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;

typedef struct DLPackExchangeAPI {
    DLPackExchangeAPIHeader header;
    void *managed_tensor_allocator;
    int (*managed_tensor_from_py_object_no_sync)(void *py_object, DLManagedTensorVersioned **out);
    void *managed_tensor_to_py_object_no_sync;
    /* borrowed view, valid while py_object lives; may be NULL */
    int (*dltensor_from_py_object_no_sync)(void *py_object, DLTensor *out);
    int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
} DLPackExchangeAPI;

#ifdef __cplusplus
}
#endif
#endif /* FC_DLPACK_H */
