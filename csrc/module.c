/* module.c — flashclifford._C: module state, method table, multi-phase init.
 *
 * The op entry points live in bind_ops.c; this file holds the small introspection
 * functions (algebra tables as the C engine derives them, build facts) that the tests use
 * to compare the C derivation with the Python one.
 */
#include "bind_ops.h"

#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL fc_numpy_api
#include <numpy/arrayobject.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "buffer.h"

#ifndef FC_VERSION
#define FC_VERSION "0.0.0"
#endif

static PyObject *int_list(const int *v, int n)
{
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; ++i) {
        PyObject *o = PyLong_FromLong(v[i]);
        if (!o) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, o);
    }
    return l;
}

/* Build a dict from (key, new reference) pairs; steals the values, NULL if any is NULL. */
static PyObject *dict_of(int n, const char *const *keys, PyObject **values)
{
    PyObject *d = PyDict_New();
    for (int i = 0; i < n; ++i) {
        if (d && (!values[i] || PyDict_SetItemString(d, keys[i], values[i]) < 0))
            Py_CLEAR(d);
        Py_XDECREF(values[i]);
    }
    return d;
}

static PyObject *algebra_table(PyObject *module, PyObject *arg)
{
    (void)module;
    const fc_algebra *a = fc_parse_algebra_id(arg);
    if (!a)
        return NULL;
    int blades[FC_MAX_D], grades[FC_MAX_D], signs[FC_MAX_D];
    for (int i = 0; i < a->D; ++i) {
        blades[i] = (int)a->blade[i];
        grades[i] = a->grade[i];
        signs[i] = a->grade_sign[i];
    }
    PyObject *paths = PyList_New(a->P);
    for (int p = 0; paths && p < a->P; ++p) {
        PyObject *t = Py_BuildValue("(iii)", a->path_grades[p][0], a->path_grades[p][1], a->path_grades[p][2]);
        if (!t) {
            Py_CLEAR(paths);
            break;
        }
        PyList_SET_ITEM(paths, p, t);
    }
    PyObject *terms = PyList_New(a->T);
    for (int t = 0; terms && t < a->T; ++t) {
        const fc_term *e = &a->term[t];
        PyObject *v = Py_BuildValue("(iiiii)", e->i, e->j, e->k, e->sign, e->path);
        if (!v) {
            Py_CLEAR(terms);
            break;
        }
        PyList_SET_ITEM(terms, t, v);
    }
    static const char *const keys[] = {"id", "name", "n", "D", "G", "P", "T", "metric", "blades", "grades",
                                       "grade_signs", "grade_start", "path_grades", "terms"};
    PyObject *vals[] = {PyLong_FromLong(a->id), PyUnicode_FromString(a->name), PyLong_FromLong(a->n),
                        PyLong_FromLong(a->D), PyLong_FromLong(a->G), PyLong_FromLong(a->P),
                        PyLong_FromLong(a->T), int_list(a->metric, a->n), int_list(blades, a->D),
                        int_list(grades, a->D), int_list(signs, a->D), int_list(a->grade_start, a->G + 1),
                        paths, terms};
    return dict_of((int)(sizeof vals / sizeof vals[0]), keys, vals);
}

static PyObject *find_algebra(PyObject *module, PyObject *arg)
{
    (void)module;
    PyObject *seq = PySequence_Fast(arg, "metric: expected a sequence of +1, -1 or 0");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int metric[FC_MAX_N];
    int id = -1;
    if (n >= 1 && n <= FC_MAX_N) {
        int valid = 1;
        for (Py_ssize_t i = 0; i < n; ++i) {
            long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
            if (v == -1 && PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                    Py_DECREF(seq);
                    return NULL;
                }
                PyErr_Clear();
                v = 2; /* beyond long: no metric entry */
            }
            /* checked before the cast to int: 2**32 + 1 must not pass as 1 */
            valid = valid && v >= -1 && v <= 1;
            metric[i] = (int)v;
        }
        if (valid)
            id = fc_algebra_find((int)n, metric);
    }
    Py_DECREF(seq);
    return PyLong_FromLong(id);
}

