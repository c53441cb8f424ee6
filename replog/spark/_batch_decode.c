/* The compiled decoder of replog.spark.batch_columns: validated batches' records regions to
 * columns in one pass over the records (docs/spark.md, "How records are decoded").
 *
 * decode(buffer, spans, batches) -> tuple | None
 *   buffer:  bytes-like (the fetch answer, or the decompressed regions back to back), read
 *            through the buffer protocol, never copied.
 *   spans:   per batch (start, end) of its records region in buffer, in order, apart.
 *   batches: per batch (records_count, base_offset, base_time, log_append_time): base_time is
 *            the batch's max_timestamp with LogAppendTime, else its base_timestamp.
 * Returns (offsets, timestamps, key_offsets, key_data, key_validity, value_offsets,
 * value_data, value_validity, headers): int64 offsets and timestamps, the timestamps in
 * microseconds (milliseconds times 1000 wrapped past int64 as numpy wraps it, what Spark's
 * column holds) (bytearrays, writable
 * for numpy), then per column Arrow `binary` buffers (int32 offsets, data, validity bitmap or
 * None when no row is null), as bytes, then None when no record has headers, else a list of
 * each row's headers (a tuple of (str key, bytes or None value), () for a record without;
 * keys decoded as UTF-8 with surrogateescape, as record.decode_records does). Or None at any
 * doubt: a broken structural rule (the same rules as record.decode_records: exactly
 * records_count records filling each region, offset deltas 0..n-1, lengths -1 or more (0 or
 * more for header counts and keys), varints of at most 5 (varlong 10) bytes not overflowing,
 * every field inside its record, each body ending exactly at its length), or a sum past
 * int64. The caller then decodes with the Python decoders, which name the error.
 * Every read is bounds-checked against its record's end, which is checked against its
 * region's end, which is checked against the buffer's length. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MIN_BODY 6  /* attributes byte and five one-byte varints */

#include "../record/_varint.h"

typedef struct {
    Py_ssize_t start, end;
    int64_t count, base_offset, base_time;
    int append;
} Batch;

/* The records with headers, found in the pass (which holds no GIL, so builds no object):
 * each one's row, where its headers start, its record's end and its header count. */
typedef struct {
    Py_ssize_t row, at, end;
    int64_t count;
} HeaderSpan;

typedef struct {
    HeaderSpan *spans;
    Py_ssize_t count, capacity;
} HeaderSpans;

static int
header_spans_add(HeaderSpans *h, Py_ssize_t row, Py_ssize_t at, Py_ssize_t end, int64_t count)
{
    if (h->count == h->capacity) {
        Py_ssize_t capacity = h->capacity ? 2 * h->capacity : 64;
        HeaderSpan *grown = PyMem_RawRealloc(h->spans, sizeof(HeaderSpan) * (size_t)capacity);
        if (!grown)
            return 0; /* declined: the Python decoders try */
        h->spans = grown;
        h->capacity = capacity;
    }
    h->spans[h->count++] = (HeaderSpan){row, at, end, count};
    return 1;
}

/* The `count` headers at buf[*p] inside a record ending at rend: their fields' bounds
 * checked (a key not null, lengths inside the record), *p moved past them; 0 if not. When
 * `out` is not NULL, also built as a tuple of (key, value) pairs (the GIL held). */
static int
read_headers(const uint8_t *buf, Py_ssize_t *p, Py_ssize_t rend, int64_t count, PyObject **out)
{
    PyObject *found = NULL;
    if (out && !(found = PyTuple_New((Py_ssize_t)count)))
        return 0;
    for (int64_t h = 0; h < count; h++) {
        int64_t key_length, value_length;
        if (!read_varint(buf, p, rend, 5, &key_length) || key_length < 0 ||
            key_length > rend - *p)
            goto fail;
        Py_ssize_t key_at = *p;
        *p += key_length;
        if (!read_varint(buf, p, rend, 5, &value_length) || value_length < -1 ||
            value_length > rend - *p)
            goto fail;
        Py_ssize_t value_at = *p;
        if (value_length > 0)
            *p += value_length;
        if (found) {
            PyObject *key = PyUnicode_DecodeUTF8((const char *)buf + key_at,
                                                 (Py_ssize_t)key_length, "surrogateescape");
            PyObject *value = value_length < 0
                                  ? Py_NewRef(Py_None)
                                  : PyBytes_FromStringAndSize((const char *)buf + value_at,
                                                              (Py_ssize_t)value_length);
            PyObject *pair = (key && value) ? PyTuple_Pack(2, key, value) : NULL;
            Py_XDECREF(key);
            Py_XDECREF(value);
            if (!pair)
                goto fail;
            PyTuple_SET_ITEM(found, (Py_ssize_t)h, pair);
        }
    }
    if (out)
        *out = found;
    return 1;
fail:
    Py_XDECREF(found);
    return 0;
}

