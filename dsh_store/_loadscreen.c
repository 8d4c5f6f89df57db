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
 * - no object of raw repeats a key: raw holds exactly as many strings as the decoded
 *   value (keys and str values), counted as unescaped quotes, two per string. Each string
 *   of raw decodes to one str, except where a repeated key drops the earlier member: its
 *   key and every string of its value.
 *
 * raw is taken to be what value was decoded from (valid JSON, so a quote preceded by an
 * odd run of backslashes is inside a string, and any other quote opens or closes one).
 * The walk reads containers in place and calls no Python code. False never decides a
 * refusal: the caller then runs the precise check, which names the problem or accepts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>
#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>
#endif

/* jsonvalue.MAX_DEPTH: the container levels the strict encoder writes. */
#define MAX_DEPTH 254
#define MAX_SAFE_INTEGER 9007199254740991LL
/* 2^63: a decoded float this large may stand for an integer literal beyond 64 bits. */
#define HUGE_FLOAT 9223372036854775808.0

static int loaded_is_plain(PyObject *value, int levels_left, Py_ssize_t *strings);

static inline int
scalar_is_plain(PyObject *value, PyTypeObject *kind)
{
    if (kind == &PyUnicode_Type || kind == &PyBool_Type || value == Py_None) {
        return 1;
    }
    if (kind == &PyLong_Type) {
        /* One digit (below 2^30 in magnitude, most ints): safe without a conversion. */
#if PY_VERSION_HEX >= 0x030C0000
        if (PyUnstable_Long_IsCompact((PyLongObject *)value)) {
            return 1;
        }
#else
        if (Py_ABS(Py_SIZE(value)) <= 1) {
            return 1;
        }
#endif
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
member_is_plain(PyObject *member, int levels_left, Py_ssize_t *strings)
{
    PyTypeObject *kind = Py_TYPE(member);
    if (kind == &PyUnicode_Type) { /* most members: judged without a call */
        ++*strings;
        return 1;
    }
    int scalar = scalar_is_plain(member, kind);
    return scalar >= 0 ? scalar : loaded_is_plain(member, levels_left, strings);
}

/* A container: levels_left counts the levels it and its members may still use; strings
 * counts the str keys and values met. */
static int
loaded_is_plain(PyObject *value, int levels_left, Py_ssize_t *strings)
{
    PyTypeObject *kind = Py_TYPE(value);
    if (levels_left == 0) {
        return 0;
    }
    if (kind == &PyDict_Type) {
        Py_ssize_t position = 0;
        PyObject *key, *member;
        *strings += PyDict_GET_SIZE(value);
        while (PyDict_Next(value, &position, &key, &member)) {
            if (Py_TYPE(key) != &PyUnicode_Type ||
                !member_is_plain(member, levels_left - 1, strings)) {
                return 0;
            }
        }
        return 1;
    }
    if (kind == &PyList_Type) {
        for (Py_ssize_t index = 0; index < PyList_GET_SIZE(value); index++) {
            if (!member_is_plain(PyList_GET_ITEM(value, index), levels_left - 1, strings)) {
                return 0;
            }
        }
        return 1;
    }
    return 0;
}

/* Whether the quote at text[at] is escaped: an odd run of backslashes right before it. */
static inline int
escaped(const char *text, Py_ssize_t at)
{
    Py_ssize_t run = at;
    while (run > 0 && text[run - 1] == '\\') {
        run--;
    }
    return (at - run) & 1;
}

/* The unescaped quotes of the JSON text raw: two per string. */
static Py_ssize_t
unescaped_quotes(const char *text, Py_ssize_t size)
{
    Py_ssize_t quotes = 0, index = 0;
#if defined(__SSE2__) && defined(__x86_64__)
    if (size >= 33) {
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
        const __m128i zero = _mm_setzero_si128();
        __m128i sums = zero;
        quotes = text[0] == '"';
        index = 1; /* each block is compared with the one a byte before it */
        /* Two blocks a step; each byte counter gains at most 2 a step, so they are
         * added up every 127 steps, before any can pass 255. */
        while (index + 32 <= size) {
            __m128i counts = zero;
            for (int step = 0; step < 127 && index + 32 <= size; step++, index += 32) {
                const char *at = text + index;
                __m128i first = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)at), quote);
                __m128i second =
                    _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(at + 16)), quote);
                counts = _mm_sub_epi8(_mm_sub_epi8(counts, first), second);
                /* A quote right after a backslash may be escaped: measure its run. */
                __m128i first_after = _mm_and_si128(
                    first,
                    _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(at - 1)), backslash));
                __m128i second_after = _mm_and_si128(
                    second,
                    _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(at + 15)), backslash));
                if (_mm_movemask_epi8(_mm_or_si128(first_after, second_after))) {
                    unsigned int after_backslash =
                        (unsigned int)_mm_movemask_epi8(first_after) |
                        (unsigned int)_mm_movemask_epi8(second_after) << 16;
                    while (after_backslash) {
                        quotes -= escaped(text, index + __builtin_ctz(after_backslash));
                        after_backslash &= after_backslash - 1;
                    }
                }
            }
            sums = _mm_add_epi64(sums, _mm_sad_epu8(counts, zero));
        }
        quotes += _mm_cvtsi128_si64(sums) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums));
    }
#endif
    for (; index < size; index++) {
        if (text[index] == '"') {
            quotes += 1 - escaped(text, index);
        }
    }
    return quotes;
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
    Py_ssize_t strings = 0;
    PyTypeObject *kind = Py_TYPE(value);
    int plain = scalar_is_plain(value, kind);
    if (plain < 0) {
        plain = loaded_is_plain(value, MAX_DEPTH, &strings);
    }
    else if (kind == &PyUnicode_Type) {
        strings = 1;
    }
    if (!plain) {
        Py_RETURN_FALSE;
    }
    Py_ssize_t quotes = unescaped_quotes(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw));
    return PyBool_FromLong(quotes == 2 * strings);
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
