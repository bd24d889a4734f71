/* The traceEvents array -> event columns in one pass of C (the fast path of decode.py).
 *
 * scan(array_json, classify) reads a JSON array of trace events and returns the columns
 * that ChunkDecoder.columns(decode_events(array_json)) would build, or None when the text
 * is anything it does not read exactly as msgspec's typed decoder does: a field of another
 * type (msgspec's non-strict coercions included), a duplicate field, an escaped key, an int
 * out of its column's range, nesting past MAX_DEPTH, NaN/Infinity, bad UTF-8 anywhere, the
 * torch-1.8 "external id" spelling. The caller then decodes the chunk the Python way, so
 * this file only ever has to be right about the text it accepts.
 *
 * Strings are interned here by their bytes; the caller maps the returned tables onto its own
 * (in order of first appearance, as the Python path interns them).
 *
 * Most of Kineto's text goes through fast paths, each of which reads exactly what the general path
 * would or hands the text to it: members foreseen (Shapes: the text before each value compared with
 * the last object's), numbers eight digits at a time (lead_digits), strings under sixteen plain bytes
 * in one load (short_string).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef unsigned char u8;

/* The scan runs without the GIL (so threads scan chunks at once); it takes the GIL back only to
   make Python objects (a new name, combo or lane) and for the rare number strtod must parse.
   Helpers that cannot raise without the GIL note a failed allocation here instead. */
static _Thread_local int out_of_memory;
/* The text holds '"external id"' (torch < 1.13's spelling, which decode_events rewrites): seen by
   scan_string as it closes each string, so the scan needs no second pass over the text. */
static _Thread_local int old_external_id;

#define BAIL (-1)
#define MAX_DEPTH 200
#define MAX_US 4503599627370496.0 /* 2**52: |ts| and dur in µs that stay exact and fit int64 ns */

/* Kinds, as schema.Kind numbers them. */
enum { K_MEMSET = 2, K_CPU_OP = 3, K_PYTHON = 5, K_RUNTIME = 6, K_DRIVER = 7, K_MEMORY = 10 };

/* ------------------------------------------------------------------ buffers and tables */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        out_of_memory = 1;
        return BAIL;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *s, size_t n) {
    if (n == 0) return 0; /* memcpy's pointers must not be NULL, even for no bytes */
    if (buf_reserve(b, n)) return BAIL;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

static uint64_t hash_bytes(const u8 *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, s, n);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return h;
}

typedef struct {
    uint64_t hash;
    size_t off;
    uint32_t len;
    int32_t id; /* -1: empty */
} Slot;

/* Byte strings -> dense ids in order of insertion; keys are copied into ``keys``. */
typedef struct {
    Slot *slots;
    size_t mask, count;
    Buf keys;
} Table;

static int table_init(Table *t) {
    t->mask = 255;
    t->count = 0;
    t->keys = (Buf){0};
    t->slots = malloc(sizeof(Slot) * (t->mask + 1));
    if (!t->slots) {
        out_of_memory = 1;
        return BAIL;
    }
    for (size_t i = 0; i <= t->mask; i++) t->slots[i].id = -1;
    return 0;
}

static void table_free(Table *t) {
    free(t->slots);
    free(t->keys.data);
}

static int table_grow(Table *t) {
    size_t mask = t->mask * 2 + 1;
    Slot *slots = malloc(sizeof(Slot) * (mask + 1));
    if (!slots) {
        out_of_memory = 1;
        return BAIL;
    }
    for (size_t i = 0; i <= mask; i++) slots[i].id = -1;
    for (size_t i = 0; i <= t->mask; i++) {
        Slot s = t->slots[i];
        if (s.id < 0) continue;
        size_t j = s.hash & mask;
        while (slots[j].id >= 0) j = (j + 1) & mask;
        slots[j] = s;
    }
    free(t->slots);
    t->slots = slots;
    t->mask = mask;
    return 0;
}

/* The slot of ``key`` (hash ``h``): the one holding it (id >= 0), else the empty one where it goes. */
static inline Slot *table_slot(const Table *t, const void *key, size_t len, uint64_t h) {
    size_t j = h & t->mask;
    for (;;) {
        Slot *s = &t->slots[j];
        if (s->id < 0 || (s->hash == h && s->len == len && (len == 0 || memcmp(t->keys.data + s->off, key, len) == 0)))
            return s;
        j = (j + 1) & t->mask;
    }
}

/* A key (at most UINT32_MAX bytes) already in t->keys at ``off`` into its empty slot ``s``: its id, or BAIL. */
static int64_t table_fill(Table *t, Slot *s, uint64_t h, size_t off, size_t len) {
    s->hash = h;
    s->off = off;
    s->len = (uint32_t)len;
    int32_t id = s->id = (int32_t)t->count++;
    if (t->count * 2 > t->mask && table_grow(t)) return BAIL; /* frees the slots s points into */
    return id;
}

/* The id of ``key``, added (``*added`` = 1) if new; BAIL on memory errors. */
static int64_t table_id(Table *t, const void *key, size_t len, int *added) {
    uint64_t h = hash_bytes(key, len);
    Slot *s = table_slot(t, key, len, h);
    *added = 0;
    if (s->id >= 0) return s->id;
    if (len > UINT32_MAX) return BAIL;
    size_t off = t->keys.len;
    if (buf_put(&t->keys, key, len)) return BAIL; /* t->keys moves, the slots do not */
    *added = 1;
    return table_fill(t, s, h, off, len);
}

/* The text just written at the end of ``t``'s keys, from ``at``, kept once: its offset if the table
   holds it already (the copy just written is dropped), else ``at``, where it stays. Record_shapes
   texts repeat every step (a 1 GB trace's 919k ops hold a few hundred), so a chunk's blob holds
   each once. */
static int64_t table_place(Table *t, size_t at) {
    const char *key = t->keys.data + at;
    size_t len = t->keys.len - at;
    uint64_t h = hash_bytes((const u8 *)key, len);
    Slot *s = table_slot(t, key, len, h);
    if (s->id >= 0) {
        t->keys.len = at;
        return (int64_t)s->off;
    }
    if (len > UINT32_MAX || table_fill(t, s, h, at, len) < 0) return BAIL;
    return (int64_t)at;
}

/* ------------------------------------------------------------------ JSON scanning */

typedef struct {
    const u8 *p, *end;
    PyThreadState **saved; /* the scan's thread state while it runs without the GIL */
} Cur;

typedef struct {
    const u8 *s;
    size_t n;
    int escaped;
} Str;

/* Byte classes: JSON whitespace; bytes a string holds as they are (not '"', '\\', control, non-ASCII). */
static u8 IS_WS[256], IS_PLAIN[256];

static void index_bytes(void) {
    IS_WS[' '] = IS_WS['\n'] = IS_WS['\r'] = IS_WS['\t'] = 1;
    for (int b = 0x20; b < 0x80; b++) IS_PLAIN[b] = b != '"' && b != '\\';
}

static inline void skip_ws(Cur *c) {
    const u8 *p = c->p, *e = c->end;
    while (p < e && IS_WS[*p]) {
        if (*p++ != '\n') continue;
        while (e - p >= 8) { /* an indentation: eight spaces at a time */
            uint64_t v;
            memcpy(&v, p, 8);
            if (v != 0x2020202020202020ull) break;
            p += 8;
        }
    }
    c->p = p;
}

/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80), 0 if invalid. */
static int utf8_len(const u8 *p, const u8 *e) {
    u8 b0 = p[0];
    int n;
    u8 lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) n = 2;
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
        n = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F; /* no UTF-16 surrogates */
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        n = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else
        return 0;
    if (e - p < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

static int hex4(const u8 *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        u8 ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9') v |= ch - '0';
        else if (ch >= 'a' && ch <= 'f') v |= ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F') v |= ch - 'A' + 10;
        else return BAIL;
    }
    *out = v;
    return 0;
}

static void put_utf8(Buf *b, unsigned cp) {
    char *d = b->data + b->len;
    if (cp < 0x80) {
        d[0] = (char)cp;
        b->len += 1;
    } else if (cp < 0x800) {
        d[0] = (char)(0xC0 | (cp >> 6));
        d[1] = (char)(0x80 | (cp & 0x3F));
        b->len += 2;
    } else if (cp < 0x10000) {
        d[0] = (char)(0xE0 | (cp >> 12));
        d[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (char)(0x80 | (cp & 0x3F));
        b->len += 3;
    } else {
        d[0] = (char)(0xF0 | (cp >> 18));
        d[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        d[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[3] = (char)(0x80 | (cp & 0x3F));
        b->len += 4;
    }
}

/* The escaped text s[0:n] (validated by scan_string) decoded into ``scratch``. */
static int unescape(const u8 *s, size_t n, Buf *scratch) {
    scratch->len = 0;
    if (buf_reserve(scratch, n + 4)) return BAIL; /* decoding never lengthens the text */
    const u8 *e = s + n;
    while (s < e) {
        if (*s != '\\') {
            scratch->data[scratch->len++] = (char)*s++;
            continue;
        }
        s++;
        unsigned cp = 0; /* (set below: scan_string validated every escape) */
        switch (*s) {
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            hex4(s + 1, &cp);
            s += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned low = 0xDC00;
                hex4(s + 3, &low);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                s += 6;
            }
            break;
        default: cp = *s; /* " \ / */
        }
        s++;
        put_utf8(scratch, cp);
    }
    return 0;
}

/* A string's text start[0:end - start], unescaped or not, as it ends: torch 1.8's '"external id"' lies in
   the text exactly where a string is `external id` or ends with an escaped quote and then it (any other
   '"' before it would end a string outside JSON's grammar) */
static inline void note_old_spelling(const u8 *start, const u8 *end) {
    if (end - start >= 11 && end[-1] == 'd' && end[-11] == 'e' && (end - start == 11 || end[-12] == '"') &&
        !memcmp(end - 11, "external id", 11))
        old_external_id = 1;
}

#if defined(__SSE2__)
/* Which of the sixteen bytes at p a string does not hold as they are: '"', '\\', a control byte or
   non-ASCII (as signed bytes, control and non-ASCII bytes are both below ' '), one bit each. */
static inline unsigned special_bytes(const u8 *p) {
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(' ');
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)),
                                   _mm_cmplt_epi8(v, space));
    return (unsigned)_mm_movemask_epi8(special);
}
#endif

