/* The fast path of the zstd structural frame walk, in C (see dsh_store/jsonl/zstd_frames.py).
 *
 * plain_frames(window, start, base, most, span_type) walks the plain complete zstd frames
 * that follow one another from window[start] and lie wholly in the window, and returns
 * (spans, stop): one span_type instance per frame, built as _parse_plain builds its
 * FrameSpan, and the window index where the run ends. It stops, without saying why, at the
 * first frame that is not plain (wrong magic, a reserved, unused or dictionary id bit, a
 * reserved block type, an oversized block), that the window ends inside, or after `most`
 * frames; the Python walk then takes that frame and names what it is.
 *
 * Every read is checked against the window's length first, so no input (a hostile file, a
 * window cut anywhere, a start or base out of range) makes it read outside the window; the
 * tests compare it with _plain_frames_in_python on every cut and bit flip of a log and on
 * random bytes. It calls no Python code and holds the GIL throughout (it builds objects).
 *
 * whole_lines(plaintext) splits a decoded frame (any buffer, so the binding's output is
 * read in place, not copied first) into its lines, as zstd_codec._whole_lines_in_python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define BLOCK_SIZE_MAX (128 * 1024)

/* The header of the frame at window[i]: on success (1) its first block header's index,
 * whether it has a checksum and its declared content size (has_size = 0: none). 0: not a
 * plain frame header, or the header does not fit the window. */
static int
parse_header(const unsigned char *window, Py_ssize_t length, Py_ssize_t i, Py_ssize_t *blocks,
             int *checksum, int *has_size, unsigned long long *content_size)
{
    static const int fcs_sizes[4] = {0, 2, 4, 8};
    if (length - i < 5 || window[i] != 0x28 || window[i + 1] != 0xB5 || window[i + 2] != 0x2F ||
        window[i + 3] != 0xFD) {
        return 0;
    }
    unsigned char descriptor = window[i + 4];
    if (descriptor & 0x1B) { /* reserved bit, unused bit or a dictionary id field */
        return 0;
    }
    int fcs_flag = descriptor >> 6;
    int window_size = (descriptor & 0x20) ? 0 : 1;
    int fcs_size = (fcs_flag == 0 && !window_size) ? 1 : fcs_sizes[fcs_flag];
    Py_ssize_t fields = i + 5 + window_size;
    if (length - fields < fcs_size + 3) { /* the content size and a block header */
        return 0;
    }
    unsigned long long size = 0;
    for (int byte = fcs_size - 1; byte >= 0; byte--) {
        size = (size << 8) | window[fields + byte];
    }
    if (fcs_size == 2) {
        size += 256;
    }
    *blocks = fields + fcs_size;
    *checksum = (descriptor & 0x04) != 0;
    *has_size = fcs_size != 0;
    *content_size = size;
    return 1;
}

/* Walk the blocks from window[position]: 1 and the frame's end index (after the trailer)
 * and block count when the frame is complete in the window and its blocks are allowed. */
static int
walk_blocks(const unsigned char *window, Py_ssize_t length, Py_ssize_t position, int checksum,
            Py_ssize_t *end, Py_ssize_t *count)
{
    Py_ssize_t blocks = 0;
    while (length - position >= 3) {
        uint32_t header = (uint32_t)window[position] | (uint32_t)window[position + 1] << 8 |
                          (uint32_t)window[position + 2] << 16;
        uint32_t type = (header >> 1) & 3;
        uint32_t size = header >> 3;
        if (type == 3 || size > BLOCK_SIZE_MAX) {
            return 0;
        }
        Py_ssize_t payload = type == 1 ? 1 : (Py_ssize_t)size;
        position += 3;
        if (length - position < payload) {
            return 0; /* the window ends inside the block */
        }
        position += payload;
        blocks++;
        if (header & 1) {
            if (checksum) {
                if (length - position < 4) {
                    return 0; /* the window ends inside the trailer */
                }
                position += 4;
            }
            *end = position;
            *count = blocks;
            return 1;
        }
    }
    return 0;
}

/* A span_type instance (a tuple subclass of six items, as FrameSpan) for one frame. */
static PyObject *
make_span(PyTypeObject *span_type, const unsigned char *window, Py_ssize_t base, Py_ssize_t i,
          Py_ssize_t first_block, Py_ssize_t end, Py_ssize_t count, int checksum, int has_size,
          unsigned long long content_size)
{
    PyObject *blocks = PyTuple_New(count);
    if (blocks == NULL) {
        return NULL;
    }
    Py_ssize_t position = first_block;
    for (Py_ssize_t index = 0; index < count; index++) {
        /* Already checked by walk_blocks: every header and payload lies before `end`. */
        uint32_t header = (uint32_t)window[position] | (uint32_t)window[position + 1] << 8 |
                          (uint32_t)window[position + 2] << 16;
        position += 3 + (((header >> 1) & 3) == 1 ? 1 : (Py_ssize_t)(header >> 3));
        PyObject *block_end = PyLong_FromSsize_t(base + position);
        if (block_end == NULL) {
            Py_DECREF(blocks);
            return NULL;
        }
        PyTuple_SET_ITEM(blocks, index, block_end);
    }
    PyObject *items[6];
    items[0] = PyLong_FromSsize_t(base + i);
    items[1] = PyLong_FromSsize_t(base + end);
    items[2] = Py_NewRef(Py_False);
    items[3] = has_size ? PyLong_FromUnsignedLongLong(content_size) : Py_NewRef(Py_None);
    items[4] = PyBool_FromLong(checksum);
    items[5] = blocks;
    PyObject *span = NULL;
    if (items[0] != NULL && items[1] != NULL && items[3] != NULL) {
        span = span_type->tp_alloc(span_type, 6);
    }
    if (span == NULL) {
        for (int item = 0; item < 6; item++) {
            Py_XDECREF(items[item]);
        }
        return NULL;
    }
    for (int item = 0; item < 6; item++) {
        PyTuple_SET_ITEM(span, item, items[item]);
    }
    return span;
}

