/* array.c — DLPack import: any producer (NumPy, PyTorch, CuPy, JAX, our DeviceBuffer)
 * becomes an fc_array.
 *
 * Fast path: a producer type that offers the C exchange API (__dlpack_c_exchange_api__,
 * DLPack 1.3; PyTorch does) lends a borrowed DLTensor without building a capsule, which
 * saves microseconds per argument on every op call. That view comes without the stream
 * handshake of __dlpack__(stream=...): for a CUDA view we ask the producer for its current
 * work stream and the op later makes its launch stream wait for it (fc_array_wait_producers);
 * a producer that cannot say falls back to the capsule. Otherwise the Python protocol:
 * __dlpack_device__, then __dlpack__(stream=..., max_version=(1, 3)), retried without
 * max_version for older producers; the capsule is renamed to used_* and its deleter is
 * called exactly once by fc_array_release, on every path including errors.
 */
#include "array.h"

#include <stdio.h>
#include <string.h>

size_t fc_dtype_size(int dtype)
{
    switch (dtype) {
    case FC_F32: return 4;
    case FC_F64: return 8;
    case FC_BF16:
    case FC_F16: return 2;
    }
    return 0;
}

const char *fc_dtype_name(int dtype)
{
    switch (dtype) {
    case FC_F32: return "float32";
    case FC_F64: return "float64";
    case FC_BF16: return "bfloat16";
    case FC_F16: return "float16";
    }
    return "unknown";
}

const char *fc_dl_dtype_name(DLDataType t)
{
    static _Thread_local char buf[48];
    const char *kind = "unknown";
    switch (t.code) {
    case kDLInt: kind = "int"; break;
    case kDLUInt: kind = "uint"; break;
    case kDLFloat: kind = "float"; break;
    case kDLBfloat: kind = "bfloat"; break;
    case kDLComplex: kind = "complex"; break;
    case kDLBool: kind = "bool"; break;
    }
    if (t.lanes != 1)
        snprintf(buf, sizeof buf, "%s%u x%u", kind, t.bits, t.lanes);
    else
        snprintf(buf, sizeof buf, "%s%u", kind, t.bits);
    return buf;
}

const char *fc_device_name(int device_type, int device_id)
{
    static _Thread_local char buf[48];
    switch (device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: snprintf(buf, sizeof buf, "cuda:%d", device_id); return buf;
    case kDLCUDAHost: return "cuda_host";
    case kDLCUDAManaged: snprintf(buf, sizeof buf, "cuda_managed:%d", device_id); return buf;
    case kDLROCM: snprintf(buf, sizeof buf, "rocm:%d", device_id); return buf;
    }
    snprintf(buf, sizeof buf, "device type %d", device_type);
    return buf;
}

void fc_format_shape(char *buf, size_t size, int ndim, const int64_t *shape)
{
    size_t used = (size_t)snprintf(buf, size, "(");
    for (int d = 0; d < ndim && used < size; ++d)
        used += (size_t)snprintf(buf + used, size - used, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (ndim == 1 && used < size)
        used += (size_t)snprintf(buf + used, size - used, ",");
    if (used < size)
        snprintf(buf + used, size - used, ")");
}

int fc_array_check_contiguous(const fc_array *a)
{
    if (a->contiguous)
        return 0;
    char buf[256];
    fc_format_shape(buf, sizeof buf, a->ndim, a->strides);
    PyErr_Format(PyExc_ValueError, "%s: expected a C-contiguous array, got strides %s (in elements)", a->name, buf);
    return -1;
}

void fc_reraise(PyObject *type, const char *name, const char *what)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    if (tb && ev)
        PyException_SetTraceback(ev, tb);
    PyErr_Format(type, "%s: %s failed: %S", name, what, ev ? ev : Py_None);
    if (ev) {
        PyObject *nt, *nv, *ntb;
        PyErr_Fetch(&nt, &nv, &ntb);
        PyErr_NormalizeException(&nt, &nv, &ntb);
        PyException_SetCause(nv, ev); /* steals ev */
        PyErr_Restore(nt, nv, ntb);
    }
    Py_XDECREF(et);
    Py_XDECREF(tb);
}

