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
 * the screen. The line is a copy at its own size with the newline added, so a kept line
 * does not hold the encoder's growth buffer. None means "not proven": the caller's precise
 * path decides.
 *
 * payload_facts(event_type, data) is the payload check of the common core event types
 * (dsh_store/model/shapes.py, the _fast_* functions, in C): the EventFacts of a payload in
 * the common well-formed shape, or None, and then the precise checker in Python decides and
 * names what it refuses. It accepts a subset of what the precise checkers accept, with the
 * same facts; anything it is not sure of (a str subclass where a name is compared, a type
 * it does not know) is None. It looks only into dicts whose keys are all exact str, so no
 * lookup runs Python code, and holds what it uses across its allocations (which may run
 * finalizers).
 *
 * new_event(...) is make_event of dsh_store/model/events.py: it allocates the immutable
 * event class configured by configure_event() and fills its slots in place, as the slots'
 * own descriptors do (the class's __setattr__ refuses every store).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <structmember.h>

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
    /* A copy at the line's own size, with its newline: the encoder's growth buffer (several
     * times the line) goes back to the allocator, warm for the next encoding. Shrinking it
     * in place instead leaves every line in fresh memory: five times the page faults. */
    Py_ssize_t size = PyBytes_GET_SIZE(line);
    PyObject *copy = PyBytes_FromStringAndSize(NULL, size + 1);
    if (copy != NULL) {
        memcpy(PyBytes_AS_STRING(copy), PyBytes_AS_STRING(line), (size_t)size);
        PyBytes_AS_STRING(copy)[size] = '\n';
    }
    Py_DECREF(line);
    return copy;
}

/* -- payload facts ------------------------------------------------------------------- */

#define MAX_SAFE_INTEGER 9007199254740991LL

enum kind {
    TURN_START,
    TURN_END,
    STEP,
    USER_MESSAGE,
    ASSISTANT_MESSAGE,
    TOOL_CALL,
    TOOL_RESULT,
    REQUEST_HEADER,
};

static PyObject *facts_type = NULL; /* shapes.EventFacts */
static PyObject *no_facts = NULL;   /* shapes.NO_FACTS */
static PyObject *kinds = NULL;      /* event type -> enum kind */
static PyObject *no_calls = NULL;   /* () */

/* Interned keys and names. */
static PyObject *k_turn, *k_step, *k_reason, *k_kind, *k_role, *k_content, *k_message,
    *k_stream, *k_interrupted, *k_source, *k_provider, *k_model, *k_type, *k_id, *k_call_id,
    *k_name, *k_arguments, *k_error, *k_tool_call_id, *k_is_error, *k_header, *k_system,
    *k_starts_series, *k_tools, *k_adapter_defaults, *k_config;
static PyObject *n_user, *n_assistant, *n_tool, *n_tool_call, *n_initial, *n_resume,
    *n_change, *n_series;

/* Whether every key of dict is an exact str. Only then does a lookup in it run no Python
 * code (a key of another type compares through its own __eq__). A payload with any other
 * key breaks the lossless rules, so leaving it to the precise path loses nothing. */
static int
text_keyed(PyObject *dict)
{
    Py_ssize_t position = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &position, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            return 0;
        }
    }
    return 1;
}

/* An exact dict with exact str keys only: one member() may read. */
static inline int
is_object(PyObject *value)
{
    return value != NULL && PyDict_CheckExact(value) && text_keyed(value);
}

/* The member of an is_object() dict under an interned key, borrowed, or NULL when absent.
 * The lookup compares exact str only, so it runs no Python code and cannot fail. */
static inline PyObject *
member(PyObject *dict, PyObject *key)
{
    return PyDict_GetItemWithError(dict, key);
}

/* A turn or step number: an exact int in 1 .. 2^53 - 1. */
static inline int
is_positive(PyObject *value)
{
    if (value == NULL || !PyLong_CheckExact(value)) {
        return 0;
    }
    int overflow = 0;
    long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
    return overflow == 0 && number > 0 && number <= MAX_SAFE_INTEGER;
}

static inline int
is_text(PyObject *value)
{
    return value != NULL && PyUnicode_CheckExact(value) && PyUnicode_GET_LENGTH(value) > 0;
}

