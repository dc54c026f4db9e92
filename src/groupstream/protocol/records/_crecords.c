/* The consumer's record decoder in C: one RecordBatch v2 records section into a list of record tuples.
 *
 * It is a fast path only. Whatever it does not take for granted (a truncated or inconsistent record, a varint
 * beyond 64 bits, an offset that overflows int64, a header key that is not UTF-8, a record type it cannot
 * build) makes it raise `Fallback`, and the caller runs the pure-Python decoder on the same bytes, which then
 * decides: it returns the same records or raises the error the protocol layer names. So the behaviour is the
 * Python decoder's by construction; this file only has to be right about well-formed batches.
 *
 * Built by setup.py during `pip install` (an optional extension: without a compiler the Python decoder runs).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *Fallback;

/* A zig-zag varint of up to 10 bytes, bounded by `end`. Returns 0, or -1 when it runs past `end` or does not
 * fit 64 bits (the Python decoder keeps such values as big ints: it decides those). */
static inline int
read_varint(const unsigned char *d, Py_ssize_t end, Py_ssize_t *pos, int64_t *out)
{
    Py_ssize_t p = *pos;
    if (p < end && d[p] < 0x80) { /* the common case: one byte */
        uint64_t z = d[p];
        *out = (int64_t)((z >> 1) ^ (~(z & 1) + 1));
        *pos = p + 1;
        return 0;
    }
    uint64_t result = 0;
    int shift = 0;
    for (;;) {
        if (p >= end)
            return -1;
        unsigned char b = d[p++];
        if (shift == 63 && b > 1)
            return -1;
        result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
        if (shift > 63)
            return -1;
    }
    *pos = p;
    *out = (int64_t)((result >> 1) ^ (~(result & 1) + 1));
    return 0;
}

/* The headers of one record, from `*pos` (the header count) to at most `end`; NULL with Fallback set when the
 * bytes are not what a well-formed record holds, NULL with another error on memory errors. */
static PyObject *
read_headers(const unsigned char *d, Py_ssize_t end, Py_ssize_t *pos)
{
    int64_t count, kl, vl;
    if (read_varint(d, end, pos, &count) < 0 || count < 0 || count > end - *pos)
        goto fallback;
    PyObject *headers = PyTuple_New((Py_ssize_t)count);
    if (headers == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        if (read_varint(d, end, pos, &kl) < 0 || kl < 0 || kl > end - *pos) {
            Py_DECREF(headers);
            goto fallback;
        }
        PyObject *key = PyUnicode_DecodeUTF8((const char *)d + *pos, (Py_ssize_t)kl, NULL);
        if (key == NULL) {
            Py_DECREF(headers);
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                goto fallback;
            return NULL;
        }
        *pos += (Py_ssize_t)kl;
        if (read_varint(d, end, pos, &vl) < 0 || vl > end - *pos) {
            Py_DECREF(key);
            Py_DECREF(headers);
            goto fallback;
        }
        PyObject *value;
        if (vl < 0) {
            value = Py_NewRef(Py_None);
        } else {
            value = PyBytes_FromStringAndSize((const char *)d + *pos, (Py_ssize_t)vl);
            if (value == NULL) {
                Py_DECREF(key);
                Py_DECREF(headers);
                return NULL;
            }
            *pos += (Py_ssize_t)vl;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            return NULL;
        }
        PyTuple_SET_ITEM(pair, 0, key);
        PyTuple_SET_ITEM(pair, 1, value);
        PyObject_GC_UnTrack(pair); /* a str and bytes: no cycle can run through it */
        PyTuple_SET_ITEM(headers, i, pair);
    }
    if (count > 0)
        PyObject_GC_UnTrack(headers);
    return headers;
fallback:
    PyErr_SetNone(Fallback);
    return NULL;
}

/* One record's fields, located (not copied) by parse_record. */
typedef struct {
    int64_t offset, timestamp;
    const unsigned char *key;   /* NULL: a null key */
    const unsigned char *value; /* NULL: a null value */
    Py_ssize_t key_len, value_len;
    Py_ssize_t headers_at; /* where the header count starts, or -1 when there are none */
    Py_ssize_t end;
} RecordSpan;

/* Locate the record at `*pos` and move past it. Returns 0, or -1 (no exception set) when it is not a
 * well-formed record: the caller raises Fallback. Header contents are checked by read_headers later. */