/* A string at c->p ('"'): validated; its raw span in *out (escaped set if it has escapes). */
static int scan_string(Cur *c, Str *out) {
    const u8 *p = c->p + 1, *e = c->end, *start = p;
    int escaped = 0;
    for (;;) {
#if defined(__SSE2__)
        /* sixteen bytes at a time while none is special */
        while (e - p >= 16) {
            unsigned hits = special_bytes(p);
            if (hits) {
                p += __builtin_ctz(hits);
                break;
            }
            p += 16;
        }
#else
        /* eight bytes at a time while none is '"', '\\', a control byte or non-ASCII */
        while (e - p >= 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
            uint64_t quote = v ^ (ones * '"'), slash = v ^ (ones * '\\');
            uint64_t special = ((quote - ones) & ~quote) | ((slash - ones) & ~slash) | (v - ones * 0x20) | v;
            if (special & highs) break;
            p += 8;
        }
#endif
        while (p < e && IS_PLAIN[*p]) p++;
        if (p >= e) return BAIL;
        u8 ch = *p;
        if (ch == '"') break;
        if (ch == '\\') {
            escaped = 1;
            if (e - p < 2) return BAIL;
            switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                p += 2;
                break;
            case 'u': {
                unsigned cp, low;
                if (e - p < 6 || hex4(p + 2, &cp)) return BAIL;
                p += 6;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return BAIL; /* a lone low surrogate */
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (e - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &low)) return BAIL;
                    if (low < 0xDC00 || low > 0xDFFF) return BAIL;
                    p += 6;
                }
                break;
            }
            default:
                return BAIL;
            }
            continue;
        }
        if (ch < 0x20) return BAIL;
        int k = utf8_len(p, e);
        if (!k) return BAIL;
        p += k;
    }
    note_old_spelling(start, p);
    if (out) {
        out->s = start;
        out->n = (size_t)(p - start);
        out->escaped = escaped;
    }
    c->p = p + 1;
    return 0;
}

/* A string of under sixteen plain bytes at c->p (Kineto's ph and cat, most ids and short names), read
   in one load as scan_string reads it: 1, or 0 for scan_string to read (longer, escaped, not ASCII). */
static inline int short_string(Cur *c, Str *out) {
#if defined(__SSE2__)
    const u8 *p = c->p;
    if (c->end - p < 17 || *p != '"') return 0;
    unsigned hits = special_bytes(p + 1);
    int n = hits ? __builtin_ctz(hits) : 16;
    if (n == 16 || p[1 + n] != '"') return 0;
    note_old_spelling(p + 1, p + 1 + n);
    *out = (Str){p + 1, (size_t)n, 0};
    c->p = p + n + 2;
    return 1;
#else
    (void)c;
    (void)out;
    return 0;
#endif
}

/* A string value, decoded: escapes resolved into ``scratch``. */
static int read_string(Cur *c, Str *out, Buf *scratch) {
    if (short_string(c, out)) return 0;
    if (c->p >= c->end || *c->p != '"') return BAIL;
    if (scan_string(c, out)) return BAIL;
    if (out->escaped) {
        if (unescape(out->s, out->n, scratch)) return BAIL;
        out->s = (const u8 *)scratch->data;
        out->n = scratch->len;
    }
    return 0;
}

typedef struct {
    int neg, is_int, big; /* big: over 19 significant digits or a huge exponent */
    uint64_t mant;
    int64_t exp10;
    const u8 *s;
    size_t n;
} Num;

static const uint64_t POW10_U64[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

/* The digits that lead the eight bytes at p, as a number; their count in *k, and in *zeros how many
   of them lead with '0'. Eight bytes at once (the digits' bytes as one word, simdjson's
   parse_eight_digits_unrolled after them): Kineto's times have 16 digits, its ids 5-7. */
static inline uint64_t lead_digits(const u8 *p, int *k, int *zeros) {
    uint64_t v;
    memcpy(&v, p, 8);
    const uint64_t highs = 0xF0F0F0F0F0F0F0F0ull, threes = 0x3030303030303030ull;
    /* a byte is a digit when its high nibble is 3 and adding 6 keeps it 3 (a carry out of a byte
       >= 0xFA reaches only the bytes after it, past the first non-digit) */
    uint64_t other = ((v & highs) ^ threes) | (((v + 0x0606060606060606ull) & highs) ^ threes);
    int n = other ? __builtin_ctzll(other) >> 3 : 8;
    *k = n;
    if (n == 0) {
        *zeros = 0;
        return 0;
    }
    uint64_t d = (v - threes) << (64 - 8 * n); /* the n digits last, zeros (leading digits) before */
    *zeros = d ? (__builtin_ctzll(d) >> 3) - (8 - n) : n;
    d = (d & 0x0F0F0F0F0F0F0F0Full) * 2561 >> 8;
    d = (d & 0x00FF00FF00FF00FFull) * 6553601 >> 16;
    return (d & 0x0000FFFF0000FFFFull) * 42949672960001ull >> 32;
}

static int scan_number_bytewise(Cur *c, Num *num);

/* lead_digits reads a word's bytes in memory order from its low end: little-endian machines only */
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define WORDWISE_NUMBERS 1
#else
#define WORDWISE_NUMBERS 0
#endif

/* A number at c->p: the same Num as scan_number_bytewise, eight digits at a time where it has 64 bytes
   of text ahead and at most 19 significant digits without an exponent (every Kineto number), else
   byte by byte. */
static inline __attribute__((always_inline)) int scan_number(Cur *c, Num *num) {
    const u8 *p = c->p;
    if (!WORDWISE_NUMBERS || c->end - p < 64) return scan_number_bytewise(c, num);
    Num r = {0};
    r.s = p;
    r.is_int = 1;
    int sig = 0, k = 0, zeros;
    if (*p == '-') {
        r.neg = 1;
        p++;
    }
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9') {
        r.mant = lead_digits(p, &k, &zeros);
        p += k;
        sig = k;
        while (k == 8 && sig <= 19) {
            uint64_t v = lead_digits(p, &k, &zeros);
            r.mant = r.mant * POW10_U64[k] + v;
            p += k;
            sig += k;
        }
    } else
        return BAIL;
    if (*p == '.') {
        r.is_int = 0;
        p++;
        if (*p < '0' || *p > '9') return BAIL;
        int words = 0;
        do {
            uint64_t v = lead_digits(p, &k, &zeros);
            sig += r.mant ? k : k - zeros; /* zeros before the first significant digit do not count */
            r.mant = r.mant * POW10_U64[k] + v;
            r.exp10 -= k;
            p += k;
        } while (k == 8 && sig <= 19 && ++words < 3);
    }
    /* past 19 digits (the bytewise scan marks it big), 24 fraction digits or an exponent */
    if (k == 8 || sig > 19 || *p == 'e' || *p == 'E') return scan_number_bytewise(c, num);
    r.n = (size_t)(p - r.s);
    c->p = p;
    if (num) *num = r;
    return 0;
}

/* A number skipped (in a field kept as text or not kept): its grammar checked as scan_number checks
   it, eight digits at a time where 64 bytes follow, without computing its value. */
static int skip_number(Cur *c) {
    const u8 *p = c->p;
    if (!WORDWISE_NUMBERS || c->end - p < 64) return scan_number_bytewise(c, NULL);
    int k = 0, zeros, words = 0;
    if (*p == '-') p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        do {
            lead_digits(p, &k, &zeros); /* (the value, unused, is not computed) */
            p += k;
        } while (k == 8 && ++words < 3);
    else
        return BAIL;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9') return BAIL;
        words = 0;
        do {
            lead_digits(p, &k, &zeros);
            p += k;
        } while (k == 8 && ++words < 3);
    }
    if (k == 8 || *p == 'e' || *p == 'E') return scan_number_bytewise(c, NULL); /* long, or an exponent */
    c->p = p;
    return 0;
}