/* An exact str equal to the interned name (a str subclass is not sure: 0). */
static inline int
is_name(PyObject *value, PyObject *name)
{
    if (value == name) {
        return 1;
    }
    return value != NULL && PyUnicode_CheckExact(value) && PyUnicode_Compare(value, name) == 0;
}

/* A value of an exact builtin type whose == with a str is False, never user code. */
static inline int
is_builtin_other_than_str(PyObject *value)
{
    PyTypeObject *kind = Py_TYPE(value);
    return kind == &PyDict_Type || kind == &PyList_Type || kind == &PyTuple_Type ||
           kind == &PyLong_Type || kind == &PyFloat_Type || kind == &PyBool_Type ||
           value == Py_None;
}

/* What a content block is to the requested calls: 1 a tool call with a non-empty id (set
 * in *call_id, borrowed), 0 anything else, -1 not sure (Python may read it otherwise). */
static int
block_call(PyObject *block, PyObject **call_id)
{
    if (!PyDict_CheckExact(block)) {
        return 0;
    }
    if (!text_keyed(block)) {
        return -1;
    }
    PyObject *kind = member(block, k_type);
    if (kind == NULL) {
        return 0;
    }
    if (!PyUnicode_CheckExact(kind)) {
        return is_builtin_other_than_str(kind) ? 0 : -1;
    }
    if (PyUnicode_Compare(kind, n_tool_call) != 0) {
        return 0;
    }
    *call_id = member(block, k_id);
    return is_text(*call_id) ? 1 : -1;
}

/* The assistant payload's own checks; *content (borrowed) and *count of its tool calls. */
static int
assistant_ok(PyObject *data, PyObject **content, Py_ssize_t *count)
{
    PyObject *message = member(data, k_message);
    PyObject *stream = member(data, k_stream);
    PyObject *interrupted = member(data, k_interrupted);
    if (!is_object(message) || stream == NULL || !PyList_CheckExact(stream) ||
        (interrupted != NULL && interrupted != Py_True) ||
        !is_name(member(message, k_role), n_assistant)) {
        return 0;
    }
    PyObject *blocks = member(message, k_content);
    PyObject *source = member(message, k_source);
    if (blocks == NULL || !PyList_CheckExact(blocks) || !is_object(source) ||
        !is_text(member(source, k_provider)) || !is_text(member(source, k_model))) {
        return 0;
    }
    Py_ssize_t calls = 0;
    for (Py_ssize_t index = 0; index < PyList_GET_SIZE(blocks); index++) {
        PyObject *call_id;
        int found = block_call(PyList_GET_ITEM(blocks, index), &call_id);
        if (found < 0) {
            return 0;
        }
        calls += found;
    }
    *content = blocks;
    *count = calls;
    return 1;
}

/* The ids of the content's tool calls, or None if they are no longer count (a finalizer
 * run by the tuple's allocation changed the content). content is held by the caller. */
static PyObject *
collect_calls(PyObject *content, Py_ssize_t count)
{
    PyObject *calls = PyTuple_New(count);
    if (calls == NULL) {
        return NULL;
    }
    Py_ssize_t filled = 0;
    for (Py_ssize_t index = 0; index < PyList_GET_SIZE(content); index++) {
        PyObject *call_id;
        int found = block_call(PyList_GET_ITEM(content, index), &call_id);
        if (found < 0 || (found && filled == count)) {
            break;
        }
        if (found) {
            PyTuple_SET_ITEM(calls, filled, Py_NewRef(call_id));
            filled++;
        }
    }
    if (filled != count) {
        Py_DECREF(calls);
        Py_RETURN_NONE;
    }
    return calls;
}

static int
tool_result_ok(PyObject *data, PyObject **call_id)
{
    PyObject *message = member(data, k_message);
    if (!is_object(message) || member(data, k_error) != NULL) {
        return 0;
    }
    PyObject *content = member(message, k_content);
    PyObject *is_error = member(message, k_is_error);
    *call_id = member(message, k_tool_call_id);
    return is_name(member(message, k_role), n_tool) && is_text(*call_id) && content != NULL &&
           PyList_CheckExact(content) && (is_error == NULL || PyBool_Check(is_error));
}

