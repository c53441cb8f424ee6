/* The compiled span scan of replog.record.record_spans: each record's span in a batch's
 * records region, the log cleaner's view of a batch, in one pass in C.
 *
 * scan(data, position, end, records_count, last_offset_delta) -> list | None
 *   data: bytes (exactly: a key is a slice of it, and must be bytes as the Python scan's).
 * Returns the spans record_spans._scan returns for the same arguments, the same values in
 * the same order: per record (offset delta, timestamp delta, key or None, whether the value
 * is null, where the record starts, where its timestamp delta ends, where it ends). Or None
 * wherever _scan raises (the same rules: records_count records filling [position, end),
 * each body at least one byte and ending exactly at its length, varints of at most 5 bytes
 * (varlong 10) not overflowing, keys and header keys -1 or more (header keys not null),
 * values -1 or more, header counts 0 or more, offset deltas increasing within
 * 0..last_offset_delta and equal to the index in a dense batch): the caller asks the Python
 * decoder why. Every read is bounds-checked against its record's end, which is checked
 * against the region's end, which is checked against the data's length. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_varint.h"

/* A length-prefixed byte field at buf[*at] inside a record ending at rend: its length (-1:
 * null), *at moved past it; 0 if the length is below -1 or the field runs past rend. */
static inline int
read_bytes_field(const uint8_t *buf, Py_ssize_t *at, Py_ssize_t rend, int64_t *size)
{
    if (!read_varint(buf, at, rend, 5, size))
        return 0;
    if (*size < -1)
        return 0;
    if (*size >= 0) {
        if (*size > rend - *at)
            return 0;
        *at += (Py_ssize_t)*size;
    }
    return 1;
}

/* The spans, or NULL with no error set when the region is refused (or with one set when
 * memory ran out). */
static PyObject *
scan_region(const uint8_t *buf, Py_ssize_t p, Py_ssize_t end, int64_t count, int64_t last_delta)
{
    int dense = last_delta == count - 1;
    int64_t lowest = 0;
    PyObject *spans = PyList_New(0);
    if (!spans)
        return NULL;
    for (int64_t index = 0; index < count; index++) {
        if (p >= end)
            goto refused;
        Py_ssize_t start = p;
        int64_t body, timestamp_delta, offset_delta, key_size, value_size, header_count;
        if (!read_varint(buf, &p, end, 5, &body))
            goto refused;
        if (body < 1 || body > end - p)
            goto refused;
        Py_ssize_t rend = p + (Py_ssize_t)body;
        p += 1; /* the unused attributes byte */
        if (!read_varint(buf, &p, rend, 10, &timestamp_delta))
            goto refused;
        Py_ssize_t fields = p;
        if (!read_varint(buf, &p, rend, 5, &offset_delta))
            goto refused;
        if (dense && offset_delta != index)
            goto refused;
        if (!read_bytes_field(buf, &p, rend, &key_size))
            goto refused;
        Py_ssize_t key_at = p - (key_size > 0 ? (Py_ssize_t)key_size : 0);
        if (!read_varint(buf, &p, rend, 5, &value_size))
            goto refused;
        if (value_size < -1)
            goto refused;
        if (value_size >= 0) {
            if (value_size > rend - p)
                goto refused;
            p += (Py_ssize_t)value_size;
        }
        if (!read_varint(buf, &p, rend, 5, &header_count) || header_count < 0)
            goto refused;
        for (int64_t h = 0; h < header_count; h++) {
            int64_t size;
            if (!read_bytes_field(buf, &p, rend, &size) || size == -1)
                goto refused; /* a header key is never null */
            if (!read_bytes_field(buf, &p, rend, &size))
                goto refused;
        }
        if (p != rend || offset_delta < lowest || offset_delta > last_delta)
            goto refused;
        lowest = offset_delta + 1;
        PyObject *key;
        if (key_size < 0) {
            key = Py_None;
            Py_INCREF(key);
        } else {
            key = PyBytes_FromStringAndSize((const char *)buf + key_at, (Py_ssize_t)key_size);
            if (!key)
                goto failed;
        }
        PyObject *span = Py_BuildValue(
            "(LLNOnnn)", (long long)offset_delta, (long long)timestamp_delta, key,
            value_size == -1 ? Py_True : Py_False, start, fields, rend);
        if (!span)
            goto failed;
        int appended = PyList_Append(spans, span);
        Py_DECREF(span);
        if (appended < 0)
            goto failed;
    }
    if (p != end)
        goto refused;
    return spans;
refused: /* no error set: the caller tells this from a failure */
failed:
    Py_DECREF(spans);
    return NULL;
}

static PyObject *
scan(PyObject *self, PyObject *args)
{
    PyObject *data;
    Py_ssize_t position, end;
    long long count, last_delta;
    if (!PyArg_ParseTuple(args, "O!nnLL", &PyBytes_Type, &data, &position, &end, &count,
                          &last_delta))
        return NULL;
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    if (position < 0 || end < position || end > size)
        Py_RETURN_NONE;
    PyObject *spans =
        scan_region((const uint8_t *)PyBytes_AS_STRING(data), position, end, count, last_delta);
    if (spans)
        return spans;
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data, position, end, records_count, last_offset_delta) -> spans, or None if "
     "refused."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_record_spans",
    "The compiled span scan of replog.record.record_spans.", -1, methods,
};

PyMODINIT_FUNC
PyInit__record_spans(void)
{
    return PyModule_Create(&module_def);
}