static int scan_number_bytewise(Cur *c, Num *num) {
    const u8 *p = c->p, *e = c->end;
    Num r = {0};
    r.s = p;
    r.is_int = 1;
    int sig = 0;
    if (p < e && *p == '-') {
        r.neg = 1;
        p++;
    }
    if (p >= e) return BAIL;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') {
        while (p < e && *p >= '0' && *p <= '9') {
            if (sig < 19) r.mant = r.mant * 10 + (*p - '0');
            else r.big = 1;
            sig++;
            p++;
        }
    } else
        return BAIL;
    if (p < e && *p == '.') {
        r.is_int = 0;
        p++;
        if (p >= e || *p < '0' || *p > '9') return BAIL;
        while (p < e && *p >= '0' && *p <= '9') {
            if (r.mant || *p != '0') {
                if (sig < 19) r.mant = r.mant * 10 + (*p - '0');
                else r.big = 1;
                sig++;
            }
            r.exp10--;
            p++;
        }
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        r.is_int = 0;
        p++;
        int eneg = 0;
        if (p < e && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        if (p >= e || *p < '0' || *p > '9') return BAIL;
        int64_t x = 0;
        while (p < e && *p >= '0' && *p <= '9') {
            if (x < 100000) x = x * 10 + (*p - '0');
            p++;
        }
        if (x >= 100000) r.big = 1;
        r.exp10 += eneg ? -x : x;
    }
    r.n = (size_t)(p - r.s);
    c->p = p;
    if (num) *num = r;
    return 0;
}

static int to_int64(const Num *n, int64_t lo, int64_t hi, int64_t *out) {
    if (!n->is_int || n->big) return BAIL;
    int64_t v;
    if (n->neg) {
        if (n->mant > (uint64_t)INT64_MAX + 1) return BAIL;
        v = n->mant == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)n->mant;
    } else {
        if (n->mant > (uint64_t)INT64_MAX) return BAIL;
        v = (int64_t)n->mant;
    }
    if (v < lo || v > hi) return BAIL;
    *out = v;
    return 0;
}

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The number as a double, correctly rounded (as msgspec rounds it). */
static int to_double(const Num *n, double *out, PyThreadState **saved) {
    if (!n->big && n->mant == 0) {
        *out = n->neg ? -0.0 : 0.0;
        return 0;
    }
    if (!n->big && n->mant <= (1ull << 53) && n->exp10 >= -22 && n->exp10 <= 22) {
        /* both operands exact, so one IEEE operation rounds correctly (Clinger's fast path) */
        double d = (double)n->mant;
        d = n->exp10 < 0 ? d / POW10[-n->exp10] : d * POW10[n->exp10];
        *out = n->neg ? -d : d;
        return 0;
    }
    char text[64];
    if (n->n >= sizeof text) return BAIL;
    memcpy(text, n->s, n->n);
    text[n->n] = 0;
    PyEval_RestoreThread(*saved); /* CPython's strtod shares a free list: under the GIL */
    double d = PyOS_string_to_double(text, NULL, NULL);
    int failed = d == -1.0 && PyErr_Occurred();
    if (failed) PyErr_Clear();
    *saved = PyEval_SaveThread();
    if (failed) return BAIL;
    if (!isfinite(d)) return BAIL; /* out of range: left to msgspec */
    *out = d;
    return 0;
}

static int skip_value(Cur *c, int depth);

static int skip_container(Cur *c, int depth, u8 close, int keyed) {
    if (depth > MAX_DEPTH) return BAIL;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 0;
    }
    for (;;) {
        if (keyed) {
            if (c->p >= c->end || *c->p != '"' || scan_string(c, NULL)) return BAIL;
            skip_ws(c);
            if (c->p >= c->end || *c->p != ':') return BAIL;
            c->p++;
            skip_ws(c);
        }
        if (skip_value(c, depth + 1)) return BAIL;
        if (c->end - c->p > 2 && c->p[0] == ',' && c->p[1] == ' ' && !IS_WS[c->p[2]]) { /* Kineto's ", " */
            c->p += 2;
            continue;
        }
        skip_ws(c);
        if (c->p >= c->end) return BAIL;
        if (*c->p == ',') {
            c->p++;
            skip_ws(c);
            continue;
        }
        if (*c->p == close) {
            c->p++;
            return 0;
        }
        return BAIL;
    }
}

static int literal(Cur *c, const char *word, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n)) return BAIL;
    c->p += n;
    return 0;
}

static int skip_value(Cur *c, int depth) {
    if (c->p >= c->end) return BAIL;
    switch (*c->p) {
    case '"': {
        Str s;
        return short_string(c, &s) ? 0 : scan_string(c, NULL);
    }
    case '{': return skip_container(c, depth, '}', 1);
    case '[': return skip_container(c, depth, ']', 0);
    case 't': return literal(c, "true", 4);
    case 'f': return literal(c, "false", 5);
    case 'n': return literal(c, "null", 4);
    default: return skip_number(c);
    }
}

