/* buffer.h — DeviceBuffer: a CUDA allocation that the ops return for CUDA inputs when no
 * out= is given, exported to any framework through __dlpack__ without a copy. */
#ifndef FC_BUFFER_H
#define FC_BUFFER_H

#include "array.h"

typedef struct fc_device_buffer {
    PyObject_HEAD
    void *data;
    size_t nbytes;
    int device;
    int dtype;                   /* fc_dtype */
    int ndim;
    int64_t shape[FC_MAX_NDIM];
    int64_t strides[FC_MAX_NDIM];
    intptr_t stream;             /* the stream whose work produces the contents */
} fc_device_buffer;

extern PyType_Spec fc_device_buffer_spec;

/* A new buffer of this shape (new reference), or NULL with MemoryError / RuntimeError set.
 * type is the module's DeviceBuffer heap type. */
PyObject *fc_device_buffer_new(PyTypeObject *type, int device, int dtype, int ndim, const int64_t *shape,
                               intptr_t stream);

#endif