static int
request_header_ok(PyObject *data)
{
    PyObject *header = member(data, k_header);
    PyObject *reason = member(data, k_reason);
    PyObject *starts = member(data, k_starts_series);
    if (!is_object(header) || reason == NULL || !PyUnicode_CheckExact(reason) ||
        !(is_name(reason, n_initial) || is_name(reason, n_resume) ||
          is_name(reason, n_change) || is_name(reason, n_series)) ||
        (starts != NULL && starts != Py_True) || member(header, k_system) != NULL) {
        return 0;
    }
    PyObject *tools = member(header, k_tools);
    PyObject *defaults = member(header, k_adapter_defaults);
    PyObject *config = member(header, k_config);
    return (tools == NULL || (PyList_CheckExact(tools) && PyList_GET_SIZE(tools) > 0)) &&
           (defaults == NULL || (PyDict_CheckExact(defaults) && PyDict_GET_SIZE(defaults) > 0)) &&
           is_object(config) && is_text(member(config, k_provider)) &&
           is_text(member(config, k_model));
}

/* The facts (turn, step, call_id, requested calls, None, False, projects). An allocation
 * may run the collector and with it finalizers, Python code that could drop what the
 * payload held: every value used after one is held first. */
static PyObject *
build_facts(PyObject *turn, PyObject *step, PyObject *call_id, PyObject *content,
            Py_ssize_t count, int projects)
{
    PyObject *held[4] = {Py_NewRef(turn), Py_NewRef(step), Py_NewRef(call_id), NULL};
    PyObject *calls = Py_NewRef(no_calls);
    PyObject *facts = NULL;
    if (content != NULL && count > 0) {
        held[3] = Py_NewRef(content);
        Py_SETREF(calls, collect_calls(content, count));
        if (calls == NULL || calls == Py_None) {
            facts = calls; /* an error, or not sure */
            calls = NULL;
            goto done;
        }
    }
    PyTypeObject *type = (PyTypeObject *)facts_type;
    facts = type->tp_alloc(type, 7);
    if (facts == NULL) {
        goto done;
    }
    PyObject *values[7] = {
        held[0], held[1], held[2], calls, Py_None, Py_False, projects ? Py_True : Py_False,
    };
    for (int index = 0; index < 7; index++) {
        PyTuple_SET_ITEM(facts, index, Py_NewRef(values[index]));
    }
done:
    for (int index = 0; index < 4; index++) {
        Py_XDECREF(held[index]);
    }
    Py_XDECREF(calls);
    return facts;
}

static PyObject *
payload_facts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "payload_facts(event_type, data) takes 2 arguments");
        return NULL;
    }
    if (facts_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "payload_facts: configure_facts() was not called");
        return NULL;
    }
    PyObject *event_type = args[0];
    PyObject *data = args[1];
    if (!PyUnicode_CheckExact(event_type) || !is_object(data)) {
        Py_RETURN_NONE;
    }
    PyObject *code = PyDict_GetItemWithError(kinds, event_type);
    if (code == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    enum kind kind = (enum kind)PyLong_AsLong(code);
    if (kind == USER_MESSAGE) {
        PyObject *content = member(data, k_content);
        if (is_name(member(data, k_role), n_user) && content != NULL &&
            PyList_CheckExact(content)) {
            return Py_NewRef(no_facts);
        }
        Py_RETURN_NONE;
    }
    if (kind == REQUEST_HEADER) {
        return Py_NewRef(request_header_ok(data) ? no_facts : Py_None);
    }
    PyObject *turn = member(data, k_turn);
    if (!is_positive(turn)) {
        Py_RETURN_NONE;
    }
    if (kind == TURN_START) {
        return build_facts(turn, Py_None, Py_None, NULL, 0, 1);
    }
    if (kind == TURN_END) {
        PyObject *reason = member(data, k_reason);
        if (is_object(reason) && is_text(member(reason, k_kind))) {
            return build_facts(turn, Py_None, Py_None, NULL, 0, 1);
        }
        Py_RETURN_NONE;
    }
    PyObject *step = member(data, k_step);
    if (!is_positive(step)) {
        Py_RETURN_NONE;
    }
    PyObject *call_id = NULL;
    PyObject *content = NULL;
    Py_ssize_t count = 0;
    switch (kind) {
    case STEP:
        return build_facts(turn, step, Py_None, NULL, 0, 1);
    case ASSISTANT_MESSAGE:
        if (assistant_ok(data, &content, &count)) {
            return build_facts(turn, step, Py_None, content, count,
                               PyList_GET_SIZE(content) > 0);
        }
        Py_RETURN_NONE;
    case TOOL_CALL: {
        PyObject *arguments = member(data, k_arguments);
        call_id = member(data, k_call_id);
        if (is_text(call_id) && is_text(member(data, k_name)) && arguments != NULL &&
            PyUnicode_CheckExact(arguments)) {
            return build_facts(turn, step, call_id, NULL, 0, 1);
        }
        Py_RETURN_NONE;
    }
    case TOOL_RESULT:
        if (tool_result_ok(data, &call_id)) {
            return build_facts(turn, step, call_id, NULL, 0, 1);
        }
        Py_RETURN_NONE;
    default:
        Py_RETURN_NONE;
    }
}

