/* The scans of apps/domain/parsers/lspci_verbose.py in C: where its device blocks start, which
 * detail lines it reads, and whether a block names a detail marker.
 *
 * lspci_verbose.py keeps the same three scans in Python (``_segments_python``,
 * ``_details_python``, ``_has_marker_python``) as the reference; tests/domain/parsers/
 * test_lspci_scan.py asks both for the same answers on every real capture and on damaged and
 * random text. Offsets are code points of the Python str, as str.find gives them.
 *
 * segments(text) -> [(a, e, b, line_no), ...]
 *     One tuple per line that starts in column 0 (not blank, not indented: its first character is
 *     neither a tab, a space nor a newline), in order: the line is text[a:e], its segment (the
 *     line and the indented lines under it) ends at b (the newline before the next column-0 line,
 *     or the end of the text), and line_no is its 1-based line number.
 * details(text, start, end, keys, cap_key, cap_words) -> [(key, rest, at, rest_end), ...]
 *     The detail lines of text[start:end] whose key parse() reads: a newline, a tab or a space,
 *     more white space (str.isspace, not a newline), then one of ``keys`` followed by ':'; or
 *     ``cap_key`` followed by ':' when one of ``cap_words`` occurs in the rest of that line. key is
 *     the str of ``keys`` (or ``cap_key``) that matched, rest the text after the ':' up to the end
 *     of the line (not stripped), at the offset of the line's first character, rest_end the
 *     offset after rest. The same matches, in the same order, as lspci_verbose._DETAIL_RE's
 *     finditer(text, start, end).
 * has_marker(text, start, end, markers) -> bool
 *     Whether one of ``markers`` occurs in text[start:end].
 *
 * Every offset is checked against the text's length before the text is read; every key is a str.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#ifndef SOURCE_SHA
#define SOURCE_SHA "unknown"
#endif

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t len;
} Text;

static int text_of(PyObject *obj, Text *t) {
    if (!PyUnicode_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "text must be a str");
        return -1;
    }
    if (PyUnicode_READY(obj) < 0)
        return -1;
    t->kind = PyUnicode_KIND(obj);
    t->data = PyUnicode_DATA(obj);
    t->len = PyUnicode_GET_LENGTH(obj);
    return 0;
}

#define AT(t, i) PyUnicode_READ((t)->kind, (t)->data, (i))

/* The offset of the first newline in [from, end), or end. */
static Py_ssize_t next_newline(const Text *t, Py_ssize_t from, Py_ssize_t end) {
    if (from >= end)
        return end;
    if (t->kind == PyUnicode_1BYTE_KIND) {
        const char *base = (const char *)t->data;
        const char *hit = memchr(base + from, '\n', (size_t)(end - from));
        return hit ? (Py_ssize_t)(hit - base) : end;
    }
    for (Py_ssize_t i = from; i < end; i++)
        if (AT(t, i) == '\n')
            return i;
    return end;
}

/* Whether str ``word`` (a key) is at offset ``at`` of t, wholly before ``end``. */
static int word_at(const Text *t, Py_ssize_t at, Py_ssize_t end, PyObject *word) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(word);
    if (n > end - at)
        return 0;
    int wk = PyUnicode_KIND(word);
    const void *wd = PyUnicode_DATA(word);
    for (Py_ssize_t j = 0; j < n; j++)
        if (AT(t, at + j) != PyUnicode_READ(wk, wd, j))
            return 0;
    return 1;
}

static int check_range(const Text *t, Py_ssize_t start, Py_ssize_t end) {
    if (start < 0 || end < start || end > t->len) {
        PyErr_Format(PyExc_ValueError, "range [%zd, %zd) is outside the text (%zd characters)", start, end, t->len);
        return -1;
    }
    return 0;
}

/* A tuple of str, every one of them ready and non-empty. */
static int check_words(PyObject *words, const char *what) {
    if (!PyTuple_Check(words)) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple of str", what);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(words); i++) {
        PyObject *w = PyTuple_GET_ITEM(words, i);
        if (!PyUnicode_Check(w) || PyUnicode_READY(w) < 0 || PyUnicode_GET_LENGTH(w) == 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "%s[%zd] must be a non-empty str", what, i);
            return -1;
        }
    }
    return 0;
}

/* first[c] is set for the first character c (below 256) of each of ``words``; a word whose first
 * character is beyond 255 sets first[0], which makes every look fall back to comparing all words. */
static void first_chars(PyObject *words, unsigned char first[256]) {
    memset(first, 0, 256);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(words); i++) {
        Py_UCS4 c = PyUnicode_READ_CHAR(PyTuple_GET_ITEM(words, i), 0);
        first[c < 256 ? c : 0] = 1;
    }
}

/* Whether a word whose first characters are ``first`` may start with character c. */
static int may_start(const unsigned char first[256], Py_UCS4 c) {
    return first[0] || (c < 256 && first[c]);
}

static PyObject *segments(PyObject *self, PyObject *args) {
    PyObject *obj;
    Text t;
    if (!PyArg_ParseTuple(args, "U", &obj) || text_of(obj, &t) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t line_no = 1, prev_a = -1, prev_e = 0, prev_line = 0;
    Py_ssize_t p = 0; /* start of the line being looked at */
    while (p < t.len) {
        Py_ssize_t e = next_newline(&t, p, t.len);
        Py_UCS4 c = AT(&t, p);
        if (c != '\t' && c != ' ' && c != '\n') {
            if (prev_a >= 0) {
                PyObject *row = Py_BuildValue("(nnnn)", prev_a, prev_e, p - 1, prev_line);
                if (row == NULL || PyList_Append(out, row) < 0) {
                    Py_XDECREF(row);
                    Py_DECREF(out);
                    return NULL;
                }
                Py_DECREF(row);
            }
            prev_a = p;
            prev_e = e;
            prev_line = line_no;
        }
        if (e >= t.len)
            break;
        p = e + 1;
        line_no++;
    }
    if (prev_a >= 0) {
        PyObject *row = Py_BuildValue("(nnnn)", prev_a, prev_e, t.len, prev_line);
        if (row == NULL || PyList_Append(out, row) < 0) {
            Py_XDECREF(row);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(row);
    }
    return out;
}

/* Whether one of ``words`` occurs in [from, end) of t. */
static int any_word_in(PyObject *text, Py_ssize_t from, Py_ssize_t end, PyObject *words) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(words); i++) {
        Py_ssize_t hit = PyUnicode_Find(text, PyTuple_GET_ITEM(words, i), from, end, 1);
        if (hit == -2)
            return -1;
        if (hit >= 0)
            return 1;
    }
    return 0;
}

