/* The consumer's record decoder in C: one RecordBatch v2 records section into a list of record tuples; and, at
 * the end, the producer's record encoder (records appended to the batch being built, one or many per call).
 *
 * The decoder is a fast path only. Whatever it does not take for granted (a truncated or inconsistent record, a
 * varint beyond 64 bits, an offset that overflows int64, a header key that is not UTF-8, a record type it cannot
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
#include <time.h>

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

/* ---------------------------------------------------------------------------------------------------------------
 * The producer's record encoder. A batch in the making is a bytearray that starts with the 61-byte RecordBatch
 * v2 header; records are appended after it, varint-framed, one call per record or one call for many. The
 * header fields that change with every record are kept in the header itself, so the caller does no per-record
 * bookkeeping: lastOffsetDelta @23, baseTimestamp @27 (the first record's), maxTimestamp @35 and recordsCount
 * @57 (big-endian). The rest of the header (length, attributes, producer fields, CRC) is written when the batch
 * is closed, in Python. The pure-Python twin is groupstream/client/producer/encode.py: same bytes, same limits.
 */

#define BATCH_HEADER_SIZE 61
#define AT_LAST_OFFSET_DELTA 23
#define AT_BASE_TIMESTAMP 27
#define AT_MAX_TIMESTAMP 35
#define AT_RECORDS_COUNT 57

static inline uint64_t
load_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline void
store_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)v;
        v >>= 8;
    }
}

static inline uint32_t
load_be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void
store_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline uint64_t
zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline Py_ssize_t
varint_size(uint64_t z)
{
    Py_ssize_t n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static inline unsigned char *
put_varint(unsigned char *p, uint64_t z)
{
    while (z >= 0x80) {
        *p++ = (unsigned char)(z | 0x80);
        z >>= 7;
    }
    *p++ = (unsigned char)z;
    return p;
}

/* A key or value to encode: bytes, str (its UTF-8) or any other buffer, or None (len -1). */
typedef struct {
    const char *data;
    Py_ssize_t len;
    int has_view;
    Py_buffer view;
} Field;

static int
field_get(PyObject *o, Field *f, const char *what)
{
    f->has_view = 0;
    if (o == Py_None) {
        f->data = NULL;
        f->len = -1;
        return 0;
    }
    if (PyBytes_CheckExact(o)) {
        f->data = PyBytes_AS_STRING(o);
        f->len = PyBytes_GET_SIZE(o);
        return 0;
    }
    if (PyUnicode_Check(o)) {
        f->data = PyUnicode_AsUTF8AndSize(o, &f->len);
        return f->data == NULL ? -1 : 0;
    }
    if (PyObject_CheckBuffer(o) && PyObject_GetBuffer(o, &f->view, PyBUF_SIMPLE) == 0) {
        f->has_view = 1;
        f->data = (const char *)f->view.buf;
        f->len = f->view.len;
        return 0;
    }
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "a record's %s must be bytes, str or None, not %.100s", what,
                     Py_TYPE(o)->tp_name);
    return -1;
}

static inline void
field_release(Field *f)
{
    if (f->has_view) {
        PyBuffer_Release(&f->view);
        f->has_view = 0;
    }
}

/* Bytes the headers of a record take after their count: `seq` is a list or tuple of (str, bytes | None)
 * tuples. -1 with an exception set when one is not. */
static Py_ssize_t
headers_size(PyObject *seq)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), total = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *h = items[i];
        if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(h, 0)) ||
            (PyTuple_GET_ITEM(h, 1) != Py_None && !PyBytes_Check(PyTuple_GET_ITEM(h, 1)))) {
            PyErr_SetString(PyExc_TypeError, "a header must be a (str, bytes | None) tuple");
            return -1;
        }
        Py_ssize_t kl;
        if (PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(h, 0), &kl) == NULL)
            return -1;
        PyObject *v = PyTuple_GET_ITEM(h, 1);
        Py_ssize_t vl = v == Py_None ? -1 : PyBytes_GET_SIZE(v);
        if (kl > INT32_MAX || vl > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "a header is longer than a varint can say");
            return -1;
        }
        total += varint_size(zigzag(kl)) + kl + varint_size(zigzag(vl)) + (vl > 0 ? vl : 0);
    }
    return total;
}