static inline int
parse_record(const unsigned char *d, Py_ssize_t len, Py_ssize_t *pos, long long base_offset,
             long long base_timestamp, RecordSpan *r)
{
    int64_t length, ts_delta, offset_delta, kl, vl;
    Py_ssize_t p = *pos;
    if (read_varint(d, len, &p, &length) < 0 || length < 0 || length > len - p)
        return -1;
    const Py_ssize_t end = p + (Py_ssize_t)length;
    p += 1; /* attributes: unused */
    if (p > end || read_varint(d, end, &p, &ts_delta) < 0 || read_varint(d, end, &p, &offset_delta) < 0 ||
        read_varint(d, end, &p, &kl) < 0)
        return -1;
    long long offset, timestamp;
    if (__builtin_add_overflow(base_offset, (long long)offset_delta, &offset) ||
        __builtin_add_overflow(base_timestamp, (long long)ts_delta, &timestamp))
        return -1;
    r->offset = offset;
    r->timestamp = timestamp;
    r->key = NULL;
    r->key_len = 0;
    if (kl >= 0) {
        if (kl > end - p)
            return -1;
        r->key = d + p;
        r->key_len = (Py_ssize_t)kl;
        p += (Py_ssize_t)kl;
    }
    if (read_varint(d, end, &p, &vl) < 0)
        return -1;
    r->value = NULL;
    r->value_len = 0;
    if (vl >= 0) {
        if (vl > end - p)
            return -1;
        r->value = d + p;
        r->value_len = (Py_ssize_t)vl;
        p += (Py_ssize_t)vl;
    }
    if (p < end && d[p] == 0) {
        r->headers_at = -1;
        p += 1;
        if (p != end)
            return -1;
    } else {
        r->headers_at = p; /* read_headers checks them and that they end the record */
        p = end;
    }
    r->end = end;
    *pos = p;
    return 0;
}

/* decode(data, count, base_offset, base_timestamp, record_type, topic, partition, timestamp_type,
 *        fixed_timestamp, min_offset) -> list
 *
 * Records of `record_type` (a tuple subclass without a __dict__, like a NamedTuple) holding
 * (topic, partition, offset, timestamp, key, value, headers, timestamp_type), for the records at or above
 * `min_offset` (when it is above `base_offset`: a fetch offset inside the batch). `fixed_timestamp` (an int, or
 * None) replaces every record's timestamp (LogAppendTime). */
static PyObject *
decode(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer buf;
    Py_ssize_t count;
    long long base_offset, base_timestamp, min_offset;
    PyObject *record_type, *topic, *partition, *timestamp_type, *fixed_obj;
    if (!PyArg_ParseTuple(args, "y*nLLOOOOOL", &buf, &count, &base_offset, &base_timestamp, &record_type, &topic,
                          &partition, &timestamp_type, &fixed_obj, &min_offset))
        return NULL;

    PyObject *out = NULL, *rec = NULL;
    PyObject *no_headers = PyTuple_New(0);
    if (no_headers == NULL)
        goto error;
    if (!PyType_Check(record_type) || !PyType_IsSubtype((PyTypeObject *)record_type, &PyTuple_Type) ||
        ((PyTypeObject *)record_type)->tp_dictoffset != 0 || count < 0 ||
        (fixed_obj != Py_None && !PyLong_CheckExact(fixed_obj)))
        goto fallback;
    PyTypeObject *rtype = (PyTypeObject *)record_type;
    const unsigned char *d = (const unsigned char *)buf.buf;
    const Py_ssize_t len = buf.len;
    out = PyList_New(0);
    if (out == NULL)
        goto error;
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        RecordSpan r;
        if (parse_record(d, len, &pos, base_offset, base_timestamp, &r) < 0)
            goto fallback;
        PyObject *headers;
        if (r.headers_at < 0) {
            headers = Py_NewRef(no_headers);
        } else {
            Py_ssize_t hp = r.headers_at;
            headers = read_headers(d, r.end, &hp);
            if (headers == NULL)
                goto error;
            if (hp != r.end) {
                Py_DECREF(headers);
                goto fallback;
            }
        }
        if (min_offset > base_offset && r.offset < min_offset) {
            Py_DECREF(headers);
            continue;
        }
        rec = rtype->tp_alloc(rtype, 8);
        if (rec == NULL) {
            Py_DECREF(headers);
            goto error;
        }
        PyObject *item;
        PyTuple_SET_ITEM(rec, 6, headers);
        PyTuple_SET_ITEM(rec, 0, Py_NewRef(topic));
        PyTuple_SET_ITEM(rec, 1, Py_NewRef(partition));
        PyTuple_SET_ITEM(rec, 7, Py_NewRef(timestamp_type));
        if ((item = PyLong_FromLongLong(r.offset)) == NULL)
            goto error;
        PyTuple_SET_ITEM(rec, 2, item);
        if ((item = fixed_obj != Py_None ? Py_NewRef(fixed_obj) : PyLong_FromLongLong(r.timestamp)) == NULL)
            goto error;
        PyTuple_SET_ITEM(rec, 3, item);
        item = r.key == NULL ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize((const char *)r.key, r.key_len);
        if (item == NULL)
            goto error;
        PyTuple_SET_ITEM(rec, 4, item);
        item = r.value == NULL ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize((const char *)r.value, r.value_len);
        if (item == NULL)
            goto error;
        PyTuple_SET_ITEM(rec, 5, item);
        /* ints, bytes, a str and a tuple of those: a record can be part of no cycle, so the collector need not
         * follow it (CPython untracks such tuples itself, later, when a collection meets them) */
        PyObject_GC_UnTrack(rec);
        if (PyList_Append(out, rec) < 0)
            goto error;
        Py_CLEAR(rec);
    }
    if (pos != len)
        goto fallback;
    Py_DECREF(no_headers);
    PyBuffer_Release(&buf);
    return out;
