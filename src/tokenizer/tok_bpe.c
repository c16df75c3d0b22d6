/* BPE merging of one word: a linked list of symbols and a min-heap of candidate merges, so a word
 * of n characters costs O(n log n).  Two priority rules share the engine:
 *   tokenizer.json: the pair with the lowest merge rank (tokenizers' BPE);
 *   llama2.c:       the pair whose concatenation is in the vocabulary with the highest score.
 * Ties go to the leftmost pair in both, as in the originals. */
#include "tokenizer/tok_internal.h"

#include <string.h>

typedef struct sym {
    int32_t id;
    int prev, next;             /* -1 at the ends */
    int alive;
    int64_t cp;                 /* code point of an initial character symbol, -1 for byte/unk */
} sym;

typedef struct cand {
    double prio;                /* lower merges first */
    int left, right;            /* symbol indices */
    int32_t idl, idr, merged;   /* ids when pushed: a stale candidate no longer matches */
} cand;

typedef struct heap {
    cand *c;
    size_t n, cap;
} heap;

static int cand_less(const cand *a, const cand *b)
{
    return a->prio < b->prio || (a->prio == b->prio && a->left < b->left);
}

static tcq_status heap_push(heap *h, cand c)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 32;
        cand *p = realloc(h->c, cap * sizeof *p);
        if (!p) return tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory");
        h->c = p;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!cand_less(&c, &h->c[up])) break;
        h->c[i] = h->c[up];
        i = up;
    }
    h->c[i] = c;
    return TCQ_OK;
}

static cand heap_pop(heap *h)
{
    cand top = h->c[0], last = h->c[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const cand *best = &last;
        if (l < h->n && cand_less(&h->c[l], best)) { m = l; best = &h->c[l]; }
        if (r < h->n && cand_less(&h->c[r], best)) { m = r; }
        if (m == i) break;
        h->c[i] = h->c[m];
        i = m;
    }
    if (h->n) h->c[i] = last;
    return top;
}

/* The merge of ids a, b if there is one: its priority and id. */
static int pair_merge(const tcq_tokenizer *t, int32_t a, int32_t b, tok_buf *tmp, double *prio, int32_t *merged)
{
    if (t->kind == TOK_KIND_HF) {
        int32_t rank;
        if (!tok_pairmap_get(&t->merges, a, b, &rank, merged)) return 0;
        *prio = rank;
        return 1;
    }
    /* llama2.c concatenates the two vocabulary strings, byte tokens included */
    tmp->n = 0;
    if (tok_buf_put(tmp, t->pieces[a], t->piece_len[a]) != TCQ_OK ||
        tok_buf_put(tmp, t->pieces[b], t->piece_len[b]) != TCQ_OK)
        return 0;
    int32_t id = tok_strmap_get(&t->vocab, tmp->p, (uint32_t)tmp->n);
    if (id < 0) return 0;
    *prio = -(double)t->scores[id];
    *merged = id;
    return 1;
}

static tcq_status push_pair(const tcq_tokenizer *t, heap *h, const sym *s, int l, tok_buf *tmp)
{
    int r = s[l].next;
    if (r < 0) return TCQ_OK;
    cand c = {0, l, r, s[l].id, s[r].id, 0};
    if (!pair_merge(t, c.idl, c.idr, tmp, &c.prio, &c.merged)) return TCQ_OK;
    return heap_push(h, c);
}

static tcq_status push_id(tok_buf *out, int32_t id) { return tok_buf_put(out, &id, sizeof id); }

tcq_status tok_bpe_word(const tcq_tokenizer *t, const char *w, size_t len, tok_buf *out)
{
    if (len == 0) return TCQ_OK;
    if (t->ignore_merges) {
        int32_t id = tok_strmap_get(&t->vocab, w, (uint32_t)len);
        if (id >= 0) return push_id(out, id);
    }
    sym *s = malloc((len + 1) * sizeof *s);   /* at most one symbol per byte */
    if (!s) return tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory");
    int n = 0;
    for (size_t i = 0; i < len;) {
        size_t cl = (size_t)tok_utf8_len((unsigned char)w[i]);
        if (i + cl > len) cl = len - i;
        for (size_t k = 1; k < cl; k++)
            if (((unsigned char)w[i + k] & 0xC0) != 0x80) { cl = k; break; }
        int32_t id = tok_strmap_get(&t->vocab, w + i, (uint32_t)cl);
        if (id >= 0) {
            uint32_t cp = (unsigned char)w[i];
            if (cl > 1) {
                cp &= 0x7Fu >> cl;
                for (size_t k = 1; k < cl; k++) cp = (cp << 6) | ((unsigned char)w[i + k] & 63u);
            }
            s[n].cp = cp;
            s[n++].id = id;
        } else {
            int all_bytes = t->byte_fallback;
            for (size_t k = 0; k < cl && all_bytes; k++) all_bytes = t->byte_id[(unsigned char)w[i + k]] >= 0;
            if (all_bytes) {
                for (size_t k = 0; k < cl; k++) {
                    s[n].cp = -1;
                    s[n++].id = t->byte_id[(unsigned char)w[i + k]];
                }
            } else if (t->unk >= 0) {
                if (!(t->fuse_unk && n > 0 && s[n - 1].id == t->unk)) {
                    s[n].cp = -1;
                    s[n++].id = t->unk;
                }
            }
            /* no unk token: the character is dropped, as tokenizers does */
        }
        i += cl;
    }
    heap h = {0};
    tok_buf tmp = {0};
    tcq_status st = TCQ_OK;
    /* Segments between boundaries no vocabulary piece spans merge independently. */
    for (int a = 0; a < n && st == TCQ_OK;) {
        int b = a + 1;
        int32_t r_, m_;
        if (t->adjacent.keys)
            while (b < n && !(s[b - 1].cp >= 0 && s[b].cp >= 0 &&
                              !tok_pairmap_get(&t->adjacent, (int32_t)s[b - 1].cp, (int32_t)s[b].cp, &r_, &m_)))
                b++;
        else
            b = n;
        for (int i = a; i < b; i++) {
            s[i].prev = i > a ? i - 1 : -1;
            s[i].next = i + 1 < b ? i + 1 : -1;
            s[i].alive = 1;
        }
        h.n = 0;
        for (int i = a; i + 1 < b && st == TCQ_OK; i++) st = push_pair(t, &h, s, i, &tmp);
        while (h.n && st == TCQ_OK) {
            cand c = heap_pop(&h);
            if (!s[c.left].alive || !s[c.right].alive || s[c.left].next != c.right || s[c.left].id != c.idl ||
                s[c.right].id != c.idr)
                continue;
            s[c.left].id = c.merged;
            s[c.right].alive = 0;
            s[c.left].next = s[c.right].next;
            if (s[c.right].next >= 0) s[s[c.right].next].prev = c.left;
            if (s[c.left].prev >= 0) st = push_pair(t, &h, s, s[c.left].prev, &tmp);
            if (st == TCQ_OK) st = push_pair(t, &h, s, c.left, &tmp);
        }
        for (int i = a; i >= 0 && st == TCQ_OK; i = s[i].next) st = push_id(out, s[i].id);
        a = b;
    }
    free(h.c);
    tok_buf_free(&tmp);
    free(s);
    return st;
}