static unsigned char *
put_headers(unsigned char *p, PyObject *seq)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *h = items[i];
        Py_ssize_t kl;
        const char *k = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(h, 0), &kl); /* cached by headers_size */
        p = put_varint(p, zigzag(kl));
        memcpy(p, k, (size_t)kl);
        p += kl;
        PyObject *v = PyTuple_GET_ITEM(h, 1);
        if (v == Py_None) {
            p = put_varint(p, zigzag(-1));
        } else {
            Py_ssize_t vl = PyBytes_GET_SIZE(v);
            p = put_varint(p, zigzag(vl));
            memcpy(p, PyBytes_AS_STRING(v), (size_t)vl);
            p += vl;
        }
    }
    return p;
}

#define APPEND_FULL (-1)
#define APPEND_ERROR (-2)

/* Append one record to the batch `ba`. Returns its offset delta; APPEND_FULL, changing nothing, when the batch
 * already holds a record and this one would take it past `limit` bytes; APPEND_ERROR with an exception set. */
static Py_ssize_t
append_one(PyObject *ba, Py_ssize_t limit, int64_t timestamp, const Field *k, const Field *v, PyObject *hseq)
{
    Py_ssize_t n = PyByteArray_GET_SIZE(ba);
    if (n < BATCH_HEADER_SIZE) {
        PyErr_SetString(PyExc_ValueError, "a batch buffer starts with its 61 header bytes");
        return APPEND_ERROR;
    }
    unsigned char *d = (unsigned char *)PyByteArray_AS_STRING(ba);
    int64_t count = (int32_t)load_be32(d + AT_RECORDS_COUNT);
    int64_t base = timestamp, max_ts = timestamp, delta = 0;
    if (count < 0 || count >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "the batch holds as many records as a batch can");
        return APPEND_ERROR;
    }
    if (count > 0) {
        base = (int64_t)load_be64(d + AT_BASE_TIMESTAMP);
        max_ts = (int64_t)load_be64(d + AT_MAX_TIMESTAMP);
        if (__builtin_sub_overflow(timestamp, base, &delta)) {
            PyErr_SetString(PyExc_OverflowError, "timestamp delta does not fit a varlong");
            return APPEND_ERROR;
        }
    }
    if (k->len > INT32_MAX || v->len > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a key or value is longer than a varint can say");
        return APPEND_ERROR;
    }
    Py_ssize_t hcount = hseq == NULL ? 0 : PySequence_Fast_GET_SIZE(hseq), hbytes = 0;
    if (hcount > 0 && (hbytes = headers_size(hseq)) < 0)
        return APPEND_ERROR;
    Py_ssize_t body = 1 + varint_size(zigzag(delta)) + varint_size(zigzag(count)) + varint_size(zigzag(k->len)) +
                      (k->len > 0 ? k->len : 0) + varint_size(zigzag(v->len)) + (v->len > 0 ? v->len : 0) +
                      varint_size(zigzag(hcount)) + hbytes;
    if (body > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a record is longer than a varint can say");
        return APPEND_ERROR;
    }
    Py_ssize_t total = varint_size(zigzag(body)) + body;
    if (count > 0 && n + total > limit)
        return APPEND_FULL;
    if (PyByteArray_Resize(ba, n + total) < 0)
        return APPEND_ERROR;
    d = (unsigned char *)PyByteArray_AS_STRING(ba);
    unsigned char *p = d + n;
    p = put_varint(p, zigzag(body));
    *p++ = 0; /* attributes */
    p = put_varint(p, zigzag(delta));
    p = put_varint(p, zigzag(count));
    p = put_varint(p, zigzag(k->len));
    if (k->len > 0) {
        memcpy(p, k->data, (size_t)k->len);
        p += k->len;
    }
    p = put_varint(p, zigzag(v->len));
    if (v->len > 0) {
        memcpy(p, v->data, (size_t)v->len);
        p += v->len;
    }
    p = put_varint(p, zigzag(hcount));
    if (hcount > 0)
        p = put_headers(p, hseq);
    store_be32(d + AT_LAST_OFFSET_DELTA, (uint32_t)count);
    store_be64(d + AT_BASE_TIMESTAMP, (uint64_t)base);
    store_be64(d + AT_MAX_TIMESTAMP, (uint64_t)(timestamp > max_ts ? timestamp : max_ts));
    store_be32(d + AT_RECORDS_COUNT, (uint32_t)(count + 1));
    return (Py_ssize_t)count;
}

