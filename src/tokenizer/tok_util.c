/* Small containers of the tokenizer: byte buffers, hash maps, piece lists, UTF-8, GPT-2 bytes. */
#include "tokenizer/tok_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

tcq_status tok_buf_put(tok_buf *b, const void *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory (%zu bytes)", cap);
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;   /* always NUL-terminated, so text buffers can go to C string APIs */
    return TCQ_OK;
}

tcq_status tok_buf_puts(tok_buf *b, const char *s) { return tok_buf_put(b, s, strlen(s)); }

void tok_buf_free(tok_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static uint32_t hash_bytes(const char *s, uint32_t n)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (uint32_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h ^ (h >> 15);
}

static uint32_t pow2_for(uint32_t expected)
{
    uint32_t cap = 16;
    while (cap < expected * 2u + 16u) cap *= 2;
    return cap;
}

tcq_status tok_strmap_init(tok_strmap *m, uint32_t expected)
{
    memset(m, 0, sizeof *m);
    uint32_t cap = pow2_for(expected);
    m->keys = calloc(cap, sizeof *m->keys);
    m->lens = calloc(cap, sizeof *m->lens);
    m->vals = calloc(cap, sizeof *m->vals);
    if (!m->keys || !m->lens || !m->vals) {
        tok_strmap_free(m);
        return tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory (vocabulary map)");
    }
    m->mask = cap - 1;
    return TCQ_OK;
}

static tcq_status strmap_grow(tok_strmap *m)
{
    tok_strmap n;
    TCQ_TRY(tok_strmap_init(&n, (m->mask + 1)));
    for (uint32_t i = 0; i <= m->mask; i++)
        if (m->keys[i]) tok_strmap_put(&n, m->keys[i], m->lens[i], m->vals[i]);
    tok_strmap_free(m);
    *m = n;
    return TCQ_OK;
}

tcq_status tok_strmap_put(tok_strmap *m, const char *key, uint32_t len, int32_t val)
{
    if ((m->count + 1) * 2 > m->mask + 1) TCQ_TRY(strmap_grow(m));
    uint32_t i = hash_bytes(key, len) & m->mask;
    while (m->keys[i]) {
        if (m->lens[i] == len && memcmp(m->keys[i], key, len) == 0) {
            m->vals[i] = val;
            return TCQ_OK;
        }
        i = (i + 1) & m->mask;
    }
    m->keys[i] = key;
    m->lens[i] = len;
    m->vals[i] = val;
    m->count++;
    return TCQ_OK;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, uint32_t len)
{
    if (!m->keys) return -1;
    uint32_t i = hash_bytes(key, len) & m->mask;
    while (m->keys[i]) {
        if (m->lens[i] == len && memcmp(m->keys[i], key, len) == 0) return m->vals[i];
        i = (i + 1) & m->mask;
    }
    return -1;
}

void tok_strmap_free(tok_strmap *m)
{
    free(m->keys);
    free(m->lens);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static uint32_t hash_pair(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

tcq_status tok_pairmap_init(tok_pairmap *m, uint32_t expected)
{
    memset(m, 0, sizeof *m);
    uint32_t cap = pow2_for(expected);
    m->keys = calloc(cap, sizeof *m->keys);
    m->rank = calloc(cap, sizeof *m->rank);
    m->merged = calloc(cap, sizeof *m->merged);
    if (!m->keys || !m->rank || !m->merged) {
        tok_pairmap_free(m);
        return tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory (merge map)");
    }
    m->mask = cap - 1;
    return TCQ_OK;
}

tcq_status tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged)
{
    if ((m->count + 1) * 2 > m->mask + 1) {
        tok_pairmap n;
        TCQ_TRY(tok_pairmap_init(&n, m->mask + 1));
        for (uint32_t i = 0; i <= m->mask; i++)
            if (m->keys[i]) {
                uint64_t k = m->keys[i] - 1;
                tok_pairmap_put(&n, (int32_t)(k >> 32), (int32_t)(uint32_t)k, m->rank[i], m->merged[i]);
            }
        tok_pairmap_free(m);
        *m = n;
    }
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint32_t i = hash_pair(key) & m->mask;
    while (m->keys[i]) {
        if (m->keys[i] == key) return TCQ_OK;   /* the first (lowest rank) occurrence wins */
        i = (i + 1) & m->mask;
    }
    m->keys[i] = key;
    m->rank[i] = rank;
    m->merged[i] = merged;
    m->count++;
    return TCQ_OK;
}

int tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged)
{
    if (!m->keys) return 0;
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint32_t i = hash_pair(key) & m->mask;
    while (m->keys[i]) {
        if (m->keys[i] == key) {
            *rank = m->rank[i];
            *merged = m->merged[i];
            return 1;
        }
        i = (i + 1) & m->mask;
    }
    return 0;
}

void tok_pairmap_free(tok_pairmap *m)
{
    free(m->keys);
    free(m->rank);
    free(m->merged);
    memset(m, 0, sizeof *m);
}

tcq_status tok_pieces_add(tok_pieces *p, const char *s, size_t len)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        size_t *st = realloc(p->start, cap * sizeof *st);
        if (!st) return tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory");
        p->start = st;
        size_t *ln = realloc(p->len, cap * sizeof *ln);
        if (!ln) return tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory");
        p->len = ln;
        p->cap = cap;
    }
    p->start[p->n] = p->text.n;
    p->len[p->n] = len;
    TCQ_TRY(tok_buf_put(&p->text, s, len));
    p->n++;
    return TCQ_OK;
}

void tok_pieces_free(tok_pieces *p)
{
    tok_buf_free(&p->text);
    free(p->start);
    free(p->len);
    memset(p, 0, sizeof *p);
}

size_t tok_utf8_put(char *o, uint32_t cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 63));
        o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63));
    o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes are
 * written as U+0100 + n in byte order. */
static int byte_printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174); }

uint32_t tok_byte_to_cp(uint8_t b)
{
    if (byte_printable(b)) return b;
    /* the unprintable bytes are 0..32, 127..160 and 173, numbered in that order */
    return 256u + (b <= 32 ? b : b <= 160 ? 33u + (b - 127u) : 67u);
}

int tok_cp_to_byte(uint32_t cp)
{
    if (cp < 256) return byte_printable((int)cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    uint32_t n = cp - 256;
    return n < 33 ? (int)n : n < 67 ? (int)(127 + n - 33) : 173;
}

tcq_status tok_read_file(const char *path, char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tcq_fail(TCQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    tok_buf b = {0};
    char chunk[65536];
    size_t n;
    tcq_status s = TCQ_OK;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if ((s = tok_buf_put(&b, chunk, n)) != TCQ_OK) break;
    if (s == TCQ_OK && ferror(f)) s = tcq_fail(TCQ_ERR_IO, "%s: read error", path);
    fclose(f);
    if (s == TCQ_OK && !b.p) s = tok_buf_put(&b, "", 0);
    if (s != TCQ_OK) {
        tok_buf_free(&b);
        return s;
    }
    *data = b.p;
    if (len) *len = b.n;
    return TCQ_OK;
}
