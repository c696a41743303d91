/* bind_ops.c — parse -> validate -> dispatch -> status to exception, for sgp and fcgp,
 * forward and backward. One code path serves the four entry points; they differ only in
 * which arrays they take (op_spec).
 *
 * Every argument is checked before any kernel runs (SPEC section 5): TypeError for types
 * and dtypes, ValueError for shapes, sizes and algebra, RuntimeError for devices,
 * MemoryError for out-of-memory. Messages name the argument, what was expected and what
 * was given. The GIL is released while a kernel computes or launches.
 */
#include "bind_ops.h"

#include <string.h>

#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL fc_numpy_api
#define NO_IMPORT_ARRAY
#include <numpy/arrayobject.h>

#include "buffer.h"

enum { OP_SGP = 0, OP_FCGP = 1 };

/* The arrays of one call. Inputs: x, y, weight (+ grad_out); outputs: out (forward) or
 * grad_x, grad_y, grad_weight (backward); norms is an output of forward and an input of
 * backward, as is out for the FCGP backward (the forward's output, read with the norms so that
 * the CUDA backward needs no recomputed product); workspace is CUDA scratch. */
enum { A_X, A_Y, A_W, A_GOUT, A_OUT, A_GX, A_GY, A_GW, A_NORMS, A_WS, A_COUNT };
static const char *const arg_names[A_COUNT] = {"x", "y", "weight", "grad_out", "out",
                                                "grad_x", "grad_y", "grad_weight", "norms", "workspace"};

typedef struct op_call {
    int op, backward;
    const fc_algebra *alg;
    int normalize, gate, precision;
    intptr_t stream;
    PyObject *obj[A_COUNT];      /* borrowed: the arguments as given (NULL / None when absent) */
    PyObject *result[A_COUNT];   /* owned: the objects returned for outputs */
    fc_array arr[A_COUNT];
    int have[A_COUNT];
    int64_t B, N_in, N_out;
    int device_type, device_id, dtype;
} op_call;

static fc_module_state *state_of(PyObject *module) { return (fc_module_state *)PyModule_GetState(module); }

static int compute_dtype(int dtype) { return dtype == FC_F64 ? FC_F64 : FC_F32; }

static int is_output(int k, int backward)
{
    if (k == A_NORMS)
        return !backward;
    return backward ? (k == A_GX || k == A_GY || k == A_GW) : k == A_OUT;
}

static int raise_status(PyObject *module, fc_status st)
{
    const char *msg = fc_error_message();
    switch (st) {
    case FC_OK: return 0;
    case FC_ERR_VALUE: PyErr_SetString(PyExc_ValueError, msg); break;
    case FC_ERR_TYPE: PyErr_SetString(PyExc_TypeError, msg); break;
    case FC_ERR_NOMEM: PyErr_NoMemory(); break;
    case FC_ERR_CUDA_OOM: PyErr_Format(PyExc_MemoryError, "CUDA out of memory: %s", msg); break;
    case FC_ERR_NO_CUDA:
        PyErr_SetString(PyExc_RuntimeError, "flashclifford was built without CUDA");
        break;
    case FC_ERR_CUDA:
    default: PyErr_SetString(state_of(module)->cuda_error, msg[0] ? msg : "CUDA error"); break;
    }
    return -1;
}

/* A failed wait for argument k's producer stream: CudaError (a RuntimeError) naming both streams. */
static int raise_wait_status(PyObject *module, fc_status st, const op_call *c, int k)
{
    const char *msg = fc_error_message();
    PyObject *type = st == FC_ERR_CUDA_OOM ? PyExc_MemoryError
                     : st == FC_ERR_NO_CUDA ? PyExc_RuntimeError
                                            : state_of(module)->cuda_error;
    PyErr_Format(type, "%s: making stream 0x%zx wait for the producer's stream 0x%zx failed: %s", arg_names[k],
                 (size_t)c->stream, (size_t)c->arr[k].producer_stream, msg[0] ? msg : "CUDA error");
    return -1;
}