/* Fields are copied CHUNK bytes at a time (a fixed-size copy is a few vector moves, where
 * memcpy of a variable length is a call and a dispatch on the length): up to CHUNK - 1
 * bytes past a field are read (only where the buffer has them) and written (the data
 * buffers have CHUNK bytes more than their fields can fill; the next field overwrites them). */
#define CHUNK 32

/* How far ahead the pass asks for the answer's bytes and the value column's: a fetch answer
 * (8 MiB) has left the core's cache by the time it is decoded (the socket's copy wrote it on
 * the loop thread's core); the hardware's own prefetch did not hide it (a task's decode 30.6
 * -> 25.6 ns a row with 1 KiB, 23.7 -> 22.6 with 2 KiB rather than 1; bench/spark_fetch_path.py,
 * h56m). */
#define PREFETCH_AHEAD 2048

typedef struct {
    int32_t *offsets;
    uint8_t *data;
    uint8_t *validity;
    int32_t size;
    int nulls;
    Py_ssize_t readable; /* the buffer's length: where a chunked read must stop */
} Column;

/* Row `row`'s field of `length` bytes at buf[p], or a null; 0 when it leaves its record. */
static inline int
put_field(Column *c, Py_ssize_t row, const uint8_t *buf, Py_ssize_t *p, Py_ssize_t rend,
          int64_t length)
{
    if (length < 0) {
        if (length != -1)
            return 0;
        c->validity[row >> 3] &= (uint8_t)~(1u << (row & 7));
        c->nulls = 1;
    }
    else {
        if (length > rend - *p)
            return 0;
        uint8_t *to = c->data + c->size;
        const uint8_t *from = buf + *p;
        if (*p + length + (CHUNK - 1) <= c->readable) {
            for (int64_t i = 0; i < length; i += CHUNK)
                memcpy(to + i, from + i, CHUNK);
        }
        else
            memcpy(to, from, (size_t)length);
        c->size += (int32_t)length;
        *p += length;
    }
    c->offsets[row + 1] = c->size;
    return 1;
}

/* 1 when every record is decoded, 0 at any doubt (module comment). */
static int
decode_all(const uint8_t *buf, const Batch *batches, Py_ssize_t nbatches, int64_t *offsets,
           int64_t *timestamps, Column *keys, Column *values, HeaderSpans *with_headers)
{
    Py_ssize_t row = 0;
    keys->offsets[0] = 0;
    values->offsets[0] = 0;
    for (Py_ssize_t b = 0; b < nbatches; b++) {
        const Batch *batch = &batches[b];
        Py_ssize_t pos = batch->start, end = batch->end;
        for (int64_t i = 0; i < batch->count; i++, row++) {
            int64_t size, stamp_delta, offset_delta, length, header_count;
            /* The answer and the value column PREFETCH_AHEAD bytes ahead (a prefetch never
             * faults, past the end of either too; the addresses computed as integers). */
            __builtin_prefetch((const void *)((uintptr_t)(buf + pos) + PREFETCH_AHEAD));
            __builtin_prefetch(
                (const void *)((uintptr_t)(values->data + values->size) + PREFETCH_AHEAD), 1);
            if (!read_varint(buf, &pos, end, 5, &size) || size < MIN_BODY || size > end - pos)
                return 0;
            Py_ssize_t rend = pos + size;
            Py_ssize_t p = pos + 1; /* after the attributes byte */
            if (!read_varint(buf, &p, rend, 10, &stamp_delta))
                return 0;
            if (!read_varint(buf, &p, rend, 5, &offset_delta) || offset_delta != i)
                return 0;
            if (!read_varint(buf, &p, rend, 5, &length) || !put_field(keys, row, buf, &p, rend, length))
                return 0;
            if (!read_varint(buf, &p, rend, 5, &length) || !put_field(values, row, buf, &p, rend, length))
                return 0;
            if (!read_varint(buf, &p, rend, 5, &header_count) || header_count < 0)
                return 0;
            if (header_count) { /* rare: checked here, built once the GIL is held again */
                if (!header_spans_add(with_headers, row, p, rend, header_count) ||
                    !read_headers(buf, &p, rend, header_count, NULL))
                    return 0;
            }
            if (p != rend)
                return 0;
            if (__builtin_add_overflow(batch->base_offset, i, &offsets[row]))
                return 0;
            int64_t millis;
            if (batch->append)
                millis = batch->base_time;
            else if (__builtin_add_overflow(batch->base_time, stamp_delta, &millis))
                return 0;
            /* Wrapped past int64, as numpy's multiply (the other decoders') wraps. */
            timestamps[row] = (int64_t)((uint64_t)millis * 1000u);
            pos = rend;
        }
        if (pos != end)
            return 0; /* bytes after the declared records */
    }
    return 1;
}

