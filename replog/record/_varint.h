/* The zig-zag varints of Kafka's records, read in C: shared by the compiled modules
 * (replog/record/_record_spans.c, replog/spark/_batch_decode.c), which include it after
 * Python.h and stdint.h. varint.py's rules: an int32 at most 5 bytes, an int64 10, neither
 * overflowing. */

#ifndef REPLOG_VARINT_H
#define REPLOG_VARINT_H

/* A zig-zag encoded value's signed one. */
static inline int64_t
unzigzag(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* The zig-zag varint at buf[*at], at most max_bytes long, not reaching end; 0 if none. */
static inline int
read_varint(const uint8_t *buf, Py_ssize_t *at, Py_ssize_t end, int max_bytes, int64_t *out)
{
    Py_ssize_t p = *at;
    if (p < end && buf[p] < 0x80) {
        uint64_t u = buf[p];
        *out = unzigzag(u);
        *at = p + 1;
        return 1;
    }
    /* Two or three bytes (most lengths and deltas): at most 21 bits, inside any limit. */
    if (end - p >= 3) {
        uint64_t u = (uint64_t)(buf[p] & 0x7F) | (uint64_t)(buf[p + 1] & 0x7F) << 7;
        if (buf[p + 1] < 0x80) {
            *out = unzigzag(u);
            *at = p + 2;
            return 1;
        }
        if (buf[p + 2] < 0x80) {
            u |= (uint64_t)buf[p + 2] << 14;
            *out = unzigzag(u);
            *at = p + 3;
            return 1;
        }
    }
    uint64_t u = 0;
    int shift = 0;
    Py_ssize_t limit = (end - p > max_bytes) ? p + max_bytes : end;
    while (p < limit) {
        uint8_t b = buf[p++];
        if (shift == 63 && b > 1)
            return 0; /* a varlong's tenth byte: more than bit 63 overflows */
        u |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            if (max_bytes == 5 && (u >> 32))
                return 0; /* a varint overflowing 32 bits */
            *out = unzigzag(u);
            *at = p;
            return 1;
        }
        shift += 7;
    }
    return 0; /* too long, or past end */
}

#endif