/* Expected shape of argument k, given the validated x and weight. */
static int expected_shape(const op_call *c, int k, int64_t *shape)
{
    const fc_array *x = &c->arr[A_X];
    const int P = c->alg->P;
    switch (k) {
    case A_Y:
    case A_GX:
    case A_GY:
        memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
        return x->ndim;
    case A_OUT:
    case A_GOUT:
        memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
        shape[x->ndim - 1] = c->N_out;
        return x->ndim;
    case A_W:
    case A_GW:
        if (c->op == OP_SGP) {
            shape[0] = c->N_in;
            shape[1] = P;
            return 2;
        }
        shape[0] = P;
        shape[1] = c->N_in;
        shape[2] = c->N_out;
        return 3;
    case A_NORMS:
        shape[0] = c->B;
        shape[1] = c->alg->G;
        return 2;
    }
    return -1;
}

static int check_shape(const op_call *c, int k)
{
    int64_t want[FC_MAX_NDIM];
    int nd = expected_shape(c, k, want);
    const fc_array *a = &c->arr[k];
    int ok = nd == a->ndim;
    for (int d = 0; ok && d < nd; ++d)
        ok = want[d] == a->shape[d];
    if (ok)
        return fc_array_check_contiguous(a);
    char ws[256], gs[256];
    fc_format_shape(ws, sizeof ws, nd, want);
    fc_format_shape(gs, sizeof gs, a->ndim, a->shape);
    PyErr_Format(PyExc_ValueError, "%s: expected shape %s for %s %s, got %s", arg_names[k], ws, c->alg->name,
                 c->op == OP_SGP ? "SGP" : "FCGP", gs);
    return -1;
}

static int check_dtype_device(const op_call *c, int k)
{
    const fc_array *a = &c->arr[k];
    int want = k == A_NORMS ? compute_dtype(c->dtype) : c->dtype;
    if (k != A_WS && a->dtype != want) {
        PyErr_Format(PyExc_TypeError, "%s: expected dtype %s (%s), got %s", arg_names[k], fc_dtype_name(want),
                     k == A_NORMS ? "the compute type of x" : "the dtype of x", fc_dl_dtype_name(a->dl_dtype));
        return -1;
    }
    if (a->device_type != c->device_type || a->device_id != c->device_id) {
        char xdev[48];
        snprintf(xdev, sizeof xdev, "%s", fc_device_name(c->device_type, c->device_id));
        PyErr_Format(PyExc_RuntimeError, "%s: expected device %s (the device of x), got %s", arg_names[k], xdev,
                     fc_device_name(a->device_type, a->device_id));
        return -1;
    }
    return 0;
}

/* x fixes the algebra's D, the batch, N_in, the dtype and the device. */
static int validate_x(op_call *c)
{
    const fc_array *x = &c->arr[A_X];
    char gs[256];
    if (x->dtype < 0) {
        PyErr_Format(PyExc_TypeError, "x: expected dtype float32, float64, bfloat16 or float16, got %s",
                     fc_dl_dtype_name(x->dl_dtype));
        return -1;
    }
    if (x->ndim < 2 || x->shape[0] != c->alg->D) {
        fc_format_shape(gs, sizeof gs, x->ndim, x->shape);
        PyErr_Format(PyExc_ValueError, "x: expected shape (%d, *batch, N) for %s (components first), got %s",
                     c->alg->D, c->alg->name, gs);
        return -1;
    }
    if (fc_array_check_contiguous(x) < 0)
        return -1;
    c->dtype = x->dtype;
    c->device_type = x->device_type;
    c->device_id = x->device_id;
    c->B = 1;
    for (int d = 1; d < x->ndim - 1; ++d)
        c->B *= x->shape[d];
    c->N_in = x->shape[x->ndim - 1];
    if (c->device_type == kDLCPU) {
        if (c->dtype != FC_F32 && c->dtype != FC_F64) {
            PyErr_Format(PyExc_TypeError, "x: dtype %s is not supported by the CPU backend (float32, float64)",
                         fc_dtype_name(c->dtype));
            return -1;
        }
    } else if (c->device_type == kDLCUDA) {
        if (!fc_cuda_compiled()) {
            PyErr_SetString(PyExc_RuntimeError,
                            "x: is a CUDA array but flashclifford was built without CUDA (CPU-only build)");
            return -1;
        }
        if (c->device_id < 0 || c->device_id >= fc_cuda_device_count()) {
            PyErr_Format(PyExc_RuntimeError, "x: is on cuda:%d but no such GPU is usable (%d visible)",
                         c->device_id, fc_cuda_device_count());
            return -1;
        }
    } else {
        PyErr_Format(PyExc_RuntimeError, "x: arrays on %s are not supported (cpu or cuda)",
                     fc_device_name(c->device_type, c->device_id));
        return -1;
    }
    return 0;
}

