/* bind_ops.h — the op entry points of flashclifford._C and the module state they use. */
#ifndef FC_BIND_OPS_H
#define FC_BIND_OPS_H

#include "array.h"

typedef struct fc_module_state {
    PyTypeObject *device_buffer_type;
    PyObject *cuda_error; /* flashclifford._C.CudaError, a RuntimeError */
} fc_module_state;

PyObject *fc_bind_sgp_forward(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *fc_bind_sgp_backward(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *fc_bind_fcgp_forward(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *fc_bind_fcgp_backward(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *fc_bind_workspace_size(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *fc_bind_sgp_config(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *fc_bind_sgp_shape_override(PyObject *module, PyObject *args);

/* The algebra of a Python integer id; NULL with ValueError (out of range) or TypeError set. */
const fc_algebra *fc_parse_algebra_id(PyObject *obj);

#endif