static int read_int(Cur *c, int64_t lo, int64_t hi, int64_t *out) {
    Num n;
    if (c->p >= c->end || !(*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) return BAIL;
    if (scan_number(c, &n)) return BAIL;
    return to_int64(&n, lo, hi, out);
}

static int read_double(Cur *c, double *out) {
    Num n;
    if (c->p >= c->end || !(*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) return BAIL;
    if (scan_number(c, &n)) return BAIL;
    return to_double(&n, out, c->saved);
}

static int is_null(Cur *c) { return c->p < c->end && *c->p == 'n'; }

/* ------------------------------------------------------------------ one event */

typedef struct {
    const u8 *s;
    size_t n; /* 0: absent (a JSON value is never empty) */
} Raw;

enum { R_DIMS, R_TYPES, R_CONCRETE, R_STRIDES, R_COLLECTIVE, R_IN, R_OUT, R_DTYPE, R_GROUP, R_GROUP_DESC,
       R_GROUP_SIZE, R_SEQ, N_RAW };

typedef struct {
    int64_t external_id, correlation, device, stream, registers, shared_memory, nbytes, alloc_bytes, cbid,
        python_id, python_parent, sequence;
    int64_t memory[5]; /* a [memory] event's Total Allocated, Total Reserved, Device Type, Device Id, Addr */
    int64_t grid[3], block[3];
    double occupancy;
    Str kernel_hash;
    uint32_t raw_seen; /* which of raw hold a value: the rest are left unset (see read_event) */
    Raw raw[N_RAW];    /* last, in Args and in Event */
} Args;

#define HAS_RAW(a, i) (((a)->raw_seen >> (i)) & 1u)

typedef struct {
    Str ph, cat, name;
    int pid_is_str, tid_is_str;
    int64_t pid, tid;
    Str pid_s, tid_s;
    double ts, dur;
    Args a;
} Event;
_Static_assert(offsetof(Event, a.raw) + sizeof(Raw) * N_RAW == sizeof(Event), "raw is an Event's last field");

enum { A_EXTERNAL_ID, A_CORRELATION, A_DEVICE, A_STREAM, A_GRID, A_BLOCK, A_REGISTERS, A_SHARED, A_OCCUPANCY,
       A_NBYTES, A_ALLOC, A_CBID, A_PY_ID, A_PY_PARENT, A_SEQUENCE, A_HASH, A_NAME, A_LABELS, A_SORT, A_MEMORY0,
       A_RAW0 = A_MEMORY0 + 5 };

/* Args' JSON names (events.Args), in the order of the enum above, then the raw fields. */
static const char *const ARG_KEYS[] = {
    "External id", "correlation", "device", "stream", "grid", "block", "registers per thread", "shared memory",
    "est. achieved occupancy %", "bytes", "Bytes", "cbid", "Python id", "Python parent id", "Sequence number",
    "kernel_hash", "name", "labels", "sort_index",
    /* a [memory] event's, in Args.memory's order (MEMORY_COLUMNS after row) */
    "Total Allocated", "Total Reserved", "Device Type", "Device Id", "Addr",
    /* raw, in R_ order */
    "Input Dims", "Input type", "Concrete Inputs", "Input Strides", "Collective name", "In msg nelems",
    "Out msg nelems", "dtype", "Process Group Name", "Process Group Description", "Group size", "Seq",
};
#define N_ARG_KEYS ((int)(sizeof ARG_KEYS / sizeof ARG_KEYS[0]))
static size_t ARG_LENS[N_ARG_KEYS];

/* The field a key names, -1 for none: keys of one length are few, so compare those alone. */
static int8_t BY_LENGTH[32][8];

static void index_arg_keys(void) {
    memset(BY_LENGTH, -1, sizeof BY_LENGTH);
    for (int i = 0; i < N_ARG_KEYS; i++) {
        size_t n = ARG_LENS[i] = strlen(ARG_KEYS[i]);
        int k = 0;
        while (BY_LENGTH[n][k] >= 0) k++; /* at most 4 keys share a length today */
        BY_LENGTH[n][k] = (int8_t)i;
    }
}

static inline uint64_t load64(const void *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t load32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* a[0:n] == b[0:n], by words that overlap at the end rather than a call to memcmp per key */
static inline int same_bytes(const u8 *a, const u8 *b, size_t n) {
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8)
            if (load64(a + i) != load64(b + i)) return 0;
        return load64(a + n - 8) == load64(b + n - 8);
    }
    if (n >= 4) return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
    return memcmp(a, b, n) == 0;
}

static int arg_field(const u8 *s, size_t n) {
    if (n >= 32) return -1;
    for (int k = 0; k < 8 && BY_LENGTH[n][k] >= 0; k++) {
        int i = BY_LENGTH[n][k];
        if (same_bytes((const u8 *)ARG_KEYS[i], s, n)) return i;
    }
    return -1;
}

/* Keys foreseen: an object's keys are most often those of the last object of its shape, at the same
   places (Kineto writes each kind of event's fields in one order), so each place remembers the text
   that led to its value last time: from the end of the value before (its ',' and the whitespace
   around it; for the first key, the whitespace after the '{') through the key, its ':' and the
   spaces after. Text that holds those bytes again, with no more whitespace before the value, is
   that member, read as before: taken in one compare, without the walks over whitespace, the search
   for the key's end or the lookup of the field it names. Events' shapes are told apart by their
   "ph", their args' by their "cat" (both come first in Kineto's events). */
#define KEY_TEXT 40 /* the text remembered at a place, at most (Kineto's longest: 37 bytes) */
#define KEY_PLACES 24
#define EVENT_SHAPES 8
#define ARG_SHAPES 16

typedef struct {
    uint8_t len; /* of text; 0: nothing remembered */
    int8_t field;
    u8 text[KEY_TEXT];
} KeyText;

typedef struct {
    KeyText at[KEY_PLACES];
} Shape;

typedef struct {
    Shape events[EVENT_SHAPES], args[ARG_SHAPES];
} Shapes;

typedef struct {
    Buf ph, cat, name, pid, tid, hash, junk;
    Shapes *shapes; /* one scan's own: a key taken as remembered was read in full earlier in the same
                       scan, which is what lets that reading set old_external_id for the scan */
} Scratch;

/* An object's members, as read_args and read_event walk them (next_member): past its '{' and the
   whitespace after, 1 if a member follows (0: it is empty, and past its '}' too); a key, unescaped,
   and its ':'; after a value, 1 if another member follows, 0 if the object ended. */
static int object_first(Cur *c) {
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    return 1;
}

static int object_key(Cur *c, Str *key) {
    if (!short_string(c, key) && (c->p >= c->end || *c->p != '"' || scan_string(c, key) || key->escaped))
        return BAIL;
    skip_ws(c);
    if (c->p >= c->end || *c->p != ':') return BAIL;
    c->p++;
    skip_ws(c);
    return 0;
}

static int object_next(Cur *c) {
    skip_ws(c);
    if (c->p >= c->end) return BAIL;
    if (*c->p == ',') {
        c->p++;
        skip_ws(c);
        return 1;
    }
    if (*c->p == '}') {
        c->p++;
        return 0;
    }
    return BAIL;
}

static int event_field(const u8 *s, size_t n);

/* The object's next member, from c->p: just past its '{' (``first``) or at the end of a value.
   1: a member follows, *field the field its key names (args: arg_field's, else event_field's), c->p
   at its value; 0: the object ended, past its '}'; BAIL. ``k``: what is remembered at the member's
   place (NULL: none), taken if the text holds it, else replaced. */
static inline int next_member(Cur *c, KeyText *k, int first, int args, int *field) {
    const u8 *p = c->p;
    if (k && k->len && (size_t)(c->end - p) > k->len && same_bytes(k->text, p, k->len) && !IS_WS[p[k->len]]) {
        *field = k->field;
        c->p = p + k->len;
        return 1;
    }
    int more = first ? object_first(c) : object_next(c);
    if (more <= 0) return more;
    Str key;
    if (object_key(c, &key)) return BAIL;
    *field = args ? arg_field(key.s, key.n) : event_field(key.s, key.n);
    if (k) {
        size_t len = (size_t)(c->p - p);
        k->len = len <= KEY_TEXT ? (uint8_t)len : 0;
        k->field = (int8_t)*field;
        if (k->len) memcpy(k->text, p, len);
    }
    return 1;
}

static int read_dim3(Cur *c, int64_t out[3]) {
    if (is_null(c)) {
        out[0] = out[1] = out[2] = -1;
        return literal(c, "null", 4);
    }
    if (c->p >= c->end || *c->p != '[') return BAIL;
    c->p++;
    for (int i = 0; i < 3; i++) {
        skip_ws(c);
        if (read_int(c, 0, INT32_MAX, &out[i])) return BAIL;
        skip_ws(c);
        if (c->p >= c->end || *c->p != (i < 2 ? ',' : ']')) return BAIL;
        c->p++;
    }
    return 0;
}

static int read_args(Cur *c, Args *a, Scratch *sc, Shape *shape) {
    uint64_t seen = 0;
    c->p++; /* past the '{' */
    for (int place = 0;; place++) {
        int f, more = next_member(c, place < KEY_PLACES ? &shape->at[place] : NULL, place == 0, 1, &f);
        if (more <= 0) return more; /* 0: the object ended; BAIL */
        if (f >= 0) {
            if (seen & (1ull << f)) return BAIL; /* msgspec keeps the last: left to it */
            seen |= 1ull << f;
        }
        int r = 0;
        switch (f) {
        case A_EXTERNAL_ID: r = read_int(c, INT64_MIN, INT64_MAX, &a->external_id); break;
        case A_CORRELATION: r = read_int(c, INT64_MIN, INT64_MAX, &a->correlation); break;
        case A_DEVICE: r = read_int(c, INT16_MIN, INT16_MAX, &a->device); break;
        case A_STREAM: r = read_int(c, INT64_MIN, INT64_MAX, &a->stream); break;
        case A_GRID: r = read_dim3(c, a->grid); break;
        case A_BLOCK: r = read_dim3(c, a->block); break;
        case A_REGISTERS: r = read_int(c, INT32_MIN, INT32_MAX, &a->registers); break;
        case A_SHARED: r = read_int(c, INT64_MIN, INT64_MAX, &a->shared_memory); break;
        case A_OCCUPANCY: r = read_double(c, &a->occupancy); break;
        case A_NBYTES: r = read_int(c, INT64_MIN, INT64_MAX, &a->nbytes); break;
        case A_ALLOC: r = read_int(c, INT64_MIN, INT64_MAX, &a->alloc_bytes); break;
        case A_CBID: r = read_int(c, INT32_MIN, INT32_MAX, &a->cbid); break;
        case A_PY_ID:
        case A_PY_PARENT: {
            int64_t *v = f == A_PY_ID ? &a->python_id : &a->python_parent;
            if (is_null(c)) {
                *v = -1;
                r = literal(c, "null", 4);
            } else
                r = read_int(c, INT64_MIN, INT64_MAX, v);
            break;
        }
        case A_SEQUENCE: r = read_int(c, INT64_MIN, INT64_MAX, &a->sequence); break;
        case A_HASH: r = read_string(c, &a->kernel_hash, &sc->hash); break;
        case A_NAME:
        case A_LABELS: {
            Str ignored;
            r = read_string(c, &ignored, &sc->junk); /* typed str: read again by msgspec for ph M */
            break;
        }
        case A_SORT: {
            int64_t ignored;
            r = read_int(c, INT64_MIN, INT64_MAX, &ignored);
            break;
        }
        case -1: r = skip_value(c, 2); break;
        case A_MEMORY0:
        case A_MEMORY0 + 1:
        case A_MEMORY0 + 2:
        case A_MEMORY0 + 3:
        case A_MEMORY0 + 4: r = read_int(c, INT64_MIN, INT64_MAX, &a->memory[f - A_MEMORY0]); break;
        default: {
            Raw *raw = &a->raw[f - A_RAW0];
            a->raw_seen |= 1u << (f - A_RAW0);
            raw->s = c->p;
            r = skip_value(c, 2);
            raw->n = (size_t)(c->p - raw->s);
        }
        }
        if (r) return BAIL;
    }
}

enum { E_PH, E_CAT, E_NAME, E_PID, E_TID, E_TS, E_DUR, E_ARGS };

static int event_field(const u8 *s, size_t n) {
    switch (n) {
    case 2:
        if (!memcmp(s, "ph", 2)) return E_PH;
        if (!memcmp(s, "ts", 2)) return E_TS;
        break;
    case 3:
        if (!memcmp(s, "cat", 3)) return E_CAT;
        if (!memcmp(s, "pid", 3)) return E_PID;
        if (!memcmp(s, "tid", 3)) return E_TID;
        if (!memcmp(s, "dur", 3)) return E_DUR;
        break;
    case 4:
        if (!memcmp(s, "name", 4)) return E_NAME;
        if (!memcmp(s, "args", 4)) return E_ARGS;
        break;
    }
    return -1;
}

static int read_id(Cur *c, int *is_str, int64_t *v, Str *s, Buf *scratch) {
    if (c->p < c->end && *c->p == '"') {
        *is_str = 1;
        return read_string(c, s, scratch);
    }
    *is_str = 0;
    return read_int(c, INT64_MIN, INT64_MAX, v);
}

static const u8 EMPTY[1] = {0};

/* An event before its fields are read: copied from one constant up to its raw fields, which
   raw_seen (0 here) says are unset. (Assigned a field at a time, chained, these stores were ~6% of
   a scan, read back before they had landed; copied whole, the copy was ~3%.) */
static const Event NO_EVENT = {
    .ph = {EMPTY, 0, 0}, .cat = {EMPTY, 0, 0}, .name = {EMPTY, 0, 0},
    .pid_is_str = 1, .tid_is_str = 1, /* absent: "" */
    .pid_s = {EMPTY, 0, 0}, .tid_s = {EMPTY, 0, 0},
    .ts = NAN, .dur = 0.0,
    .a = {
        .external_id = -1, .correlation = -1, .device = -1, .stream = -1, .registers = -1, .shared_memory = -1,
        .nbytes = -1, .alloc_bytes = -1, .cbid = -1, .python_id = -1, .python_parent = -1, .sequence = -1,
        .grid = {-1, -1, -1}, .block = {-1, -1, -1}, .memory = {-1, -1, -1, -1, -1}, .occupancy = NAN,
    },
};

static Shape *args_shape(Scratch *sc, const Str *cat) {
    size_t n = cat->n, h = n ? n * 31 + cat->s[0] + cat->s[n - 1] * 7u : 0;
    return &sc->shapes->args[h % ARG_SHAPES];
}

static int read_event(Cur *c, Event *ev, Scratch *sc) {
    unsigned seen = 0;
    memcpy(ev, &NO_EVENT, offsetof(Event, a.raw));
    c->p++; /* past the '{' */
    Shape *shape = &sc->shapes->events[0];
    for (int place = 0;; place++) {
        int f, more = next_member(c, place < KEY_PLACES ? &shape->at[place] : NULL, place == 0, 0, &f);
        if (more <= 0) return more; /* 0: the object ended; BAIL */
        if (f >= 0) {
            if (seen & (1u << f)) return BAIL;
            seen |= 1u << f;
        }
        int r;
        switch (f) {
        case E_PH:
            r = read_string(c, &ev->ph, &sc->ph);
            if (!r && ev->ph.n) shape = &sc->shapes->events[ev->ph.s[0] % EVENT_SHAPES];
            break;
        case E_CAT: r = read_string(c, &ev->cat, &sc->cat); break;
        case E_NAME: r = read_string(c, &ev->name, &sc->name); break;
        case E_PID: r = read_id(c, &ev->pid_is_str, &ev->pid, &ev->pid_s, &sc->pid); break;
        case E_TID: r = read_id(c, &ev->tid_is_str, &ev->tid, &ev->tid_s, &sc->tid); break;
        case E_TS: r = read_double(c, &ev->ts); break;
        case E_DUR: r = read_double(c, &ev->dur); break;
        case E_ARGS:
            if (is_null(c)) r = literal(c, "null", 4);
            else if (c->p < c->end && *c->p == '{') r = read_args(c, &ev->a, sc, args_shape(sc, &ev->cat));
            else r = BAIL;
            break;
        default: r = skip_value(c, 1);
        }
        if (r) return BAIL;
    }
}

/* ------------------------------------------------------------------ columns */

/* Column order and dtypes; decode.py checks them against schema.EVENT_COLUMNS. */
enum { C_KIND, C_LANE, C_NAME, C_TS, C_DUR, C_EXTERNAL_ID, C_CORRELATION, C_DEVICE, C_STREAM, C_REGISTERS,
       C_SHARED, C_BYTES, C_OCCUPANCY, C_GRID_X, C_GRID_Y, C_GRID_Z, C_BLOCK_X, C_BLOCK_Y, C_BLOCK_Z, C_CBID,
       C_PY_ID, C_PY_PARENT, C_SEQUENCE, C_HASH, C_SHAPES_AT, C_SHAPES_LEN, N_COLS };
static const char *const COL_NAMES[N_COLS] = {
    "kind", "lane", "name", "ts", "dur", "external_id", "correlation", "device", "stream", "registers",
    "shared_memory", "bytes", "occupancy", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "cbid",
    "python_id", "python_parent", "sequence", "kernel_hash", "shapes_at", "shapes_len",
};
static const char *const COL_TYPES[N_COLS] = {
    "int8", "int32", "int32", "int64", "int64", "int64", "int64", "int16", "int64", "int32", "int64", "int64",
    "float32", "int32", "int32", "int32", "int32", "int32", "int32", "int32", "int64", "int64", "int64", "int32",
    "int64", "int32",
};
static size_t COL_SIZES[N_COLS];

typedef struct {
    int8_t kind, kept, flow, aside;
    int32_t lane;
} ComboInfo;

/* The combos of recent events with int pid and tid and a short ph and cat, by a hash of those: an
   event's combo found here is compared field by field instead of built into a key and hashed (a key
   of ~50 bytes each event was ~12% of a scan). */
#define MEMO_SLOTS 64
#define MEMO_PH 8
#define MEMO_CAT 32
typedef struct {
    int32_t id; /* -1: empty */
    uint8_t ph_n, cat_n;
    int64_t pid, tid;
    u8 ph[MEMO_PH], cat[MEMO_CAT];
} ComboMemo;

typedef struct {
    Table combos, lanes, names, hashes;
    ComboMemo memo[MEMO_SLOTS];
    PyObject *lane_values, *name_values, *hash_values; /* lists, by id */
    Buf key; /* the current event's combo key */
    ComboInfo *info;
    size_t info_cap;
    PyObject *cols[N_COLS]; /* bytearrays, sized for the most rows the text can hold */
    char *col[N_COLS];
    size_t rows, cap;
    Table shapes; /* its keys are the chunk's record_shapes texts, each once (table_place) */
    Buf comm;
    Buf comm_rows; /* int64 row numbers whose shapes_at points into comm (shifted at the end) */
    Buf aside_spans; /* int64 (start, end) of each metadata or B/E event */
    Buf memory; /* per Kind.MEMORY row, MEMORY_COLUMNS' int64s: the row, then Args.memory */
    PyObject *aside;
    PyObject *classify;
    const u8 *base; /* the text: aside spans are offsets into it */
    int64_t flows, bad_ts, bad_dur;
    Scratch sc;
    PyThreadState *saved; /* while the scan runs without the GIL */
} State;

#define COL(st, i, T) ((T *)(st)->col[i])
#define GIL_ON(st) PyEval_RestoreThread((st)->saved)
#define GIL_OFF(st) ((st)->saved = PyEval_SaveThread())

/* The id of a string in ``t``, its decoded str appended to ``values`` when new. */
static int64_t intern_str(State *st, Table *t, PyObject *values, const Str *s) {
    int added;
    int64_t id = table_id(t, s->s, s->n, &added);
    if (id < 0) return BAIL;
    if (added) {
        GIL_ON(st);
        PyObject *str = PyUnicode_DecodeUTF8((const char *)s->s, (Py_ssize_t)s->n, "strict");
        int failed = !str || PyList_Append(values, str);
        Py_XDECREF(str);
        GIL_OFF(st);
        if (failed) return BAIL;
    }
    return id;
}

/* An event's (ph, cat, pid, tid) as one byte string: each part's length (or the int) then its bytes.
   ``lane_at``: where the (pid, tid) part starts, the key of the event's lane. */
static int combo_key(Buf *key, const Event *ev, size_t *lane_at) {
    key->len = 0;
    const Str *strs[2] = {&ev->ph, &ev->cat};
    for (int i = 0; i < 2; i++) {
        uint64_t n = strs[i]->n;
        if (buf_put(key, &n, 8) || buf_put(key, strs[i]->s, strs[i]->n)) return BAIL;
    }
    *lane_at = key->len;
    const int tags[2] = {ev->pid_is_str, ev->tid_is_str};
    const int64_t ints[2] = {ev->pid, ev->tid};
    const Str *ids[2] = {&ev->pid_s, &ev->tid_s};
    for (int i = 0; i < 2; i++) {
        u8 tag = (u8)tags[i];
        if (buf_put(key, &tag, 1)) return BAIL;
        if (tags[i]) {
            uint64_t n = ids[i]->n;
            if (buf_put(key, &n, 8) || buf_put(key, ids[i]->s, ids[i]->n)) return BAIL;
        } else if (buf_put(key, &ints[i], 8))
            return BAIL;
    }
    return 0;
}

static PyObject *str_of(const Str *s) { return PyUnicode_DecodeUTF8((const char *)s->s, (Py_ssize_t)s->n, "strict"); }

static PyObject *id_object(int is_str, int64_t v, const Str *s) { return is_str ? str_of(s) : PyLong_FromLongLong(v); }

static ComboMemo *memo_slot(State *st, const Event *ev) {
    if (ev->pid_is_str || ev->tid_is_str || ev->ph.n > MEMO_PH || ev->cat.n > MEMO_CAT) return NULL;
    size_t n = ev->cat.n;
    uint64_t h = (uint64_t)ev->pid * 0x9E3779B97F4A7C15ull ^ (uint64_t)ev->tid * 0xC2B2AE3D27D4EB4Full;
    h ^= n * 0x165667B19E3779F9ull ^ (n ? ev->cat.s[0] * 31u + ev->cat.s[n - 1] * 131u : 0) ^
         (ev->ph.n ? ev->ph.s[0] * 7u : 0);
    return &st->memo[(h ^ h >> 29) % MEMO_SLOTS];
}

static int memo_holds(const ComboMemo *m, const Event *ev) {
    return m->id >= 0 && m->pid == ev->pid && m->tid == ev->tid && m->ph_n == ev->ph.n && m->cat_n == ev->cat.n &&
           !memcmp(m->ph, ev->ph.s, ev->ph.n) && !memcmp(m->cat, ev->cat.s, ev->cat.n);
}

/* The event's combo (classified once, by the caller's Python function); its lane assigned at
   its first row. */
static ComboInfo *combo_of(State *st, Event *ev, size_t *lane_at) {
    ComboMemo *m = memo_slot(st, ev);
    if (m && memo_holds(m, ev)) {
        ComboInfo *ci = &st->info[m->id];
        *lane_at = 0;
        if (!ci->kept || ci->lane >= 0) return ci; /* lane_of needs no key */
    }
    if (combo_key(&st->key, ev, lane_at)) return NULL;
    int added;
    int64_t id = table_id(&st->combos, st->key.data, st->key.len, &added);
    if (id < 0) return NULL;
    if (added) {
        if ((size_t)id >= st->info_cap) {
            size_t cap = st->info_cap ? st->info_cap * 2 : 64;
            ComboInfo *info = realloc(st->info, cap * sizeof *info);
            if (!info) {
                out_of_memory = 1;
                return NULL;
            }
            st->info = info;
            st->info_cap = cap;
        }
        GIL_ON(st);
        PyObject *ph = str_of(&ev->ph), *cat = ph ? str_of(&ev->cat) : NULL;
        PyObject *r = cat ? PyObject_CallFunctionObjArgs(st->classify, ph, cat, NULL) : NULL;
        Py_XDECREF(ph);
        Py_XDECREF(cat);
        long code = r ? PyLong_AsLong(r) : -1;
        Py_XDECREF(r);
        int failed = code == -1 && PyErr_Occurred();
        GIL_OFF(st);
        if (failed) return NULL;
        ComboInfo *ci = &st->info[id];
        ci->kind = (int8_t)(code & 0xFF);
        ci->kept = (code >> 8) & 1;
        ci->flow = (code >> 9) & 1;
        ci->aside = (code >> 10) & 1;
        ci->lane = -1;
    }
    if (m) {
        *m = (ComboMemo){.id = (int32_t)id, .ph_n = (uint8_t)ev->ph.n, .cat_n = (uint8_t)ev->cat.n,
                         .pid = ev->pid, .tid = ev->tid};
        memcpy(m->ph, ev->ph.s, ev->ph.n);
        memcpy(m->cat, ev->cat.s, ev->cat.n);
    }
    return &st->info[id];
}

static int lane_of(State *st, ComboInfo *ci, size_t lane_at, Event *ev) {
    if (ci->lane >= 0) return ci->lane;
    int added;
    int64_t id = table_id(&st->lanes, st->key.data + lane_at, st->key.len - lane_at, &added);
    if (id < 0) return BAIL;
    if (added) {
        GIL_ON(st);
        PyObject *pid = id_object(ev->pid_is_str, ev->pid, &ev->pid_s);
        PyObject *tid = pid ? id_object(ev->tid_is_str, ev->tid, &ev->tid_s) : NULL;
        PyObject *pair = tid ? PyTuple_Pack(2, pid, tid) : NULL;
        Py_XDECREF(pid);
        Py_XDECREF(tid);
        int failed = !pair || PyList_Append(st->lane_values, pair);
        Py_XDECREF(pair);
        GIL_OFF(st);
        if (failed) return BAIL;
    }
    ci->lane = (int32_t)id;
    return ci->lane;
}

static int grow(State *st) {
    size_t cap = st->cap * 2;
    int failed = 0;
    GIL_ON(st);
    for (int i = 0; i < N_COLS && !failed; i++) {
        failed = PyByteArray_Resize(st->cols[i], (Py_ssize_t)(cap * COL_SIZES[i])) != 0;
        if (!failed) st->col[i] = PyByteArray_AS_STRING(st->cols[i]);
    }
    GIL_OFF(st);
    if (failed) return BAIL;
    st->cap = cap;
    return 0;
}

static inline int64_t us_to_ns(double us) {
    double whole = floor(us);
    return (int64_t)whole * 1000 + (int64_t)nearbyint((us - whole) * 1000);
}

static int put_raw(Buf *b, const char *key, const Raw *r) {
    return buf_put(b, key, strlen(key)) || buf_put(b, r->s, r->n);
}

/* record_shapes as decode._shapes writes it: {"dims":D,"types":T[,"concrete":C][,"strides":S]} */
static int put_shapes(State *st, size_t row, const Args *a) {
    const Raw *r = a->raw;
    Buf *b = &st->shapes.keys;
    size_t at = b->len;
    static const Raw no_types = {(const u8 *)"[]", 2};
    if (put_raw(b, "{\"dims\":", &r[R_DIMS])) return BAIL;
    if (put_raw(b, ",\"types\":", HAS_RAW(a, R_TYPES) ? &r[R_TYPES] : &no_types)) return BAIL;
    if (HAS_RAW(a, R_CONCRETE) && put_raw(b, ",\"concrete\":", &r[R_CONCRETE])) return BAIL;
    if (HAS_RAW(a, R_STRIDES) && put_raw(b, ",\"strides\":", &r[R_STRIDES])) return BAIL;
    if (buf_put(b, "}", 1)) return BAIL;
    size_t len = b->len - at;
    int64_t placed = table_place(&st->shapes, at);
    if (placed < 0) return BAIL;
    COL(st, C_SHAPES_AT, int64_t)[row] = placed;
    COL(st, C_SHAPES_LEN, int32_t)[row] = (int32_t)len;
    return 0;
}

/* A collective kernel's record as decode._collectives writes it: {"comm":{"collective":..,...}} */
static int put_comm(State *st, size_t row, const Args *a) {
    static const struct { const char *key; int raw; } KEYS[] = {
        {"\"collective\":", R_COLLECTIVE}, {"\"in_nelems\":", R_IN}, {"\"out_nelems\":", R_OUT},
        {"\"dtype\":", R_DTYPE}, {"\"group\":", R_GROUP}, {"\"group_desc\":", R_GROUP_DESC},
        {"\"group_size\":", R_GROUP_SIZE}, {"\"seq\":", R_SEQ},
    };
    size_t at = st->comm.len;
    int first = 1;
    if (buf_put(&st->comm, "{\"comm\":{", 9)) return BAIL;
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++) {
        const Raw *r = &a->raw[KEYS[i].raw];
        if (!HAS_RAW(a, KEYS[i].raw)) continue;
        if (!first && buf_put(&st->comm, ",", 1)) return BAIL;
        first = 0;
        if (put_raw(&st->comm, KEYS[i].key, r)) return BAIL;
    }
    if (buf_put(&st->comm, "}}", 2)) return BAIL;
    int64_t r64 = (int64_t)row;
    if (buf_put(&st->comm_rows, &r64, sizeof r64)) return BAIL;
    COL(st, C_SHAPES_AT, int64_t)[row] = (int64_t)at;
    COL(st, C_SHAPES_LEN, int32_t)[row] = (int32_t)(st->comm.len - at);
    return 0;
}