static PyObject *build_info(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    (void)module;
    int cuda = fc_cuda_compiled();
    int gpus = cuda ? fc_cuda_device_count() : 0;
    int threads = 1, openmp = 0;
#ifdef _OPENMP
    openmp = 1;
    threads = omp_get_max_threads();
#endif
    PyObject *backends = cuda ? Py_BuildValue("[ss]", "cpu", "cuda") : Py_BuildValue("[s]", "cpu");
    PyObject *cuda_version = Py_None;
    if (cuda) {
        int v = fc_cuda_runtime_version();
        cuda_version = PyUnicode_FromFormat("%d.%d", v / 1000, (v % 1000) / 10);
    } else {
        Py_INCREF(Py_None);
    }
    static const char *const keys[] = {"version", "backends", "cuda_version", "cuda_archs", "gpu_count",
                                       "gpu_usable", "openmp", "cpu_threads", "fcgp_sm90a"};
    PyObject *vals[] = {PyUnicode_FromString(FC_VERSION), backends, cuda_version,
                        cuda ? PyUnicode_FromString(fc_cuda_archs()) : Py_NewRef(Py_None), PyLong_FromLong(gpus),
                        PyBool_FromLong(gpus > 0), PyBool_FromLong(openmp), PyLong_FromLong(threads),
                        PyBool_FromLong(fc_fcgp_sm90_compiled())};
    return dict_of((int)(sizeof vals / sizeof vals[0]), keys, vals);
}

/* _fcgp_sm90(on=None) / _fcgp_sm90_bwd(on=None): a switch of the Hopper FCGP kernels (None:
 * leave it), its state after. */
static PyObject *switch_call(PyObject *args, const char *format, int (*sw)(int))
{
    PyObject *on = Py_None;
    if (!PyArg_ParseTuple(args, format, &on))
        return NULL;
    int set = -1;
    if (on != Py_None && (set = PyObject_IsTrue(on)) < 0)
        return NULL;
    return PyBool_FromLong(sw(set));
}
static PyObject *fcgp_sm90(PyObject *module, PyObject *args)
{
    (void)module;
    return switch_call(args, "|O:_fcgp_sm90", fc_fcgp_sm90_switch);
}
static PyObject *fcgp_sm90_bwd(PyObject *module, PyObject *args)
{
    (void)module;
    return switch_call(args, "|O:_fcgp_sm90_bwd", fc_fcgp_sm90_bwd_switch);
}
static PyObject *fcgp_sm90_fwd_norm(PyObject *module, PyObject *args)
{
    (void)module;
    return switch_call(args, "|O:_fcgp_sm90_fwd_norm", fc_fcgp_sm90_fwd_norm_switch);
}
static PyObject *fcgp_sm90_fwd_wbulk(PyObject *module, PyObject *args)
{
    (void)module;
    return switch_call(args, "|O:_fcgp_sm90_fwd_wbulk", fc_fcgp_sm90_fwd_wbulk_switch);
}
static PyObject *fcgp_sm90_bwd_pdl(PyObject *module, PyObject *args)
{
    (void)module;
    return switch_call(args, "|O:_fcgp_sm90_bwd_pdl", fc_fcgp_sm90_bwd_pdl_switch);
}
static PyObject *fcgp_sm90_bwd_go_pairs(PyObject *module, PyObject *args)
{
    (void)module;
    return switch_call(args, "|O:_fcgp_sm90_bwd_go_pairs", fc_fcgp_sm90_bwd_go_pairs_switch);
}
/* The C API's small choices from Python: one optional integer (-1, leave it, when absent) in [-1,
 * most], passed to get_set, which sets the choice when it is >= 0 and returns it; `values` names the
 * choices for the error, which names the function from format ("|i:name"). */
