/* The type screen of the lossless JSON encoder, in C (see dsh_store/jsonvalue.py).
 *
 * plain(value) says whether value holds nothing but exact dict (exact str keys), list,
 * tuple, str, int, bool and None, and only finite floats other than -0.0. It runs after
 * orjson accepted the value, to find what orjson writes without complaint although the
 * lossless rules refuse it (enum members, UUIDs, orjson.Fragment, NaN, +-Infinity, -0.0).
 *
 * The walk reads the containers in place and calls no Python code (no __eq__, no __hash__,
 * no iterator), so nothing can change them while it runs. It gives up (False) below
 * MAX_DEPTH + 1 container levels: the encoder refuses deeper values, so only a value made
 * cyclic since it was encoded gets there, and the slow path then names the cycle. False
 * never decides a refusal: the caller then runs the precise walk, which names the problem.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

/* jsonvalue.MAX_DEPTH + 1: the encoder's limit, with one level to spare. */
#define LEVELS 255

static int is_plain(PyObject *value, int levels_left);

/* A member of a container: text and integers (most members) are judged here, without a
 * call. */
static inline int
member_is_plain(PyObject *member, int levels_left)
{
    PyTypeObject *kind = Py_TYPE(member);
    return kind == &PyUnicode_Type || kind == &PyLong_Type || is_plain(member, levels_left);
}

static int
is_plain(PyObject *value, int levels_left)
{
    PyTypeObject *kind = Py_TYPE(value);
    if (kind == &PyUnicode_Type || kind == &PyLong_Type || kind == &PyBool_Type ||
        value == Py_None) {
        return 1;
    }
    if (kind == &PyFloat_Type) {
        double number = PyFloat_AS_DOUBLE(value);
        return isfinite(number) && !(number == 0.0 && signbit(number));
    }
    if (levels_left == 0) {
        return 0;
    }
    if (kind == &PyDict_Type) {
        Py_ssize_t position = 0;
        PyObject *key, *member;
        while (PyDict_Next(value, &position, &key, &member)) {
            if (Py_TYPE(key) != &PyUnicode_Type || !member_is_plain(member, levels_left - 1)) {
                return 0;
            }
        }
        return 1;
    }
    if (kind == &PyList_Type) {
        for (Py_ssize_t index = 0; index < PyList_GET_SIZE(value); index++) {
            if (!member_is_plain(PyList_GET_ITEM(value, index), levels_left - 1)) {
                return 0;
            }
        }
        return 1;
    }
    if (kind == &PyTuple_Type) {
        for (Py_ssize_t index = 0; index < PyTuple_GET_SIZE(value); index++) {
            if (!member_is_plain(PyTuple_GET_ITEM(value, index), levels_left - 1)) {
                return 0;
            }
        }
        return 1;
    }
    return 0;
}

static PyObject *
plain(PyObject *module, PyObject *value)
{
    return PyBool_FromLong(is_plain(value, LEVELS));
}

PyDoc_STRVAR(plain_doc,
"plain(value, /)\n--\n\n"
"Whether value, which the lossless encoder accepted, holds only exact builtin JSON types\n"
"and only finite floats other than -0.0 (the type screen of dsh_store.jsonvalue).");

static PyMethodDef methods[] = {
    {"plain", plain, METH_O, plain_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dsh_store._jsonscreen",
    .m_doc = "The lossless JSON type screen in C (optional; jsonvalue has the same in Python).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__jsonscreen(void)
{
    return PyModuleDef_Init(&module);
}