static int import_arg(op_call *c, int k)
{
    if (fc_array_import(c->obj[k], arg_names[k], c->stream, &c->arr[k]) < 0)
        return -1;
    c->have[k] = 1;
    return 0;
}

/* Allocate output k: a NumPy array on the CPU, a DeviceBuffer on CUDA. */
static int allocate_output(PyObject *module, op_call *c, int k)
{
    int64_t shape[FC_MAX_NDIM];
    int nd = expected_shape(c, k, shape);
    int dtype = k == A_NORMS ? compute_dtype(c->dtype) : c->dtype;
    PyObject *o;
    void *data;
    if (c->device_type == kDLCPU) {
        npy_intp dims[FC_MAX_NDIM];
        for (int d = 0; d < nd; ++d)
            dims[d] = (npy_intp)shape[d];
        o = PyArray_SimpleNew(nd, dims, dtype == FC_F64 ? NPY_FLOAT64 : NPY_FLOAT32);
        if (!o)
            return -1;
        data = PyArray_DATA((PyArrayObject *)o);
    } else {
        o = fc_device_buffer_new(state_of(module)->device_buffer_type, c->device_id, dtype, nd, shape, c->stream);
        if (!o)
            return -1;
        data = ((fc_device_buffer *)o)->data;
    }
    fc_array *a = &c->arr[k];
    memset(a, 0, sizeof *a);
    a->name = arg_names[k];
    a->data = data;
    a->ndim = nd;
    a->numel = 1;
    for (int d = 0; d < nd; ++d) {
        a->shape[d] = shape[d];
        a->numel *= shape[d];
    }
    a->dtype = dtype;
    a->dl_dtype.code = dtype == FC_BF16 ? kDLBfloat : kDLFloat;
    a->dl_dtype.bits = (uint8_t)(8 * fc_dtype_size(dtype));
    a->dl_dtype.lanes = 1;
    a->device_type = c->device_type;
    a->device_id = c->device_id;
    c->result[k] = o;
    return 0;
}

static size_t workspace_needed(const op_call *c, const fc_args *args)
{
    if (c->device_type != kDLCUDA)
        return 0;
    if (c->op == OP_SGP)
        return c->backward ? fc_sgp_backward_workspace_cuda(args) : fc_sgp_forward_workspace_cuda(args);
    return c->backward ? fc_fcgp_backward_workspace_cuda(args) : fc_fcgp_forward_workspace_cuda(args);
}

static fc_status launch(const op_call *c, const fc_args *args)
{
    if (c->device_type == kDLCPU) {
        if (c->op == OP_SGP)
            return c->backward ? fc_sgp_backward_cpu(args) : fc_sgp_forward_cpu(args);
        return c->backward ? fc_fcgp_backward_cpu(args) : fc_fcgp_forward_cpu(args);
    }
    void *s = (void *)c->stream;
    if (c->op == OP_SGP)
        return c->backward ? fc_sgp_backward_cuda(args, s) : fc_sgp_forward_cuda(args, s);
    return c->backward ? fc_fcgp_backward_cuda(args, s) : fc_fcgp_forward_cuda(args, s);
}

/* The algebra with the id `obj`, any integer-like object (__index__): an id out of range,
 * also beyond C's integer types, is a ValueError naming the valid ids (never truncated into
 * range), a non-integer a TypeError. Shared by every binding that takes an algebra id. */
const fc_algebra *fc_parse_algebra_id(PyObject *obj)
{
    PyObject *index = PyNumber_Index(obj);
    if (!index) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "algebra: expected an int algebra id, got %.200s", Py_TYPE(obj)->tp_name);
        }
        return NULL;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
    Py_DECREF(index);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    const fc_algebra *a = !overflow && v >= 0 && v < FC_NUM_ALGEBRAS ? fc_algebra_get((int)v) : NULL;
    if (!a)
        PyErr_Format(PyExc_ValueError, "algebra: expected an algebra id from 0 to %d, got %R", FC_NUM_ALGEBRAS - 1,
                     obj);
    return a;
}

static int parse_algebra(op_call *c, PyObject *algebra)
{
    c->alg = fc_parse_algebra_id(algebra);
    return c->alg ? 0 : -1;
}