static int
column_alloc(Column *c, PyObject **offsets, PyObject **data, PyObject **validity,
             Py_ssize_t rows, Py_ssize_t data_max, Py_ssize_t readable)
{
    *offsets = PyBytes_FromStringAndSize(NULL, (rows + 1) * 4);
    *data = PyBytes_FromStringAndSize(NULL, data_max + CHUNK);
    *validity = PyBytes_FromStringAndSize(NULL, (rows + 7) / 8);
    if (!*offsets || !*data || !*validity)
        return 0;
    c->offsets = (int32_t *)PyBytes_AS_STRING(*offsets);
    c->data = (uint8_t *)PyBytes_AS_STRING(*data);
    c->validity = (uint8_t *)PyBytes_AS_STRING(*validity);
    memset(c->validity, 0xFF, (size_t)((rows + 7) / 8));
    c->size = 0;
    c->nulls = 0;
    c->readable = readable;
    return 1;
}

/* The column's data cut to its size, and its validity dropped when no row is null. */
static int
column_finish(Column *c, PyObject **data, PyObject **validity)
{
    if (_PyBytes_Resize(data, c->size) < 0)
        return 0;
    if (!c->nulls) {
        Py_DECREF(*validity);
        Py_INCREF(Py_None);
        *validity = Py_None;
    }
    return 1;
}

static int
read_batches(PyObject *spans, PyObject *infos, Py_ssize_t length, Batch **out,
             Py_ssize_t *nbatches, Py_ssize_t *rows, Py_ssize_t *data_max, int *ok)
{
    PyObject *span_seq = PySequence_Fast(spans, "spans must be a sequence");
    if (!span_seq)
        return 0;
    PyObject *info_seq = PySequence_Fast(infos, "batches must be a sequence");
    if (!info_seq) {
        Py_DECREF(span_seq);
        return 0;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(span_seq);
    int result = 0;
    Batch *batches = NULL;
    if (PySequence_Fast_GET_SIZE(info_seq) != n) {
        PyErr_SetString(PyExc_ValueError, "spans and batches differ in length");
        goto done;
    }
    batches = PyMem_Malloc(sizeof(Batch) * (size_t)(n ? n : 1));
    if (!batches) {
        PyErr_NoMemory();
        goto done;
    }
    *ok = 1;
    int64_t total = 0;
    Py_ssize_t regions = 0; /* the regions' bytes: a bound on either column's data */
    Py_ssize_t after = 0; /* the end of the region before */
    for (Py_ssize_t b = 0; b < n; b++) {
        Batch *batch = &batches[b];
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(span_seq, b), "nn", &batch->start,
                              &batch->end) ||
            !PyArg_ParseTuple(PySequence_Fast_GET_ITEM(info_seq, b), "LLLp", &batch->count,
                              &batch->base_offset, &batch->base_time, &batch->append)) {
            PyMem_Free(batches);
            batches = NULL;
            goto done;
        }
        /* A region outside the buffer, or before the end of the one before (the regions in
         * order and apart, the keys and values fit a buffer's length each), or more records
         * than it can hold (each takes at least 7 bytes): not decoded here, so nothing is
         * allocated for a wild records_count. */
        if (batch->start < after || batch->start > batch->end || batch->end > length ||
            batch->count < 0 || batch->count > (batch->end - batch->start) / (MIN_BODY + 1))
            *ok = 0;
        after = batch->end;
        total += *ok ? batch->count : 0;
        regions += *ok ? batch->end - batch->start : 0;
    }
    *out = batches;
    *nbatches = n;
    *rows = (Py_ssize_t)total;
    *data_max = regions;
    result = 1;
