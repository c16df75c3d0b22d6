/* Tokenizer objects: loading (directory, tokenizer.json, llama2.c tokenizer.bin), accessors. */
#include "tokenizer/tok_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int cmp_added(const void *a, const void *b)
{
    const tok_added *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;   /* longest first */
    return x->id < y->id ? -1 : x->id > y->id;
}

static uint32_t next_cp(const char *p, uint32_t n, uint32_t *i)
{
    unsigned char c = (unsigned char)p[*i];
    uint32_t len = (uint32_t)tok_utf8_len(c), cp = c;
    if (*i + len > n) len = 1;
    if (len > 1) {
        cp = c & (0x7Fu >> len);
        for (uint32_t k = 1; k < len; k++) cp = (cp << 6) | ((unsigned char)p[*i + k] & 63u);
    }
    *i += len;
    return cp;
}

static tcq_status build_adjacent(tcq_tokenizer *t)
{
    TCQ_TRY(tok_pairmap_init(&t->adjacent, (uint32_t)t->n_vocab * 4));
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const char *p = t->pieces[id];
        uint32_t n = p ? t->piece_len[id] : 0, i = 0;
        if (n == 0) continue;
        uint32_t prev = next_cp(p, n, &i);
        while (i < n) {
            uint32_t cp = next_cp(p, n, &i);
            TCQ_TRY(tok_pairmap_put(&t->adjacent, (int32_t)prev, (int32_t)cp, 0, 0));
            prev = cp;
        }
    }
    return TCQ_OK;
}

tcq_status tok_finish(tcq_tokenizer *t)
{
    if (t->n_added) qsort(t->added, (size_t)t->n_added, sizeof *t->added, cmp_added);
    for (int i = 0; i < t->n_added; i++) t->added_first[(unsigned char)t->added[i].content[0]] = 1;
    if (t->kind == TOK_KIND_LLAMA2C || t->n_pres == 0) TCQ_TRY(build_adjacent(t));
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = t->kind == TOK_KIND_LLAMA2C ? (b + 3 < t->n_vocab ? b + 3 : -1)
                                                    : tok_strmap_get(&t->vocab, name, 6);
    }
    return TCQ_OK;
}

static tcq_status tok_new(tcq_tokenizer **out)
{
    tcq_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory");
    t->bos = t->eos = t->unk = -1;
    *out = t;
    return TCQ_OK;
}

void tcq_tokenizer_free(tcq_tokenizer *t)
{
    if (!t) return;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (t->pieces) free(t->pieces[i]);
        if (t->dec) free(t->dec[i]);
    }
    free(t->pieces);
    free(t->piece_len);
    free(t->dec);
    free(t->dec_len);
    free(t->scores);
    free(t->special);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    for (int i = 0; i < t->n_norms; i++) {
        free(t->norms[i].a);
        free(t->norms[i].b);
    }
    for (int i = 0; i < t->n_pres; i++) tok_pre_free(&t->pres[i]);
    tok_strmap_free(&t->vocab);
    tok_pairmap_free(&t->merges);
    tok_pairmap_free(&t->adjacent);
    free(t->chat_template);
    free(t);
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