static int parse_stream(op_call *c, PyObject *stream)
{
    c->stream = 0;
    if (stream == NULL || stream == Py_None)
        return 0;
    if (!PyLong_Check(stream)) {
        PyErr_Format(PyExc_TypeError, "stream: expected an int (a cudaStream_t handle) or None, got %.200s",
                     Py_TYPE(stream)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(stream, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < 0) {
        PyErr_Format(PyExc_ValueError, "stream: expected a cudaStream_t handle >= 0, got %R", stream);
        return -1;
    }
    c->stream = (intptr_t)v;
    return 0;
}

/* The body shared by all four entry points, once the arguments are parsed into c->obj. */
static PyObject *run(PyObject *module, op_call *c)
{
    PyObject *ret = NULL;
    fc_status st;
    void *ws_alloc = NULL;

    static const int inputs_fwd[] = {A_X, A_Y, A_W};
    static const int inputs_bwd[] = {A_X, A_Y, A_W, A_GOUT};
    const int *inputs = c->backward ? inputs_bwd : inputs_fwd;
    int n_inputs = c->backward ? 4 : 3;

    if (import_arg(c, A_X) < 0 || validate_x(c) < 0)
        goto done;
    for (int i = 1; i < n_inputs; ++i) {
        int k = inputs[i];
        if (import_arg(c, k) < 0 || check_dtype_device(c, k) < 0)
            goto done;
        if (k == A_W) {
            const fc_array *w = &c->arr[A_W];
            c->N_out = c->op == OP_SGP ? c->N_in : (w->ndim == 3 ? w->shape[2] : -1);
        }
        if (k != A_GOUT || c->N_out >= 0)
            if (check_shape(c, k) < 0)
                goto done;
    }
    if (c->N_out < 0) { /* fcgp weight of the wrong rank: its check_shape raised above */
        PyErr_SetString(PyExc_ValueError, "weight: expected shape (P, N_in, N_out)");
        goto done;
    }
    /* given outputs and norms */
    for (int k = A_OUT; k < A_COUNT; ++k) {
        if (!c->obj[k] || c->obj[k] == Py_None)
            continue;
        if (k == A_WS && c->device_type != kDLCUDA) {
            PyErr_SetString(PyExc_ValueError, "workspace: only CUDA ops take a workspace");
            goto done;
        }
        if (import_arg(c, k) < 0 || check_dtype_device(c, k) < 0)
            goto done;
        if (k != A_WS ? check_shape(c, k) < 0 : fc_array_check_contiguous(&c->arr[k]) < 0)
            goto done;
        if (is_output(k, c->backward) || k == A_WS) {
            if (c->arr[k].readonly) {
                PyErr_Format(PyExc_ValueError, "%s: is read-only", arg_names[k]);
                goto done;
            }
            for (int i = 0; i < n_inputs; ++i)
                if (fc_array_overlap(&c->arr[k], &c->arr[inputs[i]])) {
                    PyErr_Format(PyExc_ValueError, "%s: must not overlap %s", arg_names[k], arg_names[inputs[i]]);
                    goto done;
                }
            for (int j = A_OUT; j < k; ++j)
                if (c->have[j] && fc_array_overlap(&c->arr[k], &c->arr[j])) {
                    PyErr_Format(PyExc_ValueError, "%s: must not overlap %s", arg_names[k], arg_names[j]);
                    goto done;
                }
            c->result[k] = Py_NewRef(c->obj[k]);
        }
    }
    /* outputs not given are allocated (norms only when asked for) */
    {
        static const int outs_fwd[] = {A_OUT};
        static const int outs_bwd[] = {A_GX, A_GY, A_GW};
        const int *outs = c->backward ? outs_bwd : outs_fwd;
        for (int i = 0; i < (c->backward ? 3 : 1); ++i)
            if (!c->result[outs[i]] && allocate_output(module, c, outs[i]) < 0)
                goto done;
    }

    fc_args args;
    memset(&args, 0, sizeof args);
    args.alg = c->alg;
    args.dtype = (fc_dtype)c->dtype;
    args.B = c->B;
    args.N_in = c->N_in;
    args.N_out = c->N_out;
    args.normalize = c->normalize;
    args.gate = c->gate;
    args.precision = (fc_precision)c->precision;
    args.x = c->arr[A_X].data;
    args.y = c->arr[A_Y].data;
    args.weight = c->arr[A_W].data;
    args.device = c->device_id;
    if (c->normalize && (c->have[A_NORMS] || c->result[A_NORMS]))
        args.norms = c->arr[A_NORMS].data;
    if (c->backward) {
        if (c->have[A_OUT]) /* fc.h: the forward's out, which the backend reads only with the norms */
            args.out = c->arr[A_OUT].data;
        args.grad_out = c->arr[A_GOUT].data;
        args.grad_x = c->arr[A_GX].data;
        args.grad_y = c->arr[A_GY].data;
        args.grad_weight = c->arr[A_GW].data;
    } else {
        args.out = c->arr[A_OUT].data;
    }
    size_t need = workspace_needed(c, &args);
    if (need > 0) {
        if (c->have[A_WS]) {
            size_t got = (size_t)c->arr[A_WS].numel * ((c->arr[A_WS].dl_dtype.bits + 7u) / 8u);
            if (got < need) {
                PyErr_Format(PyExc_ValueError, "workspace: expected at least %zu bytes, got %zu", need, got);
                goto done;
            }
            args.workspace = c->arr[A_WS].data;
            args.workspace_bytes = got;
        } else {
            Py_BEGIN_ALLOW_THREADS
            st = fc_cuda_malloc(&ws_alloc, need, c->device_id, (void *)c->stream);
            Py_END_ALLOW_THREADS
            if (st != FC_OK) {
                ws_alloc = NULL;
                raise_status(module, st);
                goto done;
            }
            args.workspace = ws_alloc;
            args.workspace_bytes = need;
        }
    }

    /* Arrays lent by the exchange API may still be written on their producer's stream: the
     * launch stream waits for it first (the capsule path had the producer order it). */
    int wait_failed = -1;
    Py_BEGIN_ALLOW_THREADS
    st = c->device_type == kDLCUDA ? fc_array_wait_producers(c->arr, A_COUNT, c->stream, c->device_id, &wait_failed)
                                   : FC_OK;
    if (st == FC_OK)
        st = launch(c, &args);
    if (ws_alloc) {
        fc_status fst = fc_cuda_free(ws_alloc, c->device_id, (void *)c->stream);
        if (st == FC_OK)
            st = fst;
        ws_alloc = NULL;
    }
    Py_END_ALLOW_THREADS
    if (st != FC_OK) {
        if (wait_failed >= 0)
            raise_wait_status(module, st, c, wait_failed);
        else
            raise_status(module, st);
        goto done;
    }
    ret = c->backward ? PyTuple_Pack(3, c->result[A_GX], c->result[A_GY], c->result[A_GW])
                      : Py_NewRef(c->result[A_OUT]);

done:
    if (ws_alloc)
        fc_cuda_free(ws_alloc, c->device_id, (void *)c->stream);
    for (int k = 0; k < A_COUNT; ++k) {
        if (c->have[k])
            fc_array_release(&c->arr[k]);
        Py_XDECREF(c->result[k]);
    }
    return ret;
}

/* The arguments every entry point shares, after PyArg parsing. */
static int parse_common(op_call *c, PyObject *algebra, PyObject *stream)
{
    if (parse_algebra(c, algebra) < 0 || parse_stream(c, stream) < 0)
        return -1;
    if (c->precision < FC_PREC_HIGHEST || c->precision > FC_PREC_BF16) {
        PyErr_Format(PyExc_ValueError, "precision: expected 0 (highest), 1 (tf32) or 2 (bf16), got %d",
                     c->precision);
        return -1;
    }
    return 0;
}

static void init_call(op_call *c, int op, int backward)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->backward = backward;
    c->N_out = -1;
    c->gate = 1;
}

static PyObject *forward(PyObject *module, PyObject *args, PyObject *kwargs, int op)
{
    /* gate comes last: callers pass fcgp's precision by position */
    static char *kw_sgp[] = {"x", "y", "weight", "algebra", "normalize", "out", "norms", "workspace", "stream",
                             "gate", NULL};
    static char *kw_fcgp[] = {"x", "y", "weight", "algebra", "normalize", "precision", "out", "norms",
                              "workspace", "stream", "gate", NULL};
    op_call c;
    init_call(&c, op, 0);
    PyObject *algebra = NULL, *stream = NULL;
    int ok = op == OP_SGP
                 ? PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOp|$OOOOp:sgp_forward", kw_sgp, &c.obj[A_X],
                                               &c.obj[A_Y], &c.obj[A_W], &algebra, &c.normalize, &c.obj[A_OUT],
                                               &c.obj[A_NORMS], &c.obj[A_WS], &stream, &c.gate)
                 : PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOp|i$OOOOp:fcgp_forward", kw_fcgp, &c.obj[A_X],
                                               &c.obj[A_Y], &c.obj[A_W], &algebra, &c.normalize, &c.precision,
                                               &c.obj[A_OUT], &c.obj[A_NORMS], &c.obj[A_WS], &stream, &c.gate);
    if (!ok || parse_common(&c, algebra, stream) < 0)
        return NULL;
    return run(module, &c);
}