static int
intern_all(void)
{
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {
        {&k_turn, "turn"},
        {&k_step, "step"},
        {&k_reason, "reason"},
        {&k_kind, "kind"},
        {&k_role, "role"},
        {&k_content, "content"},
        {&k_message, "message"},
        {&k_stream, "stream"},
        {&k_interrupted, "interrupted"},
        {&k_source, "source"},
        {&k_provider, "provider"},
        {&k_model, "model"},
        {&k_type, "type"},
        {&k_id, "id"},
        {&k_call_id, "callId"},
        {&k_name, "name"},
        {&k_arguments, "arguments"},
        {&k_error, "error"},
        {&k_tool_call_id, "toolCallId"},
        {&k_is_error, "isError"},
        {&k_header, "header"},
        {&k_system, "system"},
        {&k_starts_series, "startsSeries"},
        {&k_tools, "tools"},
        {&k_adapter_defaults, "adapterDefaults"},
        {&k_config, "config"},
        {&n_user, "user"},
        {&n_assistant, "assistant"},
        {&n_tool, "tool"},
        {&n_tool_call, "tool-call"},
        {&n_initial, "initial"},
        {&n_resume, "resume"},
        {&n_change, "change"},
        {&n_series, "series"},
    };
    for (size_t index = 0; index < sizeof(names) / sizeof(names[0]); index++) {
        if (*names[index].slot == NULL) {
            *names[index].slot = PyUnicode_InternFromString(names[index].text);
            if (*names[index].slot == NULL) {
                return -1;
            }
        }
    }
    return 0;
}

static PyObject *
configure_facts(PyObject *module, PyObject *args)
{
    PyObject *type, *empty;
    if (!PyArg_ParseTuple(args, "O!O:configure_facts", &PyType_Type, &type, &empty)) {
        return NULL;
    }
    if (!PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type) ||
        ((PyTypeObject *)type)->tp_basicsize != PyTuple_Type.tp_basicsize ||
        !PyObject_TypeCheck(empty, (PyTypeObject *)type) || PyTuple_GET_SIZE(empty) != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_facts(a 7-field NamedTuple class, its empty value)");
        return NULL;
    }
    if (intern_all() < 0) {
        return NULL;
    }
    if (no_calls == NULL && (no_calls = PyTuple_New(0)) == NULL) {
        return NULL;
    }
    if (kinds == NULL) {
        struct {
            const char *name;
            enum kind kind;
        } table[] = {
            {"turn/start", TURN_START},
            {"turn/end", TURN_END},
            {"step/start", STEP},
            {"step/end", STEP},
            {"user/message", USER_MESSAGE},
            {"assistant/message", ASSISTANT_MESSAGE},
            {"tool/call", TOOL_CALL},
            {"tool/result", TOOL_RESULT},
            {"request/header", REQUEST_HEADER},
        };
        PyObject *built = PyDict_New();
        if (built == NULL) {
            return NULL;
        }
        for (size_t index = 0; index < sizeof(table) / sizeof(table[0]); index++) {
            PyObject *code = PyLong_FromLong(table[index].kind);
            if (code == NULL || PyDict_SetItemString(built, table[index].name, code) < 0) {
                Py_XDECREF(code);
                Py_DECREF(built);
                return NULL;
            }
            Py_DECREF(code);
        }
        kinds = built;
    }
    Py_INCREF(type);
    Py_XSETREF(facts_type, type);
    Py_INCREF(empty);
    Py_XSETREF(no_facts, empty);
    Py_RETURN_NONE;
}