static int emit(State *st, Event *ev, const u8 *start, const u8 *end) {
    size_t lane_at;
    ComboInfo *ci = combo_of(st, ev, &lane_at);
    if (!ci) return BAIL;
    if (ci->flow) st->flows++;
    if (ci->aside) { /* metadata and B/E halves: few, decoded again by msgspec from their span */
        int64_t span[2] = {start - st->base, end - st->base};
        if (buf_put(&st->aside_spans, span, sizeof span)) return BAIL;
    }
    if (!ci->kept) return 0;
    double dur = ev->dur;
    if (!(dur >= 0 && dur <= MAX_US)) {
        st->bad_dur++;
        dur = 0.0;
    }
    if (!(fabs(ev->ts) <= MAX_US)) {
        st->bad_ts++;
        return 0;
    }
    size_t row = st->rows;
    if (row >= st->cap && grow(st)) return BAIL;
    int lane = lane_of(st, ci, lane_at, ev);
    int64_t name = lane < 0 ? BAIL : intern_str(st, &st->names, st->name_values, &ev->name);
    if (name < 0) return BAIL;
    const Args *a = &ev->a;
    int kind = ci->kind;
    int gpu = kind <= K_MEMSET;
    COL(st, C_KIND, int8_t)[row] = (int8_t)kind;
    COL(st, C_LANE, int32_t)[row] = lane;
    COL(st, C_NAME, int32_t)[row] = (int32_t)name;
    COL(st, C_TS, int64_t)[row] = us_to_ns(ev->ts);
    COL(st, C_DUR, int64_t)[row] = us_to_ns(dur);
    COL(st, C_EXTERNAL_ID, int64_t)[row] = a->external_id;
    COL(st, C_CORRELATION, int64_t)[row] = a->correlation;
    COL(st, C_DEVICE, int16_t)[row] = (int16_t)(gpu ? a->device : -1);
    COL(st, C_STREAM, int64_t)[row] = gpu ? a->stream : -1;
    COL(st, C_REGISTERS, int32_t)[row] = (int32_t)(gpu ? a->registers : -1);
    COL(st, C_SHARED, int64_t)[row] = gpu ? a->shared_memory : -1;
    COL(st, C_BYTES, int64_t)[row] = gpu ? a->nbytes : kind == K_MEMORY ? a->alloc_bytes : -1;
    double occupancy = a->occupancy;
    COL(st, C_OCCUPANCY, float)[row] = gpu && occupancy >= 0 && occupancy <= 100 ? (float)occupancy : NAN;
    for (int i = 0; i < 3; i++) {
        COL(st, C_GRID_X + i, int32_t)[row] = (int32_t)(gpu ? a->grid[i] : -1);
        COL(st, C_BLOCK_X + i, int32_t)[row] = (int32_t)(gpu ? a->block[i] : -1);
    }
    COL(st, C_CBID, int32_t)[row] = (int32_t)(kind == K_RUNTIME || kind == K_DRIVER ? a->cbid : -1);
    COL(st, C_PY_ID, int64_t)[row] = kind == K_PYTHON ? a->python_id : -1;
    COL(st, C_PY_PARENT, int64_t)[row] = kind == K_PYTHON ? a->python_parent : -1;
    COL(st, C_SEQUENCE, int64_t)[row] = kind == K_CPU_OP ? a->sequence : -1;
    int64_t hash = -1;
    if (kind == K_CPU_OP && a->kernel_hash.n) {
        hash = intern_str(st, &st->hashes, st->hash_values, &a->kernel_hash);
        if (hash < 0) return BAIL;
    }
    COL(st, C_HASH, int32_t)[row] = (int32_t)hash;
    COL(st, C_SHAPES_AT, int64_t)[row] = -1;
    COL(st, C_SHAPES_LEN, int32_t)[row] = 0;
    if (kind == K_CPU_OP && HAS_RAW(a, R_DIMS) && put_shapes(st, row, a)) return BAIL;
    if (gpu && HAS_RAW(a, R_COLLECTIVE) && put_comm(st, row, a)) return BAIL;
    if (kind == K_MEMORY) {
        int64_t entry[6] = {(int64_t)row, a->memory[0], a->memory[1], a->memory[2], a->memory[3], a->memory[4]};
        if (buf_put(&st->memory, entry, sizeof entry)) return BAIL;
    }
    st->rows++;
    return 0;
}