static PyObject *backward(PyObject *module, PyObject *args, PyObject *kwargs, int op)
{
    static char *kw_sgp[] = {"grad_out", "x", "y", "weight", "algebra", "normalize", "norms", "grad_x",
                             "grad_y", "grad_weight", "workspace", "stream", "gate", NULL};
    static char *kw_fcgp[] = {"grad_out", "x", "y", "weight", "algebra", "normalize", "precision", "norms",
                              "grad_x", "grad_y", "grad_weight", "workspace", "stream", "gate", "out", NULL};
    op_call c;
    init_call(&c, op, 1);
    PyObject *algebra = NULL, *stream = NULL;
    int ok = op == OP_SGP
                 ? PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOp|$OOOOOOp:sgp_backward", kw_sgp,
                                               &c.obj[A_GOUT], &c.obj[A_X], &c.obj[A_Y], &c.obj[A_W], &algebra,
                                               &c.normalize, &c.obj[A_NORMS], &c.obj[A_GX], &c.obj[A_GY],
                                               &c.obj[A_GW], &c.obj[A_WS], &stream, &c.gate)
                 : PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOp|i$OOOOOOpO:fcgp_backward", kw_fcgp,
                                               &c.obj[A_GOUT], &c.obj[A_X], &c.obj[A_Y], &c.obj[A_W], &algebra,
                                               &c.normalize, &c.precision, &c.obj[A_NORMS], &c.obj[A_GX],
                                               &c.obj[A_GY], &c.obj[A_GW], &c.obj[A_WS], &stream, &c.gate,
                                               &c.obj[A_OUT]);
    if (!ok || parse_common(&c, algebra, stream) < 0)
        return NULL;
    return run(module, &c);
}