static PyObject *choice_call(PyObject *args, const char *format, int most, const char *values, int (*get_set)(int))
{
    int v = -1;
    if (!PyArg_ParseTuple(args, format, &v))
        return NULL;
    if (v > most) {
        PyErr_Format(PyExc_ValueError, "%s: must be %s, got %d", format + 3, values, v);
        return NULL;
    }
    return PyLong_FromLong(get_set(v));
}
/* _fcgp_sm90_bwd_go_fused(mode=-1): set the mode when mode >= 0; returns the setting */
static PyObject *fcgp_sm90_bwd_go_fused(PyObject *module, PyObject *args)
{
    (void)module;
    return choice_call(args, "|i:_fcgp_sm90_bwd_go_fused", 2, "0 (by the rule), 1 (one pass) or 2 (two passes)",
                       fc_fcgp_sm90_bwd_go_fused);
}
/* _fcgp_sm90_gw_pseq(mode=-1): set the mode when mode >= 0; returns the setting */
static PyObject *fcgp_sm90_gw_pseq(PyObject *module, PyObject *args)
{
    (void)module;
    return choice_call(args, "|i:_fcgp_sm90_gw_pseq", 3,
                       "0 (by the rule), 1 (one path a tile), 2 (path groups) or 3 (one path a tile, in rounds)",
                       fc_fcgp_sm90_gw_pseq);
}
/* _fcgp_sm90_fwd_cluster(shape=-1): set the shape when shape >= 0; returns the setting */
static PyObject *fcgp_sm90_fwd_cluster(PyObject *module, PyObject *args)
{
    (void)module;
    return choice_call(args, "|i:_fcgp_sm90_fwd_cluster", 3, "0 (by the rule), 1, 2 or 3", fc_fcgp_sm90_fwd_cluster);
}
/* _fcgp_sm90_fwd_groups(groups=-1): set the component groups when groups >= 0; returns the setting */
static PyObject *fcgp_sm90_fwd_groups(PyObject *module, PyObject *args)
{
    (void)module;
    return choice_call(args, "|i:_fcgp_sm90_fwd_groups", 2, "0 (by the rule), 1 or 2", fc_fcgp_sm90_fwd_groups);
}
/* The C API's numeric settings from Python: one optional integer (-1, leave it, when absent),
 * passed to get_set, which sets the setting when the value is >= 0 and returns it. */
static PyObject *number_call(PyObject *args, const char *format, long long (*get_set)(long long))
{
    long long v = -1;
    if (!PyArg_ParseTuple(args, format, &v))
        return NULL;
    return PyLong_FromLongLong(get_set(v));
}
/* _fcgp_sm90_fwd_norm_wait(us=-1): set the wait when us >= 0; returns it */
static PyObject *fcgp_sm90_fwd_norm_wait(PyObject *module, PyObject *args)
{
    (void)module;
    return number_call(args, "|L:_fcgp_sm90_fwd_norm_wait", fc_fcgp_sm90_fwd_norm_wait);
}

/* _fcgp_sm90_bwd_go_rows(rows=-1): set the slice rows when rows >= 0; returns the setting */
static PyObject *fcgp_sm90_bwd_go_rows(PyObject *module, PyObject *args)
{
    (void)module;
    return number_call(args, "|L:_fcgp_sm90_bwd_go_rows", fc_fcgp_sm90_bwd_go_rows);
}