/* ------------------------------------------------------------------ the module */

/* A bytearray of a scan before, to write this one's column into (its pages are already the process's: a
   fresh column costs its page faults, ~0.25 CPU-s a GB of trace): only if nothing views it still (grow's
   resize would fail) and it holds ``size`` bytes, half this chunk's guess of its rows: a chunk's text is
   a few hundred bytes longer or shorter than the last's (what is carried over), and the guess allows
   2-3x Kineto's rows (grow doubles the room if a chunk needs more) */
static int reusable(PyObject *b, size_t size) {
    return b && PyByteArray_CheckExact(b) && ((PyByteArrayObject *)b)->ob_exports == 0 &&
           (size_t)PyByteArray_GET_SIZE(b) >= size;
}

static int state_init(State *st, size_t text_bytes, PyObject *classify, PyObject *outputs) {
    memset(st, 0, sizeof *st);
    st->classify = classify;
    for (size_t i = 0; i < MEMO_SLOTS; i++) st->memo[i].id = -1;
    /* rows for events of a typical size (Kineto's are 200-600 bytes), grown if there are more:
       sized for the shortest possible event instead, the columns' first and last pages alone
       would cost ~40 MB of huge pages a chunk */
    st->cap = text_bytes / 160 + 64;
    Table *tables[] = {&st->combos, &st->lanes, &st->names, &st->hashes, &st->shapes};
    for (size_t i = 0; i < 5; i++)
        if (table_init(tables[i])) return BAIL;
    if (!(st->lane_values = PyList_New(0)) ||
        !(st->name_values = PyList_New(0)) || !(st->hash_values = PyList_New(0)) || !(st->aside = PyList_New(0)))
        return BAIL;
    if (!(st->sc.shapes = calloc(1, sizeof(Shapes)))) {
        out_of_memory = 1;
        return BAIL;
    }
    /* all of them reused, or none: the rows are the smallest room among them (grow doubles it, every
       column at once, if the chunk needs more) */
    int reuse = outputs && PyList_CheckExact(outputs) && PyList_GET_SIZE(outputs) == N_COLS;
    size_t room = SIZE_MAX;
    for (int i = 0; reuse && i < N_COLS; i++) {
        PyObject *old = PyList_GET_ITEM(outputs, i);
        reuse = reusable(old, COL_SIZES[i] * (st->cap / 2 + 1));
        if (reuse && (size_t)PyByteArray_GET_SIZE(old) / COL_SIZES[i] < room)
            room = (size_t)PyByteArray_GET_SIZE(old) / COL_SIZES[i];
    }
    if (reuse) st->cap = room;
    for (int i = 0; i < N_COLS; i++) {
        if (reuse) {
            st->cols[i] = PyList_GET_ITEM(outputs, i);
            Py_INCREF(st->cols[i]);
        } else if (!(st->cols[i] = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(st->cap * COL_SIZES[i]))))
            return BAIL;
        st->col[i] = PyByteArray_AS_STRING(st->cols[i]);
    }
    return 0;
}