PyObject *fc_bind_sgp_forward(PyObject *m, PyObject *a, PyObject *k) { return forward(m, a, k, OP_SGP); }
PyObject *fc_bind_fcgp_forward(PyObject *m, PyObject *a, PyObject *k) { return forward(m, a, k, OP_FCGP); }
PyObject *fc_bind_sgp_backward(PyObject *m, PyObject *a, PyObject *k) { return backward(m, a, k, OP_SGP); }
PyObject *fc_bind_fcgp_backward(PyObject *m, PyObject *a, PyObject *k) { return backward(m, a, k, OP_FCGP); }

/* A dtype by name ("float32", ...) for the shape-only queries; -1 with TypeError set. */
static int parse_dtype_name(const char *dtname)
{
    for (int d = FC_F32; d <= FC_F16; ++d)
        if (strcmp(dtname, fc_dtype_name(d)) == 0)
            return d;
    PyErr_Format(PyExc_TypeError, "dtype: expected float32, float64, bfloat16 or float16, got '%s'", dtname);
    return -1;
}

/* The arguments of a call without arrays: what launch shapes and workspaces depend on
 * (normalize and gate on). */
static fc_args shape_args(const fc_algebra *alg, int dtype, long long B, long long N_in, long long N_out)
{
    fc_args a;
    memset(&a, 0, sizeof a);
    a.alg = alg;
    a.dtype = (fc_dtype)dtype;
    a.B = B;
    a.N_in = N_in;
    a.N_out = N_out;
    a.normalize = 1;
    a.gate = 1;
    return a;
}

/* workspace_size(op, backward, algebra, dtype, B, N_in, N_out, precision=0, gate=True, device=0,
 * saved_out=False) -> bytes the CUDA launcher needs on that device, so a framework can allocate
 * it (graph-safe) and pass workspace=. The gate-off product needs less (no gated copies of x and
 * y); the device matters where its kind picks the path (the Hopper FCGP forward needs a
 * prepared W^T); saved_out: the FCGP backward will get the forward's out and norms (no
 * recomputed product, less workspace). */
