/* array.h — a plain C view of an array received through DLPack, and the helpers that
 * validate it. The view owns what it consumed: fc_array_release calls the producer's
 * deleter exactly once (or drops the reference of a borrowed exchange-API view). */
#ifndef FC_ARRAY_H
#define FC_ARRAY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "dlpack.h"
#include "fc.h"

#define FC_MAX_NDIM 16

typedef struct fc_array {
    const char *name;        /* the argument name, for messages */
    void *data;              /* data + byte_offset */
    int ndim;
    int64_t shape[FC_MAX_NDIM];
    int64_t numel;
    int dtype;               /* fc_dtype, or -1 when not a float type we compute */
    DLDataType dl_dtype;
    int device_type;         /* kDLCPU, kDLCUDA, ... */
    int device_id;
    int readonly;
    int contiguous;          /* C-contiguous; checked by the caller after the shape */
    int64_t strides[FC_MAX_NDIM];
    /* A view lent by the exchange API comes with no stream ordering: the producer may still be
     * writing it on producer_stream (a cudaStream_t, 0 = legacy default), so the launch stream
     * must wait for that stream first (fc_array_wait_producers). */
    int wait_producer;
    intptr_t producer_stream;
    /* ownership: at most one is set */
    PyObject *borrowed_from;
    DLManagedTensor *legacy;
    DLManagedTensorVersioned *versioned;
} fc_array;

/* Import obj (anything with __dlpack__). stream is the CUDA stream the caller will use,
 * handed to the producer for ordering (0 = legacy default). Returns 0, or -1 with an
 * exception set and nothing owned. */
int fc_array_import(PyObject *obj, const char *name, intptr_t stream, fc_array *a);
void fc_array_release(fc_array *a);
/* Make `stream` (the launch stream, 0 = legacy default) wait for the producer streams recorded
 * in arrs[0..n) (those with wait_producer), each distinct stream once. Call after validation,
 * before the first launch; no Python, so the GIL may be released. FC_OK, or the status of the
 * failed wait with *failed = its index in arrs. */
fc_status fc_array_wait_producers(const fc_array *arrs, int n, intptr_t stream, int device, int *failed);

size_t fc_dtype_size(int dtype);
const char *fc_dtype_name(int dtype);
/* Name of a DLPack dtype for messages, e.g. "int64" (static buffer per thread). */
const char *fc_dl_dtype_name(DLDataType t);
/* "cpu", "cuda:1", ... (static buffer per thread). */
const char *fc_device_name(int device_type, int device_id);
/* Write "(8, 4096, 512)" into buf. */
void fc_format_shape(char *buf, size_t size, int ndim, const int64_t *shape);
/* Replace the current exception by `type`("name: what failed: <original>"), chained. */
void fc_reraise(PyObject *type, const char *name, const char *what);
/* 0, or -1 with ValueError when a is not C-contiguous. */
int fc_array_check_contiguous(const fc_array *a);
/* 1 when the byte ranges of a and b intersect. */
int fc_array_overlap(const fc_array *a, const fc_array *b);

#endif /* FC_ARRAY_H */