static PyMethodDef module_methods[] = {
    {"sgp_forward", (PyCFunction)(void (*)(void))fc_bind_sgp_forward, METH_VARARGS | METH_KEYWORDS,
     "sgp_forward(x, y, weight, algebra, normalize, *, out=None, norms=None, workspace=None, stream=None, "
     "gate=True)\n--\n\n"
     "Fused MVGELU -> weighted geometric product -> grade RMSNorm. x, y: (D, *batch, N); weight: (N, P). "
     "Returns out (D, *batch, N). norms, if given, receives the (B, G) grade RMS used by backward. "
     "gate=False: no MVGELU (the plain product)."},
    {"sgp_backward", (PyCFunction)(void (*)(void))fc_bind_sgp_backward, METH_VARARGS | METH_KEYWORDS,
     "sgp_backward(grad_out, x, y, weight, algebra, normalize, *, norms=None, grad_x=None, grad_y=None, "
     "grad_weight=None, workspace=None, stream=None, gate=True)\n--\n\n"
     "Gradients of sgp_forward: returns (grad_x, grad_y, grad_weight). norms from forward saves a pass."},
    {"fcgp_forward", (PyCFunction)(void (*)(void))fc_bind_fcgp_forward, METH_VARARGS | METH_KEYWORDS,
     "fcgp_forward(x, y, weight, algebra, normalize, precision=0, *, out=None, norms=None, workspace=None, "
     "stream=None, gate=True)\n--\n\n"
     "Fused MVGELU -> fully connected geometric product -> grade RMSNorm. x, y: (D, *batch, N_in); weight: "
     "(P, N_in, N_out). precision: 0 highest, 1 tf32, 2 bf16 (float32 inputs). gate=False: no MVGELU."},
    {"fcgp_backward", (PyCFunction)(void (*)(void))fc_bind_fcgp_backward, METH_VARARGS | METH_KEYWORDS,
     "fcgp_backward(grad_out, x, y, weight, algebra, normalize, precision=0, *, norms=None, grad_x=None, "
     "grad_y=None, grad_weight=None, workspace=None, stream=None, gate=True)\n--\n\n"
     "Gradients of fcgp_forward: returns (grad_x, grad_y, grad_weight)."},
    {"workspace_size", (PyCFunction)(void (*)(void))fc_bind_workspace_size, METH_VARARGS | METH_KEYWORDS,
     "workspace_size(op, backward, algebra, dtype, B, N_in, N_out, precision=0, gate=True, device=0)\n--\n\n"
     "Bytes of CUDA scratch the op needs on that device (0 for none)."},
    {"_fcgp_sm90", fcgp_sm90, METH_VARARGS,
     "_fcgp_sm90(on=None)\n--\n\n"
     "The switch of the Hopper (sm_90a) FCGP forward, on unless FLASHCLIFFORD_FCGP_SM90=0 at start-up: "
     "None leaves it, True/False sets it; returns its state. Process-wide; a workspace sized with it off "
     "may be too small with it on (the op then raises)."},
    {"_fcgp_sm90_bwd", fcgp_sm90_bwd, METH_VARARGS,
     "_fcgp_sm90_bwd(on=None)\n--\n\n"
     "The switch of the Hopper (sm_90a) FCGP backward kernels (input and weight gradients), on unless "
     "FLASHCLIFFORD_FCGP_SM90_BWD=0 at "
     "start-up: None leaves it, True/False sets it; returns its state. Process-wide; size workspaces with it "
     "as the call will have it."},
    {"_fcgp_sm90_fwd_norm", fcgp_sm90_fwd_norm, METH_VARARGS,
     "_fcgp_sm90_fwd_norm(on=None)\n--\n\n"
     "Whether the Hopper FCGP forward finishes the grade norm in its epilogue (on unless "
     "FLASHCLIFFORD_FCGP_FWD_NORM=0 at start-up; off: a separate finalize pass, bitwise the same result): "
     "None leaves it, True/False sets it; returns its state. Process-wide."},
    {"_fcgp_sm90_fwd_wbulk", fcgp_sm90_fwd_wbulk, METH_VARARGS,
     "_fcgp_sm90_fwd_wbulk(on=None)\n--\n\n"
     "Whether the Hopper FCGP forward brings W^T in stage order by bulk copies (on unless "
     "FLASHCLIFFORD_FCGP_FWD_WBULK=0 at start-up; off: boxes of W^T, bitwise the same result): None leaves "
     "it, True/False sets it; returns its state. Process-wide; for tests and measurements."},
    {"_fcgp_sm90_bwd_go_rows", fcgp_sm90_bwd_go_rows, METH_VARARGS,
     "_fcgp_sm90_bwd_go_rows(rows=-1)\n--\n\n"
     "The rows of each slice in which the Hopper FCGP backward forms the norm's row statistics and then "
     "transposes go: 0 (the default; FLASHCLIFFORD_FCGP_BWD_GO_ROWS at start-up) a whole batch chunk at once, "
     "n > 0 n rows in whole 32-row blocks (the transpose then reads grad_out and out back from L2, but the "
     "statistics pass fills the GPU less; measured no faster); bitwise the same result under each. rows >= 0 "
     "sets it; returns the setting. Process-wide; for tests and measurements."},
    {"_fcgp_sm90_bwd_go_fused", fcgp_sm90_bwd_go_fused, METH_VARARGS,
     "_fcgp_sm90_bwd_go_fused(mode=-1)\n--\n\n"
     "How the Hopper FCGP backward forms the norm's row statistics and go^T: 0 by the rule (the default; "
     "FLASHCLIFFORD_FCGP_BWD_GO_FUSED at start-up otherwise: one pass where grad_out and out are float32, "
     "and at 8 components), "
     "1 in one pass (a cluster of CTAs holding each "
     "block of 16 rows of grad_out and out in shared memory) wherever N_out <= 512, 2 in two passes (a "
     "statistics pass, then the transpose, in the slices of _fcgp_sm90_bwd_go_rows). The passes sum the "
     "dots in different orders. mode >= 0 sets it; returns the setting. Process-wide; for tests and "
     "measurements."},
    {"_fcgp_sm90_gw_pseq", fcgp_sm90_gw_pseq, METH_VARARGS,
     "_fcgp_sm90_gw_pseq(mode=-1)\n--\n\n"
     "How the Hopper FCGP weight gradient is tiled: 0 by the rule (today as 1), 1 one path a tile of 128 x 256 "
     "wherever N_in is a multiple of 128 and N_out of 256 (else path groups), its tiles whole to the "
     "least-loaded block by their paths' costs where that beats rounds, 2 path groups everywhere, 3 as 1 "
     "always in rounds (initially FLASHCLIFFORD_FCGP_GW_PSEQ's, else 0). The sums over the batch are split "
     "differently, so the bits differ between the settings (each is deterministic). mode >= 0 sets it; "
     "returns the setting. Process-wide; for tests and measurements."},
    {"_fcgp_sm90_bwd_pdl", fcgp_sm90_bwd_pdl, METH_VARARGS,
     "_fcgp_sm90_bwd_pdl(on=None)\n--\n\n"
     "Whether the Hopper FCGP backward chains its kernels by programmatic dependent launch, so that its "
     "memory-bound passes of the next batch chunk start on the SMs the input gradient's last wave leaves "
     "idle (on unless FLASHCLIFFORD_FCGP_BWD_PDL=0 at start-up; off: plain stream order, bitwise the same "
     "result): None leaves it, True/False sets it; returns its state. Process-wide; for tests and "
     "measurements."},
    {"_fcgp_sm90_bwd_go_pairs", fcgp_sm90_bwd_go_pairs, METH_VARARGS,
     "_fcgp_sm90_bwd_go_pairs(on=None)\n--\n\n"
     "Whether the Hopper FCGP backward's go^T passes (the two-pass transpose, and the one-pass go_rows at D = 8) "
     "move two adjacent columns a thread or load where N_out is even and grad_out and the output are aligned to "
     "two elements (on unless FLASHCLIFFORD_FCGP_BWD_GO_PAIRS=0 at start-up; off: one column, bitwise the "
     "same result): None leaves it, True/False sets it; returns its state. Process-wide; for tests and "
     "measurements."},
    {"_fcgp_sm90_fwd_groups", fcgp_sm90_fwd_groups, METH_VARARGS,
     "_fcgp_sm90_fwd_groups(groups=-1)\n--\n\n"
     "The Hopper FCGP forward's component groups at D = 8: 0 by the rule (FLASHCLIFFORD_FCGP_FWD_GROUPS at "
     "start-up otherwise: 2 unless a forced cluster shape or W as stored everywhere asks for 1), 1 a CTA "
     "computes every output component of 64 columns, 2 half of them over 128 columns (with W^T in stage "
     "order, in one CTA). groups >= 0 sets it; returns the setting. Process-wide; for tests and "
     "measurements."},
    {"_fcgp_sm90_fwd_cluster", fcgp_sm90_fwd_cluster, METH_VARARGS,
     "_fcgp_sm90_fwd_cluster(shape=-1)\n--\n\n"
     "The Hopper FCGP forward's cluster shape: 0 by the rule (FLASHCLIFFORD_FCGP_FWD_CLUSTER at start-up "
     "otherwise), 1 one CTA, 2 two column tiles sharing x and y, 3 two row tiles sharing W^T; bitwise the "
     "same result under each. shape >= 0 sets it; returns the setting. Process-wide; for tests and "
     "measurements."},
    {"_fcgp_sm90_fwd_norm_wait", fcgp_sm90_fwd_norm_wait, METH_VARARGS,
     "_fcgp_sm90_fwd_norm_wait(us=-1)\n--\n\n"
     "How long (microseconds, at most 10000) a tile of the Hopper FCGP forward waits for the rest of its "
     "64-row block before leaving its unscaled output to the block's last tile (100 unless "
     "FLASHCLIFFORD_FCGP_FWD_NORM_WAIT_US at start-up says otherwise): us >= 0 sets it; returns it. "
     "Process-wide; for tests and measurements."},
    {"_sgp_config", (PyCFunction)(void (*)(void))fc_bind_sgp_config, METH_VARARGS | METH_KEYWORDS,
     "_sgp_config(backward, algebra, dtype, B, N, device=0)\n--\n\n"
     "Diagnostics: the CUDA SGP's launch shape for aligned inputs, (threads a row, rows a block, stages, "
     "mode, grid, shared bytes); mode 0 resident, 1 long with shared weights, 2 long."},
    {"_sgp_shape_override", fc_bind_sgp_shape_override, METH_VARARGS,
     "_sgp_shape_override(rows, stages)\n--\n\n"
     "Tuning only: resident SGP launches take this many rows a block and stages where it fits; (0, 0) "
     "restores the default choice. Process-wide."},
    {"algebra_table", algebra_table, METH_O,
     "algebra_table(id)\n--\n\nThe tables the C engine derives for algebra `id`, as a dict."},
    {"find_algebra", find_algebra, METH_O,
     "find_algebra(metric)\n--\n\nThe kernel id of the algebra with this metric, or -1."},
    {"build_info", build_info, METH_NOARGS,
     "build_info()\n--\n\nBackends, CUDA version and architectures compiled in, whether a GPU is usable, "
     "and whether the Hopper FCGP forward was compiled (fcgp_sm90a)."},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *m)
{
    fc_module_state *st = PyModule_GetState(m);
    if (PyArray_ImportNumPyAPI() < 0)
        return -1;
    st->device_buffer_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &fc_device_buffer_spec, NULL);
    if (!st->device_buffer_type || PyModule_AddType(m, st->device_buffer_type) < 0)
        return -1;
    st->cuda_error = PyErr_NewExceptionWithDoc("flashclifford._C.CudaError",
                                               "A CUDA runtime error reported by a flashclifford kernel.",
                                               PyExc_RuntimeError, NULL);
    if (!st->cuda_error || PyModule_AddObjectRef(m, "CudaError", st->cuda_error) < 0)
        return -1;
    if (PyModule_AddIntConstant(m, "NUM_ALGEBRAS", FC_NUM_ALGEBRAS) < 0)
        return -1;
    return 0;
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    fc_module_state *st = PyModule_GetState(m);
    Py_VISIT(st->device_buffer_type);
    Py_VISIT(st->cuda_error);
    return 0;
}

static int module_clear(PyObject *m)
{
    fc_module_state *st = PyModule_GetState(m);
    Py_CLEAR(st->device_buffer_type);
    Py_CLEAR(st->cuda_error);
    return 0;
}

static void module_free(void *m) { module_clear((PyObject *)m); }

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "flashclifford._C",
    .m_doc = "flashclifford's C extension: fused Clifford-algebra kernels on DLPack arrays (CPU and CUDA).",
    .m_size = sizeof(fc_module_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__C(void) { return PyModuleDef_Init(&module_def); }
