/* buffer.c — the DeviceBuffer type (see buffer.h).
 *
 * Its __dlpack__ follows the protocol: versioned capsule when the consumer asks for
 * max_version >= (1, 0), legacy otherwise; the consumer's stream waits on ours through an
 * event (skipped for stream=-1); the managed tensor keeps the buffer alive until the
 * consumer calls its deleter, which may run on any thread, even after interpreter exit.
 */
#include "buffer.h"

#include <stdlib.h>
#include <string.h>

typedef struct export_ctx {
    /* exactly one of the two heads is used; both hold the same DLTensor fields */
    DLManagedTensorVersioned versioned;
    DLManagedTensor legacy;
    PyObject *owner;
    int64_t shape[FC_MAX_NDIM];
    int64_t strides[FC_MAX_NDIM];
} export_ctx;

static void release_ctx(export_ctx *ctx)
{
    /* The deleter may run without the GIL (another framework's thread) or after the
     * interpreter is gone; then the buffer is leaked rather than touched. */
    if (Py_IsInitialized()) {
        PyGILState_STATE st = PyGILState_Ensure();
        Py_XDECREF(ctx->owner);
        PyGILState_Release(st);
    }
    free(ctx);
}

static void delete_versioned(DLManagedTensorVersioned *self) { release_ctx((export_ctx *)self->manager_ctx); }
static void delete_legacy(DLManagedTensor *self) { release_ctx((export_ctx *)self->manager_ctx); }

static void capsule_destructor_versioned(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *t = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (t && t->deleter)
            t->deleter(t);
    }
    PyErr_Clear();
}

static void capsule_destructor_legacy(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *t = PyCapsule_GetPointer(cap, "dltensor");
        if (t && t->deleter)
            t->deleter(t);
    }
    PyErr_Clear();
}

static int device_buffer_dtype(int dtype, DLDataType *t)
{
    t->lanes = 1;
    switch (dtype) {
    case FC_F32: t->code = kDLFloat; t->bits = 32; return 0;
    case FC_F64: t->code = kDLFloat; t->bits = 64; return 0;
    case FC_F16: t->code = kDLFloat; t->bits = 16; return 0;
    case FC_BF16: t->code = kDLBfloat; t->bits = 16; return 0;
    }
    return -1;
}

static PyObject *raise_status(fc_status st, const char *what)
{
    if (st == FC_ERR_CUDA_OOM)
        return PyErr_Format(PyExc_MemoryError, "%s: %s", what, fc_error_message());
    return PyErr_Format(PyExc_RuntimeError, "%s: %s", what, fc_error_message());
}

PyObject *fc_device_buffer_new(PyTypeObject *type, int device, int dtype, int ndim, const int64_t *shape,
                               intptr_t stream)
{
    fc_device_buffer *self = PyObject_New(fc_device_buffer, type);
    if (!self)
        return NULL;
    self->data = NULL;
    self->device = device;
    self->dtype = dtype;
    self->ndim = ndim;
    self->stream = stream;
    int64_t numel = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        self->shape[d] = shape[d];
        self->strides[d] = numel;
        numel *= shape[d];
    }
    self->nbytes = (size_t)numel * fc_dtype_size(dtype);
    if (self->nbytes > 0) {
        fc_status st;
        Py_BEGIN_ALLOW_THREADS
        st = fc_cuda_malloc(&self->data, self->nbytes, device, NULL);
        Py_END_ALLOW_THREADS
        if (st != FC_OK) {
            self->data = NULL;
            Py_DECREF(self);
            char what[96];
            snprintf(what, sizeof what, "allocating %zu bytes on cuda:%d", (size_t)numel * fc_dtype_size(dtype),
                     device);
            return raise_status(st, what);
        }
    }
    return (PyObject *)self;
}

static void device_buffer_dealloc(PyObject *op)
{
    fc_device_buffer *self = (fc_device_buffer *)op;
    PyTypeObject *tp = Py_TYPE(op);
    if (self->data)
        fc_cuda_free(self->data, self->device, NULL);
    PyObject_Free(op);
    Py_DECREF(tp);
}

static PyObject *device_buffer_dlpack_device(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fc_device_buffer *self = (fc_device_buffer *)op;
    return Py_BuildValue("(ii)", (int)kDLCUDA, self->device);
}