/* Headers as a fast sequence, or NULL (no error) for None and empty ones; NULL with an error otherwise. */
static int
headers_get(PyObject *o, PyObject **seq)
{
    *seq = NULL;
    if (o == Py_None)
        return 0;
    PyObject *s = PySequence_Fast(o, "headers must be a sequence of (str, bytes | None) tuples");
    if (s == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(s) == 0)
        Py_DECREF(s);
    else
        *seq = s;
    return 0;
}

/* append_record(batch, timestamp, key, value, headers, limit) -> offset delta, or -1 when it does not fit
 *
 * `batch` is a bytearray: the 61 header bytes, then the records so far. The record is appended unless the batch
 * already holds one and it would grow past `limit` bytes. `headers`: None or a sequence of (str, bytes | None). */
static PyObject *
append_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "append_record(batch, timestamp, key, value, headers, limit)");
        return NULL;
    }
    if (!PyByteArray_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "the batch must be a bytearray");
        return NULL;
    }
    long long ts = PyLong_AsLongLong(args[1]);
    if (ts == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t limit = PyLong_AsSsize_t(args[5]);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    Field k, v;
    PyObject *hseq;
    if (field_get(args[2], &k, "key") < 0)
        return NULL;
    if (field_get(args[3], &v, "value") < 0) {
        field_release(&k);
        return NULL;
    }
    if (headers_get(args[4], &hseq) < 0) {
        field_release(&k);
        field_release(&v);
        return NULL;
    }
    Py_ssize_t r = append_one(args[0], limit, (int64_t)ts, &k, &v, hseq);
    Py_XDECREF(hseq);
    field_release(&k);
    field_release(&v);
    if (r == APPEND_ERROR)
        return NULL;
    return PyLong_FromSsize_t(r);
}