done:
    Py_DECREF(span_seq);
    Py_DECREF(info_seq);
    return result;
}

static PyObject *
decode(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *source, *spans, *infos;
    if (!PyArg_ParseTuple(args, "OOO", &source, &spans, &infos))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(source, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    PyObject *offsets = NULL, *timestamps = NULL;
    PyObject *key_offsets = NULL, *key_data = NULL, *key_validity = NULL;
    PyObject *value_offsets = NULL, *value_data = NULL, *value_validity = NULL;
    PyObject *headers = NULL;
    HeaderSpans with_headers = {NULL, 0, 0};
    Batch *batches = NULL;
    Py_ssize_t nbatches = 0, rows = 0, data_max = 0;
    int ok = 0;
    if (!read_batches(spans, infos, view.len, &batches, &nbatches, &rows, &data_max, &ok))
        goto done;
    if (!ok || view.len >= ((Py_ssize_t)1 << 31)) { /* Arrow binary offsets are int32 */
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    Column keys, values;
    offsets = PyByteArray_FromStringAndSize(NULL, rows * 8);
    timestamps = PyByteArray_FromStringAndSize(NULL, rows * 8);
    if (!offsets || !timestamps ||
        !column_alloc(&keys, &key_offsets, &key_data, &key_validity, rows, data_max, view.len) ||
        !column_alloc(&values, &value_offsets, &value_data, &value_validity, rows, data_max,
                      view.len))
        goto done;
    int decoded;
    Py_BEGIN_ALLOW_THREADS
    decoded = decode_all((const uint8_t *)view.buf, batches, nbatches,
                         (int64_t *)PyByteArray_AS_STRING(offsets),
                         (int64_t *)PyByteArray_AS_STRING(timestamps), &keys, &values,
                         &with_headers);
    Py_END_ALLOW_THREADS
    if (!decoded) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    if (!column_finish(&keys, &key_data, &key_validity) ||
        !column_finish(&values, &value_data, &value_validity))
        goto done;
    if (!with_headers.count) {
        headers = Py_NewRef(Py_None);
    }
    else {
        if (!(headers = PyList_New(rows)))
            goto done;
        PyObject *none = PyTuple_New(0);
        if (!none)
            goto done;
        for (Py_ssize_t row = 0; row < rows; row++)
            PyList_SET_ITEM(headers, row, Py_NewRef(none));
        Py_DECREF(none);
        const uint8_t *buf = (const uint8_t *)view.buf;
        for (Py_ssize_t k = 0; k < with_headers.count; k++) {
            HeaderSpan *span = &with_headers.spans[k];
            Py_ssize_t at = span->at;
            PyObject *found;
            /* Read again as the pass read and checked them, now building the objects. */
            if (!read_headers(buf, &at, span->end, span->count, &found)) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_SystemError, "checked headers read differently");
                goto done;
            }
            PyObject *empty = PyList_GET_ITEM(headers, span->row);
            PyList_SET_ITEM(headers, span->row, found);
            Py_DECREF(empty);
        }
    }
    result = PyTuple_Pack(9, offsets, timestamps, key_offsets, key_data, key_validity,
                          value_offsets, value_data, value_validity, headers);
done:
    Py_XDECREF(offsets);
    Py_XDECREF(timestamps);
    Py_XDECREF(key_offsets);
    Py_XDECREF(key_data);
    Py_XDECREF(key_validity);
    Py_XDECREF(value_offsets);
    Py_XDECREF(value_data);
    Py_XDECREF(value_validity);
    Py_XDECREF(headers);
    PyMem_RawFree(with_headers.spans);
    PyMem_Free(batches);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(buffer, spans, batches) -> columns' buffers, or None at any doubt."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_batch_decode",
    "The compiled record decoder of replog.spark.batch_columns.", -1, methods,
};

PyMODINIT_FUNC
PyInit__batch_decode(void)
{
    return PyModule_Create(&module_def);
}