int fc_array_overlap(const fc_array *a, const fc_array *b)
{
    if (a->numel == 0 || b->numel == 0 || a->device_type != b->device_type || a->device_id != b->device_id)
        return 0;
    const char *a0 = a->data, *b0 = b->data;
    const char *a1 = a0 + a->numel * (int64_t)((a->dl_dtype.bits + 7) / 8);
    const char *b1 = b0 + b->numel * (int64_t)((b->dl_dtype.bits + 7) / 8);
    return a0 < b1 && b0 < a1;
}

void fc_array_release(fc_array *a)
{
    /* A deleter may run Python code (NumPy's does, ctypes producers too); it must not see
     * the exception we are about to raise. */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (a->versioned) {
        DLManagedTensorVersioned *v = a->versioned;
        a->versioned = NULL;
        if (v->deleter)
            v->deleter(v);
    }
    if (a->legacy) {
        DLManagedTensor *m = a->legacy;
        a->legacy = NULL;
        if (m->deleter)
            m->deleter(m);
    }
    Py_CLEAR(a->borrowed_from);
    PyErr_Restore(et, ev, tb);
}

static int dtype_from_dl(DLDataType t)
{
    if (t.lanes != 1)
        return -1;
    if (t.code == kDLFloat && t.bits == 32)
        return FC_F32;
    if (t.code == kDLFloat && t.bits == 64)
        return FC_F64;
    if (t.code == kDLFloat && t.bits == 16)
        return FC_F16;
    if (t.code == kDLBfloat && t.bits == 16)
        return FC_BF16;
    return -1;
}

/* Copy what the kernels need out of the DLTensor and check it is a C-contiguous array. */
static int fill_view(fc_array *a, const DLTensor *t)
{
    if (t->ndim < 0 || t->ndim > FC_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "%s: expected at most %d dimensions, got %d", a->name, FC_MAX_NDIM,
                     (int)t->ndim);
        return -1;
    }
    if (t->ndim > 0 && t->shape == NULL) {
        PyErr_Format(PyExc_ValueError, "%s: the DLPack tensor has no shape", a->name);
        return -1;
    }
    a->ndim = t->ndim;
    a->numel = 1;
    for (int d = 0; d < t->ndim; ++d) {
        int64_t s = t->shape[d];
        if (s < 0) {
            PyErr_Format(PyExc_ValueError, "%s: negative size %lld in dimension %d", a->name, (long long)s, d);
            return -1;
        }
        a->shape[d] = s;
        if (s != 0 && a->numel > INT64_MAX / s) {
            PyErr_Format(PyExc_ValueError, "%s: the number of elements overflows int64", a->name);
            return -1;
        }
        a->numel *= s;
    }
    a->dl_dtype = t->dtype;
    a->dtype = dtype_from_dl(t->dtype);
    a->device_type = t->device.device_type;
    a->device_id = t->device.device_id;
    a->contiguous = 1;
    if (t->strides) {
        int64_t expected = 1;
        for (int d = t->ndim - 1; d >= 0; --d) {
            a->strides[d] = t->strides[d];
            if (t->shape[d] != 1 && t->strides[d] != expected && a->numel > 1)
                a->contiguous = 0;
            expected *= t->shape[d];
        }
    }
    if (a->numel > 0 && t->data == NULL) {
        PyErr_Format(PyExc_ValueError, "%s: data pointer is NULL for a non-empty array", a->name);
        return -1;
    }
    a->data = t->data ? (char *)t->data + t->byte_offset : NULL;
    return 0;
}

static PyObject *str_exchange_api, *str_dlpack, *str_dlpack_device, *str_stream, *str_max_version,
    *max_version_value;

static int init_strings(void)
{
    if (str_exchange_api)
        return 0;
    str_exchange_api = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
    str_dlpack = PyUnicode_InternFromString("__dlpack__");
    str_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
    str_stream = PyUnicode_InternFromString("stream");
    str_max_version = PyUnicode_InternFromString("max_version");
    max_version_value = Py_BuildValue("(ii)", FC_DLPACK_MAJOR, FC_DLPACK_MINOR);
    if (!str_exchange_api || !str_dlpack || !str_dlpack_device || !str_stream || !str_max_version ||
        !max_version_value)
        return -1;
    return 0;
}