PyObject *fc_bind_workspace_size(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"op", "backward", "algebra", "dtype", "B", "N_in", "N_out", "precision", "gate", "device",
                         "saved_out", NULL};
    const char *opname, *dtname;
    int bwd, precision = 0, gate = 1, device = 0, saved_out = 0;
    PyObject *algebra;
    long long B, N_in, N_out;
    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "spOsLLL|ipip:workspace_size", kw, &opname, &bwd, &algebra,
                                     &dtname, &B, &N_in, &N_out, &precision, &gate, &device, &saved_out))
        return NULL;
    if (device < 0)
        return PyErr_Format(PyExc_ValueError, "device: expected a CUDA device ordinal >= 0, got %d", device);
    op_call c;
    init_call(&c, strcmp(opname, "fcgp") == 0 ? OP_FCGP : OP_SGP, bwd);
    if (strcmp(opname, "sgp") != 0 && strcmp(opname, "fcgp") != 0)
        return PyErr_Format(PyExc_ValueError, "op: expected 'sgp' or 'fcgp', got '%s'", opname);
    if (parse_algebra(&c, algebra) < 0)
        return NULL;
    const int dt = parse_dtype_name(dtname);
    if (dt < 0)
        return NULL;
    c.device_type = kDLCUDA;
    fc_args a = shape_args(c.alg, dt, B, N_in, N_out);
    a.precision = (fc_precision)precision;
    a.gate = gate;
    a.device = device;
    /* the sizes read only whether out, norms and the gradients are given (and the gradients'
     * 16-byte alignment: the FCGP backward may lend grad_x, grad_y as scratch), never them;
     * every call through the bindings gives all three gradients */
    static _Alignas(16) char stand_in[16];
    if (saved_out)
        a.out = a.norms = stand_in;
    if (bwd)
        a.grad_x = a.grad_y = a.grad_weight = stand_in;
    return PyLong_FromSize_t(workspace_needed(&c, &a));
}

/* _sgp_config(backward, algebra, dtype, B, N, device=0) -> (threads a row, rows a block,
 * stages, mode, grid, shared bytes): the CUDA SGP's launch shape for aligned inputs
 * (diagnostics and tuning; benchmarks/tune_sgp.py). */
PyObject *fc_bind_sgp_config(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"backward", "algebra", "dtype", "B", "N", "device", NULL};
    const char *dtname;
    int bwd, device = 0;
    PyObject *algebra;
    long long B, N;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "pOsLL|i:_sgp_config", kw, &bwd, &algebra, &dtname, &B, &N,
                                     &device))
        return NULL;
    if (B < 1 || N < 1)
        return PyErr_Format(PyExc_ValueError, "_sgp_config: expected B >= 1 and N >= 1, got B=%lld N=%lld", B, N);
    if (!fc_cuda_compiled() || device < 0 || device >= fc_cuda_device_count())
        return PyErr_Format(PyExc_RuntimeError, "_sgp_config: no usable CUDA device %d", device);
    op_call c;
    init_call(&c, OP_SGP, bwd);
    if (parse_algebra(&c, algebra) < 0)
        return NULL;
    const int dt = parse_dtype_name(dtname);
    if (dt < 0)
        return NULL;
    fc_args a = shape_args(c.alg, dt, B, N, N);
    a.device = device;
    long long out[6];
    if (raise_status(module, fc_sgp_config_cuda(&a, bwd, out)) < 0)
        return NULL;
    return Py_BuildValue("(LLLLLL)", out[0], out[1], out[2], out[3], out[4], out[5]);
}

/* _sgp_shape_override(rows, stages): tuning only; (0, 0) restores the default choice. */
PyObject *fc_bind_sgp_shape_override(PyObject *module, PyObject *args)
{
    int rows, stages;
    (void)module;
    if (!PyArg_ParseTuple(args, "ii:_sgp_shape_override", &rows, &stages))
        return NULL;
    if (rows < 0 || stages < 0)
        return PyErr_Format(PyExc_ValueError, "_sgp_shape_override: expected rows >= 0 and stages >= 0");
    fc_sgp_shape_override(rows, stages);
    Py_RETURN_NONE;
}