static inline int32_t
murmur2_of(const unsigned char *data, Py_ssize_t length)
{
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t words = length / 4;
    for (Py_ssize_t i = 0; i < words; i++) {
        const unsigned char *w = data + 4 * i;
        uint32_t k = (uint32_t)w[0] | ((uint32_t)w[1] << 8) | ((uint32_t)w[2] << 16) | ((uint32_t)w[3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = data + (length & ~(Py_ssize_t)3);
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

/* Java's default partition of a key: toPositive(murmur2(key)) % n */
static inline Py_ssize_t
key_partition_of(const Field *k, Py_ssize_t n)
{
    return (Py_ssize_t)((uint32_t)murmur2_of((const unsigned char *)k->data, k->len) & 0x7fffffffu) % n;
}

/* key_partition(key, num_partitions) -> the partition Java's default partitioner picks for a non-null key */
static PyObject *
key_partition(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "key_partition(key, num_partitions)");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[1]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n <= 0) {
        PyErr_Format(PyExc_ValueError, "num_partitions must be positive, got %zd", n);
        return NULL;
    }
    Field k;
    if (args[0] == Py_None) {
        PyErr_SetString(PyExc_TypeError, "a null key has no key partition");
        return NULL;
    }
    if (field_get(args[0], &k, "key") < 0)
        return NULL;
    Py_ssize_t p = key_partition_of(&k, n);
    field_release(&k);
    return PyLong_FromSsize_t(p);
}

/* append_routed(bufs, limits, outcomes, num_partitions, sticky, use_keys, partition, key, value, timestamp,
 *               handle_type) -> handle or None
 *
 * The whole of a plain `produce` once its topic has a route, in one call (the caller holds the accumulator's
 * lock): the partition (`partition` if an int; else Java's partition of the key when there is one and
 * `use_keys`; else `sticky`), the append to that partition's open batch (`bufs`, `limits` and `outcomes` are
 * lists indexed by partition: the batch's buffer or None, its byte limit, its outcome), and the record's
 * handle, `handle_type((outcome, index, timestamp))`. `timestamp` None means now (CLOCK_REALTIME in ms, as
 * time.time_ns() // 1_000_000). Returns None, having appended nothing, when the record needs more than this:
 * a partition outside the topic, one without an open batch, or a full batch. */
static PyObject *
append_routed(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 11 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1]) || !PyList_CheckExact(args[2]) ||
        !PyType_Check(args[10]) || !PyType_IsSubtype((PyTypeObject *)args[10], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "append_routed(bufs, limits, outcomes, num_partitions, sticky, use_keys, "
                                         "partition, key, value, timestamp, handle_type)");
        return NULL;
    }
    PyObject *bufs = args[0], *limits = args[1], *outcomes = args[2];
    Py_ssize_t nparts = PyLong_AsSsize_t(args[3]);
    if (nparts == -1 && PyErr_Occurred())
        return NULL;
    Field k, v;
    if (field_get(args[7], &k, "key") < 0)
        return NULL;
    Py_ssize_t p;
    if (args[6] != Py_None) {
        p = PyLong_AsSsize_t(args[6]);
        if (p == -1 && PyErr_Occurred()) {
            field_release(&k);
            return NULL;
        }
    } else if (k.len >= 0 && PyObject_IsTrue(args[5]) && nparts > 0) {
        p = key_partition_of(&k, nparts);
    } else {
        p = PyLong_AsSsize_t(args[4]);
        if (p == -1 && PyErr_Occurred()) {
            field_release(&k);
            return NULL;
        }
    }
    if (p < 0 || p >= nparts || p >= PyList_GET_SIZE(bufs) || p >= PyList_GET_SIZE(limits) ||
        p >= PyList_GET_SIZE(outcomes) || PyList_GET_ITEM(bufs, p) == Py_None) {
        field_release(&k);
        Py_RETURN_NONE;
    }
    PyObject *ba = PyList_GET_ITEM(bufs, p);
    long long ts;
    if (args[9] == Py_None) {
        struct timespec now;
        if (clock_gettime(CLOCK_REALTIME, &now) != 0) {
            field_release(&k);
            PyErr_SetFromErrno(PyExc_OSError);
            return NULL;
        }
        ts = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    } else {
        ts = PyLong_AsLongLong(args[9]);
        if (ts == -1 && PyErr_Occurred()) {
            field_release(&k);
            return NULL;
        }
        if (ts < 0) { /* the caller's general path refuses it, saying why */
            field_release(&k);
            Py_RETURN_NONE;
        }
    }
    Py_ssize_t limit = PyLong_AsSsize_t(PyList_GET_ITEM(limits, p));
    if ((limit == -1 && PyErr_Occurred()) || !PyByteArray_CheckExact(ba)) {
        field_release(&k);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "bufs must hold bytearrays or None");
        return NULL;
    }
    if (field_get(args[8], &v, "value") < 0) {
        field_release(&k);
        return NULL;
    }
    Py_ssize_t r = append_one(ba, limit, (int64_t)ts, &k, &v, NULL);
    field_release(&k);
    field_release(&v);
    if (r == APPEND_ERROR)
        return NULL;
    if (r == APPEND_FULL)
        Py_RETURN_NONE;
    PyTypeObject *htype = (PyTypeObject *)args[10];
    PyObject *index = PyLong_FromSsize_t(r), *stamp = PyLong_FromLongLong(ts);
    PyObject *handle = (index != NULL && stamp != NULL) ? htype->tp_alloc(htype, 3) : NULL;
    if (handle == NULL) {
        Py_XDECREF(index);
        Py_XDECREF(stamp);
        return NULL;
    }
    PyTuple_SET_ITEM(handle, 0, Py_NewRef(PyList_GET_ITEM(outcomes, p)));
    PyTuple_SET_ITEM(handle, 1, index);
    PyTuple_SET_ITEM(handle, 2, stamp);
    return handle;
}

/* Where the rows of a bulk append come from: a Python sequence of (key, value[, headers]) tuples, or the
 * buffers of Arrow binary columns (offsets int32 or int64, data, validity bitmap or none; `shift` is the
 * array's offset into its buffers). */
typedef struct {
    Py_buffer offsets, data, validity;
    int present, wide, has_validity;
    Py_ssize_t shift, length;
} ArrowBinary;

typedef struct {
    Py_buffer values, validity;
    int present, has_validity;
    Py_ssize_t shift, length;
} ArrowInt32;