static PyObject *details(PyObject *self, PyObject *args) {
    PyObject *obj, *keys, *cap_key, *cap_words;
    Py_ssize_t start, end;
    Text t;
    if (!PyArg_ParseTuple(args, "UnnO!UO!", &obj, &start, &end, &PyTuple_Type, &keys, &cap_key,
                          &PyTuple_Type, &cap_words))
        return NULL;
    if (text_of(obj, &t) < 0 || check_range(&t, start, end) < 0 || check_words(keys, "keys") < 0
        || check_words(cap_words, "cap_words") < 0 || PyUnicode_READY(cap_key) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t nkeys = PyTuple_GET_SIZE(keys);
    unsigned char first[256];
    first_chars(keys, first);
    Py_UCS4 cap_first = PyUnicode_GET_LENGTH(cap_key) ? PyUnicode_READ_CHAR(cap_key, 0) : 0;
    Py_ssize_t p = next_newline(&t, start, end);
    while (p < end) {
        Py_ssize_t q = p + 1, next = -1;
        if (q < end && (AT(&t, q) == '\t' || AT(&t, q) == ' ')) {
            q++;
            while (q < end && AT(&t, q) != '\n' && Py_UNICODE_ISSPACE(AT(&t, q)))
                q++;
            PyObject *key = NULL;
            Py_ssize_t colon = -1;
            Py_UCS4 c = q < end ? AT(&t, q) : 0;
            for (Py_ssize_t k = 0; k < nkeys && key == NULL && q < end && may_start(first, c); k++) {
                PyObject *w = PyTuple_GET_ITEM(keys, k);
                Py_ssize_t n = PyUnicode_GET_LENGTH(w);
                if (q + n < end && word_at(&t, q, end, w) && AT(&t, q + n) == ':') {
                    key = w;
                    colon = q + n;
                }
            }
            Py_ssize_t line_end = -1;
            if (key == NULL && q < end && c == cap_first) {
                Py_ssize_t n = PyUnicode_GET_LENGTH(cap_key);
                if (n > 0 && q + n < end && word_at(&t, q, end, cap_key) && AT(&t, q + n) == ':') {
                    line_end = next_newline(&t, q + n + 1, end);
                    int found = any_word_in(obj, q + n + 1, line_end, cap_words);
                    if (found < 0) {
                        Py_DECREF(out);
                        return NULL;
                    }
                    if (found) {
                        key = cap_key;
                        colon = q + n;
                    }
                }
            }
            if (key != NULL) {
                if (line_end < 0)
                    line_end = next_newline(&t, colon + 1, end);
                PyObject *rest = PyUnicode_Substring(obj, colon + 1, line_end);
                PyObject *row = rest ? Py_BuildValue("(ONnn)", key, rest, p + 1, line_end) : NULL;
                if (row == NULL || PyList_Append(out, row) < 0) {
                    Py_XDECREF(row);
                    Py_DECREF(out);
                    return NULL;
                }
                Py_DECREF(row);
                next = line_end; /* the newline ending this line starts the next look */
            }
        }
        p = next >= 0 ? next : next_newline(&t, p + 1, end);
    }
    return out;
}

static PyObject *has_marker(PyObject *self, PyObject *args) {
    PyObject *obj, *markers;
    Py_ssize_t start, end;
    Text t;
    if (!PyArg_ParseTuple(args, "UnnO!", &obj, &start, &end, &PyTuple_Type, &markers))
        return NULL;
    if (text_of(obj, &t) < 0 || check_range(&t, start, end) < 0 || check_words(markers, "markers") < 0)
        return NULL;
    if (t.kind == PyUnicode_1BYTE_KIND) {  /* one pass, every marker looked for where its first character is */
        unsigned char first[256];
        first_chars(markers, first);
        if (!first[0]) {
            const unsigned char *d = (const unsigned char *)t.data;
            Py_ssize_t n = PyTuple_GET_SIZE(markers);
            for (Py_ssize_t i = start; i < end; i++) {
                if (!first[d[i]])
                    continue;
                for (Py_ssize_t k = 0; k < n; k++)
                    if (word_at(&t, i, end, PyTuple_GET_ITEM(markers, k)))
                        Py_RETURN_TRUE;
            }
            Py_RETURN_FALSE;
        }
    }
    int found = any_word_in(obj, start, end, markers);
    if (found < 0)
        return NULL;
    return PyBool_FromLong(found);
}

static PyMethodDef methods[] = {
    {"segments", segments, METH_VARARGS, "The column-0 lines of an lspci text and their segments."},
    {"details", details, METH_VARARGS, "The detail lines of a block that parse() reads."},
    {"has_marker", has_marker, METH_VARARGS, "Whether a block names one of the markers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lspci_scan",
                                    "The lspci -vvv parser's scans in C (apps/domain/parsers/lspci_verbose.py).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__lspci_scan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "source_sha", SOURCE_SHA) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