static void state_free(State *st) {
    Table *tables[] = {&st->combos, &st->lanes, &st->names, &st->hashes, &st->shapes};
    for (size_t i = 0; i < 5; i++) table_free(tables[i]);
    free(st->key.data);
    Py_XDECREF(st->lane_values);
    Py_XDECREF(st->name_values);
    Py_XDECREF(st->hash_values);
    Py_XDECREF(st->aside);
    for (int i = 0; i < N_COLS; i++) Py_XDECREF(st->cols[i]);
    free(st->info);
    free(st->comm.data);
    free(st->comm_rows.data);
    free(st->aside_spans.data);
    free(st->memory.data);
    Buf *bufs[] = {&st->sc.ph, &st->sc.cat, &st->sc.name, &st->sc.pid, &st->sc.tid, &st->sc.hash, &st->sc.junk};
    for (size_t i = 0; i < 7; i++) free(bufs[i]->data);
    free(st->sc.shapes);
}

/* A JSON array of events; ``bare``: its elements alone, without the brackets (a chunk cut from a
   file's array, scanned where it lies instead of copied between brackets). */
static int scan_array(State *st, const u8 *text, size_t n, int bare) {
    Cur c = {text, text + n, &st->saved};
    Event ev;
    skip_ws(&c);
    if (!bare) {
        if (c.p >= c.end || *c.p != '[') return BAIL;
        c.p++;
        skip_ws(&c);
    }
    if (bare && c.p == c.end) {
    } else if (!bare && c.p < c.end && *c.p == ']')
        c.p++;
    else
        for (;;) {
            if (c.p >= c.end || *c.p != '{') return BAIL;
            const u8 *start = c.p;
            if (read_event(&c, &ev, &st->sc)) return BAIL;
            if (emit(st, &ev, start, c.p)) return BAIL;
            skip_ws(&c);
            if (bare && c.p == c.end) break;
            if (c.p >= c.end) return BAIL;
            if (*c.p == ',') {
                c.p++;
                skip_ws(&c);
                continue;
            }
            if (bare || *c.p != ']') return BAIL;
            c.p++;
            break;
        }
    skip_ws(&c);
    return c.p == c.end ? 0 : BAIL;
}

static PyObject *result_of(State *st) {
    int64_t *at = COL(st, C_SHAPES_AT, int64_t);
    const int64_t *rows = (const int64_t *)st->comm_rows.data;
    const Buf *shapes = &st->shapes.keys;
    for (size_t i = 0; i < st->comm_rows.len / sizeof(int64_t); i++) at[rows[i]] += (int64_t)shapes->len;
    const int64_t *spans = (const int64_t *)st->aside_spans.data;
    for (size_t i = 0; i < st->aside_spans.len / sizeof(int64_t); i += 2) {
        PyObject *span = Py_BuildValue("(LL)", (long long)spans[i], (long long)spans[i + 1]);
        int failed = !span || PyList_Append(st->aside, span);
        Py_XDECREF(span);
        if (failed) return NULL;
    }
    PyObject *columns = PyList_New(N_COLS);
    if (!columns) return NULL;
    /* each column as long as it was made (rows, the last item, says how much of it is the chunk's): a
       shrink would hand its pages back, and the next scan, given it to write into, would fault them in again */
    for (int i = 0; i < N_COLS; i++) {
        PyList_SET_ITEM(columns, i, st->cols[i]);
        st->cols[i] = NULL;
    }
    PyObject *blob = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(shapes->len + st->comm.len));
    if (!blob) {
        Py_DECREF(columns);
        return NULL;
    }
    if (shapes->len) memcpy(PyBytes_AS_STRING(blob), shapes->data, shapes->len);
    if (st->comm.len) memcpy(PyBytes_AS_STRING(blob) + shapes->len, st->comm.data, st->comm.len);
    PyObject *memory = PyBytes_FromStringAndSize(st->memory.data ? st->memory.data : "", (Py_ssize_t)st->memory.len);
    if (!memory) {
        Py_DECREF(columns);
        Py_DECREF(blob);
        return NULL;
    }
    return Py_BuildValue("(NOOOONLLLNn)", columns, st->name_values, st->hash_values, st->lane_values, st->aside,
                         blob, (long long)st->flows, (long long)st->bad_ts, (long long)st->bad_dur, memory,
                         (Py_ssize_t)st->rows);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *classify, *outputs = NULL, *result = NULL;
    int bare = 0;
    if (!PyArg_ParseTuple(args, "y*O|pO", &view, &classify, &bare, &outputs)) return NULL;
    const u8 *text = view.buf;
    size_t n = (size_t)view.len;
    State st;
    out_of_memory = old_external_id = 0;
    int ok = state_init(&st, n, classify, outputs) == 0;
    if (ok) {
        st.base = text;
        GIL_OFF(&st);
        ok = scan_array(&st, text, n, bare) == 0;
        GIL_ON(&st);
        /* torch < 1.13 spelled "External id" so: decode_events rewrites it, the Python path's to do */
        ok = ok && !old_external_id;
    }
    if (ok && !out_of_memory) result = result_of(&st);
    state_free(&st);
    PyBuffer_Release(&view);
    if (out_of_memory) {
        Py_XDECREF(result);
        return PyErr_NoMemory();
    }
    if (!result) {
        /* a str that is not UTF-8 cannot pass scan_string; anything else raised (memory, or
           classify itself) is an error, not a trace to hand to the Python path */
        if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return result;
}

/* The first "]" in [q, e) whose byte before (at or after lo) may be a newline, space or tab: where a
   line of only an indent and "]" can start (the caller checks; a few others come back too). Inside
   Kineto's events "]" follows "]", "[" or a digit, so 32 bytes are ruled out at a time, not each "]"
   one by one (memchr stopped ~12M times a GB). */