static void
arrow_binary_release(ArrowBinary *a)
{
    if (a->present) {
        PyBuffer_Release(&a->offsets);
        PyBuffer_Release(&a->data);
        if (a->has_validity)
            PyBuffer_Release(&a->validity);
        a->present = 0;
    }
}

static void
arrow_int32_release(ArrowInt32 *a)
{
    if (a->present) {
        PyBuffer_Release(&a->values);
        if (a->has_validity)
            PyBuffer_Release(&a->validity);
        a->present = 0;
    }
}

static inline int
bit_set(const Py_buffer *b, Py_ssize_t i)
{
    return (((const unsigned char *)b->buf)[i >> 3] >> (i & 7)) & 1;
}

/* (offsets, data, validity or None, shift, length, wide) or None: a column of all nulls */
static int
arrow_binary_get(PyObject *spec, ArrowBinary *a, Py_ssize_t end)
{
    a->present = 0;
    if (spec == Py_None)
        return 0;
    PyObject *offsets, *data, *validity;
    if (!PyArg_ParseTuple(spec, "OOOnnp", &offsets, &data, &validity, &a->shift, &a->length, &a->wide))
        return -1;
    if (a->shift < 0 || a->length < end) {
        PyErr_SetString(PyExc_ValueError, "an Arrow column is shorter than the rows asked for");
        return -1;
    }
    if (PyObject_GetBuffer(offsets, &a->offsets, PyBUF_SIMPLE) < 0)
        return -1;
    if (PyObject_GetBuffer(data, &a->data, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&a->offsets);
        return -1;
    }
    a->has_validity = validity != Py_None;
    if (a->has_validity && PyObject_GetBuffer(validity, &a->validity, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&a->offsets);
        PyBuffer_Release(&a->data);
        return -1;
    }
    a->present = 1;
    Py_ssize_t width = a->wide ? 8 : 4;
    if (a->offsets.len < (a->shift + a->length + 1) * width ||
        (a->has_validity && a->validity.len * 8 < a->shift + a->length)) {
        arrow_binary_release(a);
        PyErr_SetString(PyExc_ValueError, "an Arrow column's buffers are shorter than its length");
        return -1;
    }
    return 0;
}

static int
arrow_int32_get(PyObject *spec, ArrowInt32 *a, Py_ssize_t end)
{
    a->present = 0;
    if (spec == Py_None)
        return 0;
    PyObject *values, *validity;
    if (!PyArg_ParseTuple(spec, "OOnn", &values, &validity, &a->shift, &a->length))
        return -1;
    if (a->shift < 0 || a->length < end) {
        PyErr_SetString(PyExc_ValueError, "an Arrow column is shorter than the rows asked for");
        return -1;
    }
    if (PyObject_GetBuffer(values, &a->values, PyBUF_SIMPLE) < 0)
        return -1;
    a->has_validity = validity != Py_None;
    if (a->has_validity && PyObject_GetBuffer(validity, &a->validity, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&a->values);
        return -1;
    }
    a->present = 1;
    if (a->values.len < (a->shift + a->length) * 4 || (a->has_validity && a->validity.len * 8 < a->shift + a->length)) {
        arrow_int32_release(a);
        PyErr_SetString(PyExc_ValueError, "an Arrow column's buffers are shorter than its length");
        return -1;
    }
    return 0;
}

/* Row i of an Arrow binary column as a Field (never a view: the column's buffers outlive the call). */
static inline int
arrow_binary_field(const ArrowBinary *a, Py_ssize_t i, Field *f)
{
    f->has_view = 0;
    Py_ssize_t j = a->shift + i;
    if (!a->present || (a->has_validity && !bit_set(&a->validity, j))) {
        f->data = NULL;
        f->len = -1;
        return 0;
    }
    int64_t start, stop;
    if (a->wide) {
        memcpy(&start, (const char *)a->offsets.buf + 8 * j, 8);
        memcpy(&stop, (const char *)a->offsets.buf + 8 * (j + 1), 8);
    } else {
        int32_t s, e;
        memcpy(&s, (const char *)a->offsets.buf + 4 * j, 4);
        memcpy(&e, (const char *)a->offsets.buf + 4 * (j + 1), 4);
        start = s;
        stop = e;
    }
    if (start < 0 || stop < start || stop > a->data.len) {
        PyErr_SetString(PyExc_ValueError, "an Arrow column's offsets point outside its data");
        return -1;
    }
    f->data = (const char *)a->data.buf + start;
    f->len = (Py_ssize_t)(stop - start);
    return 0;
}