fallback:
    PyErr_SetNone(Fallback);
error:
    Py_XDECREF(rec);
    Py_XDECREF(out);
    Py_XDECREF(no_headers);
    PyBuffer_Release(&buf);
    return NULL;
}

/* Grow bytearray `ba` by `extra` bytes; returns where they start, or NULL with an exception set. */
static char *
grow(PyObject *ba, Py_ssize_t extra)
{
    Py_ssize_t old = PyByteArray_GET_SIZE(ba);
    if (PyByteArray_Resize(ba, old + extra) < 0)
        return NULL;
    return PyByteArray_AS_STRING(ba) + old;
}

#define N_COLUMNS 10

/* append_columns(data, count, base_offset, base_timestamp, fixed_timestamp, min_offset, partition,
 *                timestamp_type, columns) -> (appended, last_offset)
 *
 * Appends the records at or above `min_offset` to Arrow-ready column buffers, all bytearrays, in
 * `columns`: offset (int64), timestamp in microseconds (int64, as the ms * 1000 of Spark's column, wrapping
 * like pyarrow's unchecked multiply), partition (int32), timestamp type (int32), then for the key and for the
 * value: validity (one byte per record, 1 = not null), end offset (int32, the data's length after the record)
 * and the data. Nothing is appended unless the whole batch is well formed and has no headers (Fallback: the
 * caller decodes it into records instead). `last_offset` is -1 when nothing was appended. */