/* -- events ----------------------------------------------------------------------------- */

/* The slots new_event fills, in the order of make_event's parameters, then _data. */
#define EVENT_FIELDS 9
static PyTypeObject *event_type = NULL;
static Py_ssize_t event_offsets[EVENT_FIELDS];
static PyObject *event_unset = NULL; /* events._UNSET: data not decoded yet */

static PyObject *
configure_event(PyObject *module, PyObject *args)
{
    PyObject *type, *slots, *unset;
    if (!PyArg_ParseTuple(args, "O!O!O:configure_event", &PyType_Type, &type, &PyTuple_Type,
                          &slots, &unset)) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(slots) != EVENT_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "configure_event: 9 slot descriptors expected");
        return NULL;
    }
    Py_ssize_t offsets[EVENT_FIELDS];
    for (Py_ssize_t index = 0; index < EVENT_FIELDS; index++) {
        PyObject *slot = PyTuple_GET_ITEM(slots, index);
        if (!Py_IS_TYPE(slot, &PyMemberDescr_Type)) {
            PyErr_SetString(PyExc_TypeError, "configure_event: a slot descriptor expected");
            return NULL;
        }
        PyMemberDescrObject *descriptor = (PyMemberDescrObject *)slot;
        if (descriptor->d_member->type != T_OBJECT_EX ||
            (descriptor->d_member->flags & READONLY) ||
            !PyType_IsSubtype((PyTypeObject *)type, PyDescr_TYPE(descriptor))) {
            PyErr_SetString(PyExc_TypeError,
                            "configure_event: a writable object slot of the class expected");
            return NULL;
        }
        offsets[index] = descriptor->d_member->offset;
    }
    memcpy(event_offsets, offsets, sizeof(offsets));
    Py_INCREF(type);
    Py_XSETREF(event_type, (PyTypeObject *)type);
    Py_INCREF(unset);
    Py_XSETREF(event_unset, unset);
    Py_RETURN_NONE;
}

static PyObject *
new_event(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != EVENT_FIELDS - 1) {
        PyErr_SetString(PyExc_TypeError,
                        "new_event(type, seq, time, line, ignorable, op, sources, facts)");
        return NULL;
    }
    if (event_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "new_event: configure_event() was not called");
        return NULL;
    }
    PyObject *event = event_type->tp_alloc(event_type, 0);
    if (event == NULL) {
        return NULL;
    }
    for (Py_ssize_t index = 0; index < EVENT_FIELDS; index++) {
        PyObject *value = index < EVENT_FIELDS - 1 ? args[index] : event_unset;
        PyObject **slot = (PyObject **)((char *)event + event_offsets[index]);
        Py_INCREF(value);
        Py_XSETREF(*slot, value);
    }
    return event;
}

PyDoc_STRVAR(configure_event_doc,
"configure_event(event_class, slots, unset, /)\n--\n\n"
"Set the class new_event builds and the descriptors of the slots it fills (type, seq,\n"
"time, _line, ignorable, surface_op, source_event_seqs, _facts, _data), _data to unset.");

PyDoc_STRVAR(new_event_doc,
"new_event(type, seq, time, line, ignorable, op, sources, facts, /)\n--\n\n"
"A new event of the configured class with its slots filled (make_event in C).");

PyDoc_STRVAR(configure_facts_doc,
"configure_facts(facts_type, no_facts, /)\n--\n\n"
"Set the EventFacts class and its empty value payload_facts returns.");

PyDoc_STRVAR(payload_facts_doc,
"payload_facts(event_type, data, /)\n--\n\n"
"The EventFacts of a common core payload in its well-formed shape, or None (the precise\n"
"check in Python decides).");

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
    {"configure_facts", configure_facts, METH_VARARGS, configure_facts_doc},
    {"configure_event", configure_event, METH_VARARGS, configure_event_doc},
    {"new_event", (PyCFunction)(void (*)(void))new_event, METH_FASTCALL, new_event_doc},
    {"payload_facts", (PyCFunction)(void (*)(void))payload_facts, METH_FASTCALL,
     payload_facts_doc},
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