/* append_rows(batches, limits, timestamp, num_partitions, sticky, use_keys, start, end, rows, partitions,
 *             arrow_keys, arrow_values, arrow_partitions, touched) -> (row, partition)
 *
 * Appends rows start..end-1, each to the batch of its partition: `batches` and `limits` are lists indexed by
 * partition (a bytearray or None; a byte limit as in append_record). A row's partition is its own (from
 * `partitions`: None, an int for all rows, or a list of int | None; or from `arrow_partitions`), else
 * Java's partition of its key when it has one and `use_keys`, else `sticky`. Stops at the first row whose
 * partition has no batch or a full one, and returns (that row, its partition) so the caller can open a new
 * batch and call again from there; returns (end, -1) when every row went in.
 *
 * Rows come from `rows`, a list or tuple of (key, value) or (key, value, headers) tuples, or else from the
 * Arrow columns: `arrow_keys`/`arrow_values` are (offsets, data, validity or None, shift, length, wide) or None
 * for a column of nulls, `arrow_partitions` is (values, validity or None, shift, length) or None.
 * `touched`: None, or a bytearray in which the byte of every partition a row went to is set to 1. */
static PyObject *
append_rows(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *batches, *limits, *rows, *partitions, *akeys, *avalues, *aparts, *touched;
    long long ts;
    Py_ssize_t nparts, sticky, start, end;
    int use_keys;
    if (!PyArg_ParseTuple(args, "O!O!LnnpnnOOOOOO", &PyList_Type, &batches, &PyList_Type, &limits, &ts, &nparts,
                          &sticky, &use_keys, &start, &end, &rows, &partitions, &akeys, &avalues, &aparts, &touched))
        return NULL;
    if (PyList_GET_SIZE(batches) < nparts || PyList_GET_SIZE(limits) < nparts || nparts <= 0 || start < 0 ||
        end < start ||
        (touched != Py_None && (!PyByteArray_CheckExact(touched) || PyByteArray_GET_SIZE(touched) < nparts))) {
        PyErr_SetString(PyExc_ValueError, "append_rows: inconsistent arguments");
        return NULL;
    }
    ArrowBinary ak = {0}, av = {0};
    ArrowInt32 ap = {0};
    PyObject *seq = NULL, *result = NULL;
    Py_ssize_t fixed = -1;
    int from_rows = rows != Py_None;
    if (from_rows) {
        seq = PySequence_Fast(rows, "rows must be a list or tuple");
        if (seq == NULL)
            return NULL;
        if (PySequence_Fast_GET_SIZE(seq) < end) {
            PyErr_SetString(PyExc_ValueError, "append_rows: fewer rows than asked for");
            goto done;
        }
    } else if (arrow_binary_get(akeys, &ak, end) < 0 || arrow_binary_get(avalues, &av, end) < 0 ||
               arrow_int32_get(aparts, &ap, end) < 0) {
        goto done;
    }
    if (PyLong_Check(partitions)) {
        fixed = PyLong_AsSsize_t(partitions);
        if (fixed == -1 && PyErr_Occurred())
            goto done;
        if (fixed < 0) {
            PyErr_Format(PyExc_ValueError, "partition %zd does not exist", fixed);
            goto done;
        }
    } else if (partitions != Py_None && (!PyList_Check(partitions) || PyList_GET_SIZE(partitions) < end)) {
        PyErr_SetString(PyExc_ValueError, "partitions must be None, an int or a list as long as the rows");
        goto done;
    }
    Py_ssize_t i;
    for (i = start; i < end; i++) {
        Field k, v;
        PyObject *hseq = NULL;
        Py_ssize_t p = fixed;
        if (from_rows) {
            PyObject *row = PySequence_Fast_GET_ITEM(seq, i);
            Py_ssize_t width = PyTuple_Check(row) ? PyTuple_GET_SIZE(row) : 0;
            if (width != 2 && width != 3) {
                PyErr_SetString(PyExc_TypeError, "a row must be a (key, value) or (key, value, headers) tuple");
                goto done;
            }
            if (field_get(PyTuple_GET_ITEM(row, 0), &k, "key") < 0)
                goto done;
            if (field_get(PyTuple_GET_ITEM(row, 1), &v, "value") < 0) {
                field_release(&k);
                goto done;
            }
            if (width == 3 && headers_get(PyTuple_GET_ITEM(row, 2), &hseq) < 0) {
                field_release(&k);
                field_release(&v);
                goto done;
            }
        } else {
            if (arrow_binary_field(&ak, i, &k) < 0 || arrow_binary_field(&av, i, &v) < 0)
                goto done;
            if (ap.present && (!ap.has_validity || bit_set(&ap.validity, ap.shift + i))) {
                int32_t q;
                memcpy(&q, (const char *)ap.values.buf + 4 * (ap.shift + i), 4);
                p = q;
                if (p < 0) {
                    PyErr_Format(PyExc_ValueError, "partition %zd does not exist", p);
                    goto done;
                }
            }
        }
        if (p < 0 && partitions != Py_None && fixed < 0) {
            PyObject *q = PyList_GET_ITEM(partitions, i);
            if (q != Py_None) {
                p = PyLong_AsSsize_t(q);
                if (p == -1 && PyErr_Occurred()) {
                    field_release(&k);
                    field_release(&v);
                    Py_XDECREF(hseq);
                    goto done;
                }
                if (p < 0) {
                    PyErr_Format(PyExc_ValueError, "partition %zd does not exist", p);
                    field_release(&k);
                    field_release(&v);
                    Py_XDECREF(hseq);
                    goto done;
                }
            }
        }
        if (p < 0)
            p = (use_keys && k.len >= 0) ? key_partition_of(&k, nparts) : sticky;
        if (p >= nparts) {
            PyErr_Format(PyExc_ValueError, "partition %zd does not exist (the topic has %zd)", p, nparts);
            field_release(&k);
            field_release(&v);
            Py_XDECREF(hseq);
            goto done;
        }
        PyObject *ba = PyList_GET_ITEM(batches, p);
        Py_ssize_t r = APPEND_FULL;
        if (ba != Py_None) {
            if (!PyByteArray_CheckExact(ba)) {
                PyErr_SetString(PyExc_TypeError, "batches must hold bytearrays or None");
                r = APPEND_ERROR;
            } else {
                Py_ssize_t limit = PyLong_AsSsize_t(PyList_GET_ITEM(limits, p));
                r = (limit == -1 && PyErr_Occurred()) ? APPEND_ERROR : append_one(ba, limit, (int64_t)ts, &k, &v, hseq);
            }
        }
        field_release(&k);
        field_release(&v);
        Py_XDECREF(hseq);
        if (r == APPEND_ERROR)
            goto done;
        if (r == APPEND_FULL) {
            result = Py_BuildValue("(nn)", i, p);
            goto done;
        }
        if (touched != Py_None)
            PyByteArray_AS_STRING(touched)[p] = 1;
    }
    result = Py_BuildValue("(nn)", end, (Py_ssize_t)-1);
done:
    Py_XDECREF(seq);
    arrow_binary_release(&ak);
    arrow_binary_release(&av);
    arrow_int32_release(&ap);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, "Decode a batch's records section into record tuples (see _crecords.c)."},
    {"append_columns", append_columns, METH_VARARGS, "Append a batch's records to Arrow column buffers (see _crecords.c)."},
    {"append_record", (PyCFunction)(void (*)(void))append_record, METH_FASTCALL,
     "Append one record to a batch being built (the producer's encoder; see _crecords.c)."},
    {"append_rows", append_rows, METH_VARARGS,
     "Append many records to the batches of their partitions (see _crecords.c)."},
    {"append_routed", (PyCFunction)(void (*)(void))append_routed, METH_FASTCALL,
     "Place and append one record and return its handle (a plain produce; see _crecords.c)."},
    {"key_partition", (PyCFunction)(void (*)(void))key_partition, METH_FASTCALL,
     "Java's default partition of a key: toPositive(murmur2(key)) % num_partitions."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_crecords",
    .m_doc = "The consumer's RecordBatch v2 decoder and the producer's record encoder in C (fast paths).",
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