tcq_status tcq_tokenizer_load(const char *path, tcq_tokenizer **out)
{
    if (!path || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_tokenizer_load: NULL argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return tcq_fail(TCQ_ERR_NOT_FOUND, "%s: no such file or directory", path);
    size_t pl = strlen(path);
    if (!S_ISDIR(sb.st_mode) && pl > 4 && strcmp(path + pl - 4, ".bin") == 0)
        return tcq_tokenizer_load_llama2c(path, 0, out);
    /* the directory holding tokenizer.json also holds tokenizer_config.json and the template */
    char dir[4096], json[4200], cfg[4200], jinja[4200];
    if (S_ISDIR(sb.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
        snprintf(json, sizeof json, "%s/tokenizer.json", dir);
        if (!is_file(json)) {
            snprintf(cfg, sizeof cfg, "%s/tokenizer.bin", dir);   /* a llama2.c export */
            if (is_file(cfg)) return tcq_tokenizer_load_llama2c(cfg, 0, out);
            return tcq_fail(TCQ_ERR_NOT_FOUND, "%s: no tokenizer.json (or llama2.c tokenizer.bin) in this directory", path);
        }
    } else {
        snprintf(json, sizeof json, "%s", path);
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, sizeof dir, ".");
    }
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    snprintf(jinja, sizeof jinja, "%s/chat_template.jinja", dir);
    tcq_tokenizer *t = NULL;
    TCQ_TRY(tok_new(&t));
    tcq_status st = tok_load_json(t, json);
    if (st == TCQ_OK && is_file(jinja)) st = tok_read_file(jinja, &t->chat_template, NULL);
    if (st == TCQ_OK && is_file(cfg)) st = tok_load_config(t, cfg);
    if (st == TCQ_OK) st = tok_finish(t);
    if (st != TCQ_OK) {
        tcq_tokenizer_free(t);
        return st;
    }
    *out = t;
    return TCQ_OK;
}

tcq_status tcq_tokenizer_load_llama2c(const char *path, int32_t vocab_size, tcq_tokenizer **out)
{
    if (!path || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_tokenizer_load_llama2c: NULL argument");
    *out = NULL;
    char *data;
    size_t len;
    TCQ_TRY(tok_read_file(path, &data, &len));
    tcq_tokenizer *t = NULL;
    tcq_status st = tok_new(&t);
    if (st != TCQ_OK) {
        free(data);
        return st;
    }
    t->kind = TOK_KIND_LLAMA2C;
    size_t pos = 4, cap = vocab_size > 0 ? (size_t)vocab_size : 1024;
    int32_t maxlen = 0;
    if (len < 4) st = tcq_fail(TCQ_ERR_FORMAT, "%s: too short for a llama2.c tokenizer", path);
    else memcpy(&maxlen, data, 4);
    if (st == TCQ_OK && (maxlen <= 0 || maxlen > 65536))
        st = tcq_fail(TCQ_ERR_FORMAT, "%s: max_token_length %d is not plausible", path, (int)maxlen);
    t->pieces = calloc(cap, sizeof *t->pieces);
    t->piece_len = calloc(cap, sizeof *t->piece_len);
    t->scores = calloc(cap, sizeof *t->scores);
    if (st == TCQ_OK && (!t->pieces || !t->piece_len || !t->scores)) st = tcq_fail(TCQ_ERR_NOMEM, "%s: out of memory", path);
    while (st == TCQ_OK && (vocab_size > 0 ? t->n_vocab < vocab_size : pos < len)) {
        int32_t n;
        float score;
        if (pos + 8 > len) {
            st = tcq_fail(TCQ_ERR_FORMAT, "%s: truncated at token %d (offset %zu)", path, (int)t->n_vocab, pos);
            break;
        }
        memcpy(&score, data + pos, 4);
        memcpy(&n, data + pos + 4, 4);
        pos += 8;
        if (n < 0 || n > maxlen || pos + (size_t)n > len) {
            st = tcq_fail(TCQ_ERR_FORMAT, "%s: token %d: length %d is invalid or past the end", path, (int)t->n_vocab, (int)n);
            break;
        }
        if ((size_t)t->n_vocab == cap) {
            cap *= 2;
            char **p = realloc(t->pieces, cap * sizeof *p);
            if (p) t->pieces = p;
            uint32_t *l = realloc(t->piece_len, cap * sizeof *l);
            if (l) t->piece_len = l;
            float *s = realloc(t->scores, cap * sizeof *s);
            if (s) t->scores = s;
            if (!p || !l || !s) { st = tcq_fail(TCQ_ERR_NOMEM, "%s: out of memory", path); break; }
        }
        char *piece = malloc((size_t)n + 1);
        if (!piece) { st = tcq_fail(TCQ_ERR_NOMEM, "%s: out of memory", path); break; }
        memcpy(piece, data + pos, (size_t)n);
        piece[n] = 0;
        pos += (size_t)n;
        t->pieces[t->n_vocab] = piece;
        t->piece_len[t->n_vocab] = (uint32_t)n;
        t->scores[t->n_vocab] = score;
        t->n_vocab++;
    }
    free(data);
    if (st == TCQ_OK && t->n_vocab < 3) st = tcq_fail(TCQ_ERR_FORMAT, "%s: only %d tokens", path, (int)t->n_vocab);
    if (st == TCQ_OK && !(t->special = calloc((size_t)t->n_vocab, 1))) st = tcq_fail(TCQ_ERR_NOMEM, "%s: out of memory", path);
    if (st == TCQ_OK) st = tok_strmap_init(&t->vocab, (uint32_t)t->n_vocab);
    /* the first of equal pieces wins, as llama2.c's sorted lookup finds one of them */
    for (int32_t i = t->n_vocab - 1; st == TCQ_OK && i >= 0; i--)
        st = tok_strmap_put(&t->vocab, t->pieces[i], t->piece_len[i], i);
    if (st == TCQ_OK) {
        t->special[0] = t->special[1] = t->special[2] = 1;   /* <unk>, <s>, </s> */
        t->bos = 1;
        t->eos = 2;
        t->prefix[0] = 1;
        t->n_prefix = 1;
        t->byte_fallback = 1;
        tok_decoder_desc d = {0};
        d.byte_fallback = 1;
        d.strip_start = 1;   /* llama2.c drops the space after BOS */
        d.strip_char = ' ';
        st = tok_build_decoded(t, &d);
    }
    if (st == TCQ_OK) st = tok_finish(t);
    if (st != TCQ_OK) {
        tcq_tokenizer_free(t);
        return st;
    }
    *out = t;
    return TCQ_OK;
}

int32_t tcq_tokenizer_vocab_size(const tcq_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t tcq_tokenizer_bos(const tcq_tokenizer *t) { return t ? t->bos : -1; }
int32_t tcq_tokenizer_eos(const tcq_tokenizer *t) { return t ? t->eos : -1; }
int tcq_tokenizer_adds_bos(const tcq_tokenizer *t) { return t && t->n_prefix > 0 && t->prefix[0] == t->bos; }
const char *tcq_tokenizer_chat_template(const tcq_tokenizer *t) { return t ? t->chat_template : NULL; }

int32_t tcq_tokenizer_find(const tcq_tokenizer *t, const char *piece)
{
    return t && piece ? tok_strmap_get(&t->vocab, piece, (uint32_t)strlen(piece)) : -1;
}

const char *tcq_tokenizer_piece(const tcq_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_vocab ? t->pieces[id] : NULL;
}

int tcq_tokenizer_is_special(const tcq_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_vocab ? t->special[id] : 0;
}