/* A raw cudaStream_t as we compare and use it: cudaStreamLegacy (0x1) and NULL are both the
 * legacy default stream (NULL is legacy in PyTorch and in our build, which does not use
 * --default-stream per-thread); cudaStreamPerThread (0x2) and real streams stay as they are. */
static intptr_t canonical_stream(intptr_t s) { return s == 1 ? 0 : s; }

/* The exchange-API fast path. Returns 1 when it produced a view, 0 to fall back. */
static int import_exchange(PyObject *obj, fc_array *a, DLTensor *t)
{
    PyObject *cap = PyObject_GetAttr((PyObject *)Py_TYPE(obj), str_exchange_api);
    if (cap == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = 0;
    if (PyCapsule_IsValid(cap, "dlpack_exchange_api")) {
        const DLPackExchangeAPI *api = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
        if (api && api->header.version.major == 1 && api->dltensor_from_py_object_no_sync) {
            if (api->dltensor_from_py_object_no_sync(obj, t) == 0) {
                ok = 1;
                int dt = t->device.device_type;
                if (dt == kDLCUDA || dt == kDLCUDAManaged) {
                    /* No ordering was done for us: the producer may still be writing the tensor on
                     * its current stream. Without that stream, __dlpack__(stream=...) orders it. */
                    void *s = NULL;
                    if (api->current_work_stream && api->current_work_stream(dt, t->device.device_id, &s) == 0) {
                        a->wait_producer = 1;
                        a->producer_stream = canonical_stream((intptr_t)s);
                    } else {
                        PyErr_Clear();
                        ok = 0;
                    }
                }
                if (ok)
                    a->borrowed_from = Py_NewRef(obj);
            } else {
                PyErr_Clear(); /* the producer refused (e.g. a tensor that needs grad): use __dlpack__ */
            }
        }
    }
    Py_DECREF(cap);
    return ok;
}

/* distinct producer streams remembered per call (an op has at most 10 arrays; beyond this a
 * stream is merely waited for twice) */
#define FC_MAX_WAITS 16

fc_status fc_array_wait_producers(const fc_array *arrs, int n, intptr_t stream, int device, int *failed)
{
    /* All torch inputs of one call share torch's current stream: one event, not one per array. */
    intptr_t done[FC_MAX_WAITS];
    int n_done = 0;
    stream = canonical_stream(stream);
    for (int i = 0; i < n; ++i) {
        if (!arrs[i].wait_producer || arrs[i].producer_stream == stream)
            continue;
        int seen = 0;
        for (int j = 0; j < n_done && !seen; ++j)
            seen = done[j] == arrs[i].producer_stream;
        if (seen)
            continue;
        fc_status st = fc_cuda_stream_wait((void *)stream, (void *)arrs[i].producer_stream, device);
        if (st != FC_OK) {
            *failed = i;
            return st;
        }
        if (n_done < FC_MAX_WAITS)
            done[n_done++] = arrs[i].producer_stream;
    }
    return FC_OK;
}

static int call_dlpack(PyObject *obj, fc_array *a, int device_type, intptr_t stream, PyObject **capsule)
{
    PyObject *args[3] = {obj, NULL, NULL};
    PyObject *kwnames = NULL, *res = NULL;
    /* CPU producers (NumPy) accept only stream=None; CUDA ones get the stream we launch on,
     * 1 being the protocol's name for the legacy default stream. */
    PyObject *stream_obj = NULL;
    if (device_type == kDLCUDA) {
        stream_obj = PyLong_FromSsize_t(stream == 0 ? 1 : (Py_ssize_t)stream);
        if (!stream_obj)
            return -1;
        args[1] = stream_obj;
        args[2] = max_version_value;
        kwnames = Py_BuildValue("(OO)", str_stream, str_max_version);
    } else {
        args[1] = max_version_value;
        kwnames = Py_BuildValue("(O)", str_max_version);
    }
    if (!kwnames) {
        Py_XDECREF(stream_obj);
        return -1;
    }
    PyObject *meth = PyObject_GetAttr(obj, str_dlpack);
    if (meth) {
        res = PyObject_Vectorcall(meth, args + 1, 0, kwnames);
        if (!res && PyErr_ExceptionMatches(PyExc_TypeError)) {
            /* a producer from before DLPack 1.0 does not know max_version */
            PyErr_Clear();
            Py_DECREF(kwnames);
            kwnames = stream_obj ? Py_BuildValue("(O)", str_stream) : NULL;
            res = PyObject_Vectorcall(meth, args + 1, 0, stream_obj ? kwnames : NULL);
        }
        Py_DECREF(meth);
    }
    Py_XDECREF(kwnames);
    Py_XDECREF(stream_obj);
    if (!res) {
        fc_reraise(PyExc_TypeError, a->name, "its __dlpack__()");
        return -1;
    }
    *capsule = res;
    return 0;
}

int fc_array_import(PyObject *obj, const char *name, intptr_t stream, fc_array *a)
{
    memset(a, 0, sizeof *a);
    a->name = name;
    a->dtype = -1;
    if (init_strings() < 0)
        return -1;
    DLTensor t;
    if (import_exchange(obj, a, &t))
        return fill_view(a, &t) < 0 ? (fc_array_release(a), -1) : 0;

    PyObject *dev = PyObject_CallMethodNoArgs(obj, str_dlpack_device);
    if (!dev) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "%s: expected an array with __dlpack__ (NumPy, PyTorch, CuPy, JAX), got %.200s", name,
                         Py_TYPE(obj)->tp_name);
        } else {
            fc_reraise(PyExc_TypeError, name, "its __dlpack_device__()");
        }
        return -1;
    }
    int device_type = 0, device_id = 0;
    if (!PyTuple_Check(dev) || !PyArg_ParseTuple(dev, "ii", &device_type, &device_id)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: __dlpack_device__() returned %R, expected (device_type, device_id)",
                     name, dev);
        Py_DECREF(dev);
        return -1;
    }
    Py_DECREF(dev);

    /* PyTorch exports a CUDA tensor only while its device is current. */
    int saved_device = -1;
    if (device_type == kDLCUDA && fc_cuda_device_count() > device_id && fc_cuda_get_device(&saved_device) == FC_OK &&
        saved_device != device_id)
        fc_cuda_set_device(device_id);
    else
        saved_device = -1;
    PyObject *capsule = NULL;
    int rc = call_dlpack(obj, a, device_type, stream, &capsule);
    if (saved_device >= 0)
        fc_cuda_set_device(saved_device);
    if (rc < 0)
        return -1;

    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        a->versioned = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (PyCapsule_SetName(capsule, "used_dltensor_versioned") < 0) {
            a->versioned = NULL;
            Py_DECREF(capsule);
            return -1;
        }
        Py_DECREF(capsule);
        if (a->versioned == NULL) {
            PyErr_Format(PyExc_ValueError, "%s: __dlpack__() returned a capsule with a NULL tensor", name);
            return -1;
        }
        if (a->versioned->version.major != FC_DLPACK_MAJOR) {
            PyErr_Format(PyExc_TypeError, "%s: DLPack major version %u is not supported (expected %d)", name,
                         a->versioned->version.major, FC_DLPACK_MAJOR);
            fc_array_release(a);
            return -1;
        }
        a->readonly = (a->versioned->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
        t = a->versioned->dl_tensor;
    } else if (PyCapsule_IsValid(capsule, "dltensor")) {
        a->legacy = PyCapsule_GetPointer(capsule, "dltensor");
        if (PyCapsule_SetName(capsule, "used_dltensor") < 0) {
            a->legacy = NULL;
            Py_DECREF(capsule);
            return -1;
        }
        Py_DECREF(capsule);
        if (a->legacy == NULL) {
            PyErr_Format(PyExc_ValueError, "%s: __dlpack__() returned a capsule with a NULL tensor", name);
            return -1;
        }
        t = a->legacy->dl_tensor;
    } else {
        PyErr_Format(PyExc_TypeError, "%s: __dlpack__() returned %.200s, not an unused DLPack capsule", name,
                     Py_TYPE(capsule)->tp_name);
        Py_DECREF(capsule);
        return -1;
    }
    if (t.device.device_type != device_type || t.device.device_id != device_id) {
        PyErr_Format(PyExc_ValueError, "%s: __dlpack_device__() says %s but the tensor is on %s", name,
                     fc_device_name(device_type, device_id),
                     fc_device_name(t.device.device_type, t.device.device_id));
        fc_array_release(a);
        return -1;
    }
    if (fill_view(a, &t) < 0) {
        fc_array_release(a);
        return -1;
    }
    return 0;
}
