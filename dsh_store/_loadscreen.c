/* The lossless check of a decoded line, on sight, in C (see jsonvalue.check_loaded).
 *
 * lossless(value, raw) says whether value, which orjson decoded from the bytes raw, is
 * one that check_loaded accepts, proven without encoding it again:
 *
 * - the value holds only exact dict, list, str, int, bool and None, and floats that are
 *   finite, not -0.0 and below 2^63 in magnitude (an integer literal beyond 64 bits is
 *   decoded as a float at least that large, so no such literal can have lost digits);
 * - every int is within +-(2^53 - 1) and no container is nested deeper than MAX_DEPTH
 *   levels (so the strict encoder would accept the value as it is);
 * - no object of raw repeats a key: raw holds exactly as many name separators (a colon
 *   outside a string) as the decoded dicts hold keys, and a repeated key leaves its dict
 *   one key short.
 *
 * raw is taken to be what value was decoded from (valid JSON, so a quote preceded by an
 * odd run of backslashes is inside a string). The walk reads containers in place and
 * calls no Python code. False never decides a refusal: the caller then runs the precise
 * check, which names the problem or accepts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

/* jsonvalue.MAX_DEPTH: the container levels the strict encoder writes. */
#define MAX_DEPTH 254
#define MAX_SAFE_INTEGER 9007199254740991LL
/* 2^63: a decoded float this large may stand for an integer literal beyond 64 bits. */
#define HUGE_FLOAT 9223372036854775808.0

static int loaded_is_plain(PyObject *value, int levels_left, Py_ssize_t *keys);

static inline int
scalar_is_plain(PyObject *value, PyTypeObject *kind)
{
    if (kind == &PyUnicode_Type || kind == &PyBool_Type || value == Py_None) {
        return 1;
    }
    if (kind == &PyLong_Type) {
        int overflow = 0;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        return !overflow && number <= MAX_SAFE_INTEGER && number >= -MAX_SAFE_INTEGER;
    }
    if (kind == &PyFloat_Type) {
        double number = PyFloat_AS_DOUBLE(value);
        return isfinite(number) && !(number == 0.0 && signbit(number)) &&
               fabs(number) < HUGE_FLOAT;
    }
    return -1; /* a container, or something else */
}

static inline int
member_is_plain(PyObject *member, int levels_left, Py_ssize_t *keys)
{
    PyTypeObject *kind = Py_TYPE(member);
    if (kind == &PyUnicode_Type) { /* most members: judged without a call */
        return 1;
    }
    int scalar = scalar_is_plain(member, kind);
    return scalar >= 0 ? scalar : loaded_is_plain(member, levels_left, keys);
}

/* A container: levels_left counts the levels it and its members may still use. */
static int
loaded_is_plain(PyObject *value, int levels_left, Py_ssize_t *keys)
{
    PyTypeObject *kind = Py_TYPE(value);
    if (levels_left == 0) {
        return 0;
    }
    if (kind == &PyDict_Type) {
        Py_ssize_t position = 0;
        PyObject *key, *member;
        *keys += PyDict_GET_SIZE(value);
        while (PyDict_Next(value, &position, &key, &member)) {
            if (Py_TYPE(key) != &PyUnicode_Type ||
                !member_is_plain(member, levels_left - 1, keys)) {
                return 0;
            }
        }
        return 1;
    }
    if (kind == &PyList_Type) {
        for (Py_ssize_t index = 0; index < PyList_GET_SIZE(value); index++) {
            if (!member_is_plain(PyList_GET_ITEM(value, index), levels_left - 1, keys)) {
                return 0;
            }
        }
        return 1;
    }
    return 0;
}

/* The colons outside strings of the JSON text [text, end): its name separators. */
static Py_ssize_t
name_separators(const char *text, const char *end)
{
    Py_ssize_t colons = 0;
    while (text < end) {
        char c = *text;
        if (c == ':') {
            colons++;
        }
        else if (c == '"') {
            /* The closing quote: the first one not escaped by an odd run of backslashes.
             * The run stops at the opening quote at the latest. */
            const char *quote = text + 1;
            for (;;) {
                quote = memchr(quote, '"', (size_t)(end - quote));
                if (quote == NULL) {
                    return -1; /* not what a decoder accepted */
                }
                const char *run = quote;
                while (run[-1] == '\\') {
                    run--;
                }
                if (((quote - run) & 1) == 0) {
                    break;
                }
                quote++;
            }
            text = quote;
        }
        text++;
    }
    return colons;
}

static PyObject *
lossless(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "lossless() takes exactly 2 arguments (value, raw)");
        return NULL;
    }
    PyObject *value = args[0], *raw = args[1];
    if (!PyBytes_CheckExact(raw)) {
        Py_RETURN_FALSE;
    }
    Py_ssize_t keys = 0;
    PyTypeObject *kind = Py_TYPE(value);
    int plain = scalar_is_plain(value, kind);
    if (plain < 0) {
        plain = loaded_is_plain(value, MAX_DEPTH, &keys);
    }
    if (!plain) {
        Py_RETURN_FALSE;
    }
    const char *text = PyBytes_AS_STRING(raw);
    Py_ssize_t colons = name_separators(text, text + PyBytes_GET_SIZE(raw));
    return PyBool_FromLong(colons == keys);
}

PyDoc_STRVAR(lossless_doc,
"lossless(value, raw, /)\n--\n\n"
"Whether value, decoded by orjson from the bytes raw, is lossless JSON as read: only\n"
"exact JSON types, safe integers, finite floats other than -0.0 below 2^63, at most\n"
"MAX_DEPTH levels, and no key repeated in raw. False: run the precise check.");

static PyMethodDef methods[] = {
    {"lossless", (PyCFunction)(void (*)(void))lossless, METH_FASTCALL, lossless_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dsh_store._loadscreen",
    .m_doc = "The lossless check of a decoded line in C (optional; jsonvalue re-encodes "
             "without it).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__loadscreen(void)
{
    return PyModuleDef_Init(&module);
}