#if defined(__SSE2__)
/* Which of the sixteen bytes at q are a "]" after a byte of at most ' ' as a signed byte: newline,
   space and tab, and a few bytes more (other controls, non-ASCII) whose "]" the caller rules out. */
static inline unsigned closes_after_blank(const u8 *q) {
    const __m128i close = _mm_set1_epi8(']'), above = _mm_set1_epi8(' ' + 1);
    __m128i v = _mm_loadu_si128((const __m128i *)q), before = _mm_loadu_si128((const __m128i *)(q - 1));
    return (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(v, close), _mm_cmplt_epi8(before, above)));
}
#endif

static const u8 *line_start_close(const u8 *q, const u8 *e, const u8 *lo) {
    if (q < e && q == lo) q++; /* no byte before it to look at */
#if defined(__SSE2__)
    for (; e - q >= 32; q += 32) {
        unsigned hits = closes_after_blank(q) | closes_after_blank(q + 16) << 16;
        if (hits) return q + __builtin_ctz(hits);
    }
#endif
    for (; q < e; q++)
        if (*q == ']' && (q[-1] == '\n' || q[-1] == ' ' || q[-1] == '\t')) return q;
    return NULL;
}

/* array_end(text, start, max_indent): the first "\n", then at most max_indent spaces or tabs, then
   "]", at or after start, as (its start, its end); None if there is none. The loader's regex
   rb"\n[ \t]{0,N}\]", run by memchr over the newlines instead of a pattern match at each. */
static PyObject *array_end(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, max_indent;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &max_indent)) return NULL;
    const u8 *text = view.buf, *e = text + view.len;
    const u8 *p = text + (start < 0 ? 0 : start > view.len ? view.len : start);
    Py_ssize_t found = -1, after = -1;
    Py_ssize_t lo = p - text;
    Py_BEGIN_ALLOW_THREADS
    const u8 *q = p;
    while ((q = line_start_close(q, e, text + lo)) != NULL) {
        /* from the "]" back over the indent to a newline */
        Py_ssize_t at = q - text, nl = at - 1;
        while (nl >= lo && at - nl - 1 <= max_indent && (text[nl] == ' ' || text[nl] == '\t')) nl--;
        if (nl >= lo && text[nl] == '\n' && at - nl - 1 <= max_indent) {
            found = nl;
            after = at + 1;
            break;
        }
        q++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (found < 0) Py_RETURN_NONE;
    return Py_BuildValue("(nn)", found, after);
}

/* text_classes(blob, at, length): each text blob[at[i]:at[i] + length[i]] (b"" where at[i] < 0) numbered
   by first appearance, equal texts alike (the ops' record_shapes, grouped without a bytes object each), as
   (the numbers: int64 bytes, the first text of each: int64 bytes). at and length: int64 buffers. */
static PyObject *text_classes(PyObject *self, PyObject *args) {
    Py_buffer blob, at_view, len_view;
    if (!PyArg_ParseTuple(args, "y*y*y*", &blob, &at_view, &len_view)) return NULL;
    PyObject *classes = NULL, *firsts = NULL, *result = NULL;
    Py_ssize_t n = at_view.len / (Py_ssize_t)sizeof(int64_t);
    if (len_view.len != at_view.len) {
        PyErr_SetString(PyExc_ValueError, "at and length differ in size");
        goto done;
    }
    classes = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    firsts = classes ? PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t)) : NULL;
    if (!firsts) goto done;
    const int64_t *at = at_view.buf, *length = len_view.buf;
    int64_t *out = (int64_t *)PyByteArray_AS_STRING(classes), *first = (int64_t *)PyByteArray_AS_STRING(firsts);
    Py_ssize_t distinct = 0, bad = -1;
    Table t;
    out_of_memory = 0;
    if (table_init(&t)) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t a = at[i], size = a < 0 ? 0 : length[i];
        if (a < 0) a = 0;
        if (size < 0 || a > blob.len || size > blob.len - a) {
            bad = i;
            break;
        }
        int added;
        int64_t id = table_id(&t, (const u8 *)blob.buf + a, (size_t)size, &added);
        if (id < 0) {
            out_of_memory = 1; /* its keys could not grow (a text over 4 GB is no record either) */
            break;
        }
        if (added) first[distinct++] = i;
        out[i] = id;
    }
    Py_END_ALLOW_THREADS
    table_free(&t);
    if (bad >= 0)
        PyErr_Format(PyExc_ValueError, "text %zd lies outside the blob", bad);
    else if (out_of_memory)
        PyErr_NoMemory();
    else if (!PyByteArray_Resize(firsts, distinct * (Py_ssize_t)sizeof(int64_t)))
        result = Py_BuildValue("(OO)", classes, firsts);
done:
    Py_XDECREF(classes);
    Py_XDECREF(firsts);
    PyBuffer_Release(&blob);
    PyBuffer_Release(&at_view);
    PyBuffer_Release(&len_view);
    return result;
}

/* A buffer of native-order int64s (numpy formats int64 as "l", a C long long is "q"). */
static int is_int64(const Py_buffer *b) {
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    return b->itemsize == 8 && (!strcmp(f, "q") || !strcmp(f, "l"));
}

/* search_ascending(a, v, right): np.searchsorted(a, v, "right" if right else "left") for int64 ``a`` and
   ``v`` both ascending, by one merge pass: numpy searches each key afresh (from the last key's place, still a
   binary search: 25-50 ms a million keys). int64 bytes, or None where ``v`` is not ascending or either
   buffer is not 8-byte aligned (a view at an odd offset: numpy's search reads it instead). */
static PyObject *search_ascending(PyObject *self, PyObject *args) {
    PyObject *a_obj, *v_obj;
    Py_buffer a = {0}, v = {0};
    int right;
    if (!PyArg_ParseTuple(args, "OOp", &a_obj, &v_obj, &right)) return NULL;
    if (PyObject_GetBuffer(a_obj, &a, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS)) return NULL;
    if (PyObject_GetBuffer(v_obj, &v, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS)) {
        PyBuffer_Release(&a);
        return NULL;
    }
    PyObject *out = NULL;
    if (!is_int64(&a) || !is_int64(&v)) {
        PyErr_SetString(PyExc_ValueError, "search_ascending: int64 arrays");
        goto done;
    }
    if (((uintptr_t)a.buf | (uintptr_t)v.buf) % _Alignof(int64_t)) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    Py_ssize_t n = a.len / 8, m = v.len / 8;
    out = PyByteArray_FromStringAndSize(NULL, m * 8);
    if (!out) goto done;
    const int64_t *hay = a.buf, *keys = v.buf;
    int64_t *at = (int64_t *)PyByteArray_AS_STRING(out);
    int ascending = 1;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        int64_t key = keys[i];
        if (i && key < keys[i - 1]) {
            ascending = 0;
            break;
        }
        if (right)
            while (j < n && hay[j] <= key) j++;
        else
            while (j < n && hay[j] < key) j++;
        at[i] = j;
    }
    Py_END_ALLOW_THREADS
    if (!ascending) {
        Py_DECREF(out);
        out = Py_None;
        Py_INCREF(out);
    }
done:
    PyBuffer_Release(&a);
    PyBuffer_Release(&v);
    return out;
}

static PyMethodDef METHODS[] = {
    {"text_classes", text_classes, METH_VARARGS,
     "text_classes(blob, at, length) -> (classes, firsts): int64 bytes, equal texts numbered alike"},
    {"array_end", array_end, METH_VARARGS, "array_end(text, start, max_indent) -> (start, end) or None"},
    {"search_ascending", search_ascending, METH_VARARGS,
     "search_ascending(a, v, right) -> np.searchsorted's positions as int64 bytes for ascending int64 a and v, "
     "or None where v is not ascending"},
    {"scan", scan, METH_VARARGS,
     "scan(array_json, classify, bare=False, outputs=None) -> (columns, names, hashes, lanes, aside, blob, flows, "
     "bad_ts, bad_dur, memory, rows) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, METHODS};

PyMODINIT_FUNC PyInit__scan(void) {
    index_arg_keys();
    index_bytes();
    for (int i = 0; i < N_COLS; i++) {
        const char *t = COL_TYPES[i];
        COL_SIZES[i] = !strcmp(t, "int8") ? 1 : !strcmp(t, "int16") ? 2 : !strcmp(t, "int64") ? 8 : 4;
    }
    PyObject *m = PyModule_Create(&MODULE);
    if (!m) return NULL;
    PyObject *columns = PyTuple_New(N_COLS);
    for (int i = 0; columns && i < N_COLS; i++) {
        PyObject *pair = Py_BuildValue("(ss)", COL_NAMES[i], COL_TYPES[i]);
        if (!pair) Py_CLEAR(columns);
        else PyTuple_SET_ITEM(columns, i, pair);
    }
    if (!columns || PyModule_AddObject(m, "COLUMNS", columns)) {
        Py_XDECREF(columns);
        Py_DECREF(m);
        return NULL;
    }
    /* the memory bytes: per Kind.MEMORY row, these int64s (schema.MEMORY_COLUMNS, checked by scanner.py) */
    PyObject *memory = Py_BuildValue("((ss)(ss)(ss)(ss)(ss)(ss))", "row", "int64", "allocated", "int64", "reserved",
                                     "int64", "device_type", "int64", "device_id", "int64", "addr", "int64");
    if (!memory || PyModule_AddObject(m, "MEMORY_COLUMNS", memory)) {
        Py_XDECREF(memory);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "VERSION", 3); /* 3: scan's rows, and columns to reuse */
    return m;
}
