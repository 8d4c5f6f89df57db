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
 *
 * framed_line(frame, inner) is the event line encoder's fast path: the encoder configured
 * by configure() (orjson.dumps with the lossless options and a refusing default), then the
 * screen of inner, then the line's newline. No Python code runs between the encoding and
 * the screen. The encoder's bytes come back with the growth buffer's slack handed back to
 * the allocator (a shrinking realloc, in place), so a kept line holds about its own size
 * without a copy. None means "not proven": the caller's precise path decides.
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

/* The line encoder of framed_line, set once by configure(). */
static PyObject *encoder = NULL;         /* orjson.dumps */
static PyObject *encoder_error = NULL;   /* orjson.JSONEncodeError */
static PyObject *encoder_default = NULL; /* the refusing default */
static PyObject *encoder_option = NULL;  /* the lossless options (an int) */
static PyObject *encoder_kwnames = NULL; /* ("default", "option"), interned */

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyObject *dumps, *error, *refuse, *option;
    if (!PyArg_ParseTuple(args, "OOOO:configure", &dumps, &error, &refuse, &option)) {
        return NULL;
    }
    if (!PyCallable_Check(dumps) || !PyExceptionClass_Check(error) || !PyLong_Check(option)) {
        PyErr_SetString(PyExc_TypeError,
                        "configure(dumps, error class, default, option int) expected");
        return NULL;
    }
    if (encoder_kwnames == NULL) {
        /* The encoder matches keyword names by identity with its interned names. */
        PyObject *name_default = PyUnicode_InternFromString("default");
        PyObject *name_option = PyUnicode_InternFromString("option");
        if (name_default == NULL || name_option == NULL) {
            Py_XDECREF(name_default);
            Py_XDECREF(name_option);
            return NULL;
        }
        encoder_kwnames = PyTuple_Pack(2, name_default, name_option);
        Py_DECREF(name_default);
        Py_DECREF(name_option);
        if (encoder_kwnames == NULL) {
            return NULL;
        }
    }
    Py_INCREF(dumps);
    Py_XSETREF(encoder, dumps);
    Py_INCREF(error);
    Py_XSETREF(encoder_error, error);
    Py_INCREF(refuse);
    Py_XSETREF(encoder_default, refuse);
    Py_INCREF(option);
    Py_XSETREF(encoder_option, option);
    Py_RETURN_NONE;
}

static PyObject *
framed_line(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "framed_line(frame, inner) takes 2 arguments");
        return NULL;
    }
    if (encoder == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "framed_line: configure() was not called");
        return NULL;
    }
    PyObject *call_args[3] = {args[0], encoder_default, encoder_option};
    PyObject *line = PyObject_Vectorcall(encoder, call_args, 1, encoder_kwnames);
    if (line == NULL) {
        if (PyErr_ExceptionMatches(encoder_error)) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        return NULL;
    }
    if (!PyBytes_CheckExact(line) || !is_plain(args[1], LEVELS)) {
        Py_DECREF(line);
        Py_RETURN_NONE;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(line);
    if (Py_REFCNT(line) != 1) {
        /* Not ours alone (no encoder does this today): a copy, never a resize. */
        PyObject *copy = PyBytes_FromStringAndSize(NULL, size + 1);
        if (copy != NULL) {
            memcpy(PyBytes_AS_STRING(copy), PyBytes_AS_STRING(line), (size_t)size);
            PyBytes_AS_STRING(copy)[size] = '\n';
        }
        Py_DECREF(line);
        return copy;
    }
    /* One byte more than the text, which the allocator shrinks in place: the growth
     * buffer's slack goes back, and the newline costs no copy of the line. */
    if (_PyBytes_Resize(&line, size + 1) < 0) {
        return NULL;
    }
    PyBytes_AS_STRING(line)[size] = '\n';
    return line;
}

PyDoc_STRVAR(configure_doc,
"configure(dumps, error, default, option, /)\n--\n\n"
"Set the encoder framed_line calls: dumps(frame, default=default, option=option), whose\n"
"refusals raise error.");

PyDoc_STRVAR(framed_line_doc,
"framed_line(frame, inner, /)\n--\n\n"
"The configured encoding of frame plus a newline, if the encoder accepts frame and inner\n"
"passes the type screen (plain); else None. The line holds about its own size.");

PyDoc_STRVAR(plain_doc,
"plain(value, /)\n--\n\n"
"Whether value, which the lossless encoder accepted, holds only exact builtin JSON types\n"
"and only finite floats other than -0.0 (the type screen of dsh_store.jsonvalue).");

static PyMethodDef methods[] = {
    {"plain", plain, METH_O, plain_doc},
    {"configure", configure, METH_VARARGS, configure_doc},
    {"framed_line", (PyCFunction)(void (*)(void))framed_line, METH_FASTCALL, framed_line_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dsh_store._jsonscreen",
    .m_doc = "The lossless JSON type screen and line encoder in C (optional; jsonvalue has "
             "the same in Python).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__jsonscreen(void)
{
    return PyModuleDef_Init(&module);
}