static PyObject *
plain_frames(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "plain_frames() takes 5 arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t base = PyLong_AsSsize_t(args[2]);
    Py_ssize_t most = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (!PyType_Check(args[4]) || !PyType_IsSubtype((PyTypeObject *)args[4], &PyTuple_Type) ||
        ((PyTypeObject *)args[4])->tp_basicsize != PyTuple_Type.tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "span_type must be a tuple subclass without slots");
        return NULL;
    }
    PyTypeObject *span_type = (PyTypeObject *)args[4];
    Py_buffer buffer;
    if (PyObject_GetBuffer(args[0], &buffer, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *window = buffer.buf;
    Py_ssize_t length = buffer.len;
    PyObject *spans = NULL;
    if (start < 0 || start > length || base < 0 || base > PY_SSIZE_T_MAX - length) {
        PyErr_SetString(PyExc_ValueError, "start must lie in the window, base from 0 on");
        goto done;
    }
    spans = PyList_New(0);
    if (spans == NULL) {
        goto done;
    }
    Py_ssize_t i = start;
    while (PyList_GET_SIZE(spans) < most) {
        Py_ssize_t first_block, end, count;
        int checksum, has_size;
        unsigned long long content_size;
        if (!parse_header(window, length, i, &first_block, &checksum, &has_size, &content_size) ||
            !walk_blocks(window, length, first_block, checksum, &end, &count)) {
            break;
        }
        PyObject *span = make_span(span_type, window, base, i, first_block, end, count, checksum,
                                   has_size, content_size);
        if (span == NULL || PyList_Append(spans, span) < 0) {
            Py_XDECREF(span);
            Py_CLEAR(spans);
            goto done;
        }
        Py_DECREF(span);
        i = end;
    }
    PyObject *result = Py_BuildValue("(Nn)", spans, i);
    PyBuffer_Release(&buffer);
    return result;
done:
    PyBuffer_Release(&buffer);
    return spans;
}

static PyObject *
whole_lines(PyObject *module, PyObject *plaintext)
{
    Py_buffer buffer;
    if (PyObject_GetBuffer(plaintext, &buffer, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const char *data = buffer.buf;
    Py_ssize_t length = buffer.len;
    PyObject *lines = NULL;
    if (length > 0 && data[length - 1] != '\n') {
        lines = Py_NewRef(Py_None); /* it ends inside a line */
        goto done;
    }
    lines = PyList_New(0);
    Py_ssize_t start = 0;
    while (lines != NULL && start < length) {
        /* The last byte is a newline, so memchr always finds one before the end. */
        const char *newline = memchr(data + start, '\n', (size_t)(length - start));
        Py_ssize_t end = newline - data;
        PyObject *line = PyBytes_FromStringAndSize(data + start, end - start);
        if (line == NULL || PyList_Append(lines, line) < 0) {
            Py_CLEAR(lines);
        }
        Py_XDECREF(line);
        start = end + 1;
    }
done:
    PyBuffer_Release(&buffer);
    return lines;
}

PyDoc_STRVAR(whole_lines_doc,
"whole_lines(plaintext, /)\n--\n\n"
"The lines of a frame's plaintext (any buffer), without their newlines, when it is empty\n"
"or ends in a newline; None when it ends inside a line.");

PyDoc_STRVAR(plain_frames_doc,
"plain_frames(window, start, base, most, span_type, /)\n--\n\n"
"The plain complete zstd frames that follow one another from window[start] and lie wholly\n"
"in the window (at most most of them), as span_type instances, and the window index where\n"
"that run ends (the fast path of dsh_store.jsonl.zstd_frames).");

static PyMethodDef methods[] = {
    {"plain_frames", (PyCFunction)(void (*)(void))plain_frames, METH_FASTCALL, plain_frames_doc},
    {"whole_lines", whole_lines, METH_O, whole_lines_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dsh_store._zstdwalk",
    .m_doc = "The zstd frame walk's fast path in C (optional; zstd_frames has the same in "
             "Python).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__zstdwalk(void)
{
    return PyModuleDef_Init(&module);
}