static PyObject *device_buffer_dlpack(PyObject *op, PyObject *args, PyObject *kwargs)
{
    fc_device_buffer *self = (fc_device_buffer *)op;
    static char *keywords[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", keywords, &stream, &max_version,
                                     &dl_device, &copy))
        return NULL;
    if (dl_device != Py_None) {
        int dt = 0, di = 0;
        if (!PyArg_ParseTuple(dl_device, "ii", &dt, &di))
            return NULL;
        if (dt != kDLCUDA || di != self->device)
            return PyErr_Format(PyExc_BufferError, "DeviceBuffer lives on cuda:%d and cannot be exported to %s",
                                self->device, fc_device_name(dt, di));
    }
    if (copy == Py_True)
        return PyErr_Format(PyExc_BufferError, "DeviceBuffer does not export copies");
    int versioned = 0;
    if (max_version != Py_None) {
        unsigned major = 0, minor = 0;
        if (!PyArg_ParseTuple(max_version, "II", &major, &minor))
            return NULL;
        versioned = major >= 1;
    }
    /* stream handshake: None means the legacy default stream (1), -1 no synchronisation */
    long long consumer = 1;
    if (stream != Py_None) {
        consumer = PyLong_AsLongLong(stream);
        if (consumer == -1 && PyErr_Occurred())
            return NULL;
        if (consumer == 0)
            return PyErr_Format(PyExc_ValueError, "__dlpack__: stream=0 is ambiguous for CUDA (use 1 or 2)");
    }
    if (consumer != -1 && (intptr_t)consumer != self->stream) {
        fc_status st = fc_cuda_stream_wait((void *)(intptr_t)consumer, (void *)self->stream, self->device);
        if (st != FC_OK)
            return raise_status(st, "__dlpack__ stream synchronisation");
    }

    export_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return PyErr_NoMemory();
    DLTensor *t = versioned ? &ctx->versioned.dl_tensor : &ctx->legacy.dl_tensor;
    memcpy(ctx->shape, self->shape, sizeof ctx->shape);
    memcpy(ctx->strides, self->strides, sizeof ctx->strides);
    t->data = self->data;
    t->device.device_type = kDLCUDA;
    t->device.device_id = self->device;
    t->ndim = self->ndim;
    device_buffer_dtype(self->dtype, &t->dtype);
    t->shape = ctx->shape;
    t->strides = ctx->strides;
    t->byte_offset = 0;
    ctx->owner = Py_NewRef(op);
    PyObject *cap;
    if (versioned) {
        ctx->versioned.version.major = FC_DLPACK_MAJOR;
        ctx->versioned.version.minor = FC_DLPACK_MINOR;
        ctx->versioned.manager_ctx = ctx;
        ctx->versioned.deleter = delete_versioned;
        cap = PyCapsule_New(&ctx->versioned, "dltensor_versioned", capsule_destructor_versioned);
    } else {
        ctx->legacy.manager_ctx = ctx;
        ctx->legacy.deleter = delete_legacy;
        cap = PyCapsule_New(&ctx->legacy, "dltensor", capsule_destructor_legacy);
    }
    if (!cap) {
        Py_DECREF(op);
        free(ctx);
    }
    return cap;
}

static PyObject *device_buffer_get_shape(PyObject *op, void *Py_UNUSED(closure))
{
    fc_device_buffer *self = (fc_device_buffer *)op;
    PyObject *t = PyTuple_New(self->ndim);
    if (!t)
        return NULL;
    for (int d = 0; d < self->ndim; ++d) {
        PyObject *v = PyLong_FromLongLong(self->shape[d]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, d, v);
    }
    return t;
}

static PyObject *device_buffer_get_dtype(PyObject *op, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(fc_dtype_name(((fc_device_buffer *)op)->dtype));
}

static PyObject *device_buffer_get_device(PyObject *op, void *Py_UNUSED(closure))
{
    return PyUnicode_FromFormat("cuda:%d", ((fc_device_buffer *)op)->device);
}

static PyObject *device_buffer_get_ptr(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr(((fc_device_buffer *)op)->data);
}

static PyObject *device_buffer_get_nbytes(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(((fc_device_buffer *)op)->nbytes);
}

static PyObject *device_buffer_repr(PyObject *op)
{
    fc_device_buffer *self = (fc_device_buffer *)op;
    char shape[256];
    fc_format_shape(shape, sizeof shape, self->ndim, self->shape);
    return PyUnicode_FromFormat("DeviceBuffer(shape=%s, dtype=%s, device='cuda:%d')", shape,
                                fc_dtype_name(self->dtype), self->device);
}

static PyMethodDef device_buffer_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))device_buffer_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "Export as a DLPack capsule (versioned when max_version >= (1, 0)). The consumer's stream waits on the "
     "stream that produced the contents."},
    {"__dlpack_device__", device_buffer_dlpack_device, METH_NOARGS, "(kDLCUDA, device ordinal)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef device_buffer_getset[] = {
    {"shape", device_buffer_get_shape, NULL, "tuple of sizes", NULL},
    {"dtype", device_buffer_get_dtype, NULL, "dtype name", NULL},
    {"device", device_buffer_get_device, NULL, "'cuda:N'", NULL},
    {"ptr", device_buffer_get_ptr, NULL, "device address", NULL},
    {"nbytes", device_buffer_get_nbytes, NULL, "size in bytes", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot device_buffer_slots[] = {
    {Py_tp_dealloc, device_buffer_dealloc},
    {Py_tp_repr, device_buffer_repr},
    {Py_tp_methods, device_buffer_methods},
    {Py_tp_getset, device_buffer_getset},
    {Py_tp_doc, "A CUDA allocation returned by the ops for CUDA inputs; consume it with torch.from_dlpack, "
                "cupy.from_dlpack or jax.dlpack.from_dlpack (no copy)."},
    {0, NULL},
};

PyType_Spec fc_device_buffer_spec = {
    .name = "flashclifford._C.DeviceBuffer",
    .basicsize = sizeof(fc_device_buffer),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = device_buffer_slots,
};