static PyObject *
append_columns(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer buf;
    Py_ssize_t count;
    long long base_offset, base_timestamp, min_offset;
    int partition, timestamp_type;
    PyObject *fixed_obj, *columns;
    if (!PyArg_ParseTuple(args, "y*nLLOLiiO!", &buf, &count, &base_offset, &base_timestamp, &fixed_obj, &min_offset,
                          &partition, &timestamp_type, &PyTuple_Type, &columns))
        return NULL;
    RecordSpan *spans = NULL;
    long long fixed_ts = 0;
    const int fixed = fixed_obj != Py_None;
    PyObject *col[N_COLUMNS];
    if (PyTuple_GET_SIZE(columns) != N_COLUMNS || count < 0)
        goto fallback;
    for (int c = 0; c < N_COLUMNS; c++) {
        col[c] = PyTuple_GET_ITEM(columns, c);
        if (!PyByteArray_CheckExact(col[c]))
            goto fallback;
    }
    if (fixed) {
        fixed_ts = PyLong_AsLongLong(fixed_obj);
        if (fixed_ts == -1 && PyErr_Occurred())
            goto error;
    }
    const unsigned char *d = (const unsigned char *)buf.buf;
    const Py_ssize_t len = buf.len;
    if (count > len) /* every record takes several bytes */
        goto fallback;
    spans = PyMem_Malloc(sizeof(RecordSpan) * (size_t)(count ? count : 1));
    if (spans == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    /* pass 1: check the whole batch, count what is kept and how many bytes its keys and values take */
    Py_ssize_t pos = 0, kept = 0, key_bytes = 0, value_bytes = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        RecordSpan *r = &spans[kept];
        if (parse_record(d, len, &pos, base_offset, base_timestamp, r) < 0 || r->headers_at >= 0)
            goto fallback;
        if (min_offset > base_offset && r->offset < min_offset)
            continue;
        key_bytes += r->key_len;
        value_bytes += r->value_len;
        kept++;
    }
    if (pos != len)
        goto fallback;
    Py_ssize_t key_base = PyByteArray_GET_SIZE(col[6]), value_base = PyByteArray_GET_SIZE(col[9]);
    if (key_base + key_bytes > INT32_MAX || value_base + value_bytes > INT32_MAX)
        goto fallback; /* int32 offsets: the caller's other path knows what to do */
    /* pass 2: write */
    Py_ssize_t old[N_COLUMNS];
    for (int c = 0; c < N_COLUMNS; c++)
        old[c] = PyByteArray_GET_SIZE(col[c]);
    char *offsets = grow(col[0], 8 * kept), *stamps, *parts, *types, *kvalid, *kends, *kdata, *vvalid, *vends, *vdata;
    if (offsets == NULL || (stamps = grow(col[1], 8 * kept)) == NULL || (parts = grow(col[2], 4 * kept)) == NULL ||
        (types = grow(col[3], 4 * kept)) == NULL || (kvalid = grow(col[4], kept)) == NULL ||
        (kends = grow(col[5], 4 * kept)) == NULL || (kdata = grow(col[6], key_bytes)) == NULL ||
        (vvalid = grow(col[7], kept)) == NULL || (vends = grow(col[8], 4 * kept)) == NULL ||
        (vdata = grow(col[9], value_bytes)) == NULL) {
        for (int c = 0; c < N_COLUMNS; c++)
            (void)PyByteArray_Resize(col[c], old[c]);
        goto error;
    }
    int32_t kend = (int32_t)key_base, vend = (int32_t)value_base;
    for (Py_ssize_t i = 0; i < kept; i++) {
        const RecordSpan *r = &spans[i];
        int64_t off = r->offset;
        int64_t us = (int64_t)((uint64_t)(fixed ? fixed_ts : r->timestamp) * 1000u);
        int32_t p32 = partition, t32 = timestamp_type;
        memcpy(offsets + 8 * i, &off, 8);
        memcpy(stamps + 8 * i, &us, 8);
        memcpy(parts + 4 * i, &p32, 4);
        memcpy(types + 4 * i, &t32, 4);
        kvalid[i] = r->key != NULL;
        if (r->key_len) {
            memcpy(kdata, r->key, (size_t)r->key_len);
            kdata += r->key_len;
            kend += (int32_t)r->key_len;
        }
        memcpy(kends + 4 * i, &kend, 4);
        vvalid[i] = r->value != NULL;
        if (r->value_len) {
            memcpy(vdata, r->value, (size_t)r->value_len);
            vdata += r->value_len;
            vend += (int32_t)r->value_len;
        }
        memcpy(vends + 4 * i, &vend, 4);
    }
    long long last = kept ? (long long)spans[kept - 1].offset : -1;
    PyMem_Free(spans);
    PyBuffer_Release(&buf);
    return Py_BuildValue("(nL)", kept, last);
fallback:
    PyErr_SetNone(Fallback);
error:
    PyMem_Free(spans);
    PyBuffer_Release(&buf);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, "Decode a batch's records section into record tuples (see _crecords.c)."},
    {"append_columns", append_columns, METH_VARARGS, "Append a batch's records to Arrow column buffers (see _crecords.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_crecords",
    .m_doc = "The consumer's RecordBatch v2 decoder in C (a fast path).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__crecords(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Fallback = PyErr_NewException("groupstream.protocol.records._crecords.Fallback", NULL, NULL);
    if (Fallback == NULL || PyModule_AddObjectRef(m, "Fallback", Fallback) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
