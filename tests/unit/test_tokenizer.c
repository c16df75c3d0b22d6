/* Tokenizer: llama2.c tokenizer.bin against a transcription of run.c's encode, tinyqwen round
 * trip and special tokens, streaming decode of split UTF-8, bad input. */
#include "test.h"

#include "tokenizer/tok_internal.h"

#include <pthread.h>

static void check_ids(const char *what, const int32_t *got, size_t n, const int32_t *want, size_t nw)
{
    int same = n == nw && memcmp(got, want, n * sizeof *got) == 0;
    CHECK(same, "%s: %zu ids, want %zu", what, n, nw);
    if (!same) {
        fprintf(stderr, "  got :");
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", got[i]);
        fprintf(stderr, "\n  want:");
        for (size_t i = 0; i < nw; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n");
    }
}

/* Decode a JSON string literal of the expected-file (only the escapes json.dumps writes). */
static size_t json_unquote(const char *s, char *out)
{
    size_t n = 0;
    for (s++; *s && *s != '"'; s++) {
        if (*s != '\\') { out[n++] = *s; continue; }
        s++;
        if (*s == 'n') out[n++] = '\n';
        else if (*s == 't') out[n++] = '\t';
        else if (*s == 'u') {
            unsigned cp = (unsigned)strtoul((char[5]){s[1], s[2], s[3], s[4], 0}, NULL, 16);
            s += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && s[1] == '\\' && s[2] == 'u') {
                unsigned lo = (unsigned)strtoul((char[5]){s[3], s[4], s[5], s[6], 0}, NULL, 16);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                s += 6;
            }
            if (cp < 0x80) out[n++] = (char)cp;
            else if (cp < 0x800) { out[n++] = (char)(0xC0 | (cp >> 6)); out[n++] = (char)(0x80 | (cp & 63)); }
            else if (cp < 0x10000) {
                out[n++] = (char)(0xE0 | (cp >> 12)); out[n++] = (char)(0x80 | ((cp >> 6) & 63));
                out[n++] = (char)(0x80 | (cp & 63));
            } else {
                out[n++] = (char)(0xF0 | (cp >> 18)); out[n++] = (char)(0x80 | ((cp >> 12) & 63));
                out[n++] = (char)(0x80 | ((cp >> 6) & 63)); out[n++] = (char)(0x80 | (cp & 63));
            }
        } else out[n++] = *s;
    }
    out[n] = 0;
    return n;
}

static void test_llama2c(void)
{
    tcq_tokenizer *tok = NULL, *tok0 = NULL;
    CHECK_OK(tcq_tokenizer_load_llama2c(TEST_REPO_DATA "/stories260K/tok512.bin", 512, &tok));
    CHECK_OK(tcq_tokenizer_load(TEST_REPO_DATA "/stories260K/tok512.bin", &tok0));
    if (!tok || !tok0) return;
    CHECK(tcq_tokenizer_vocab_size(tok) == 512 && tcq_tokenizer_vocab_size(tok0) == 512, "vocab %d / %d",
          tcq_tokenizer_vocab_size(tok), tcq_tokenizer_vocab_size(tok0));
    CHECK(tcq_tokenizer_bos(tok) == 1 && tcq_tokenizer_eos(tok) == 2 && tcq_tokenizer_adds_bos(tok), "bos/eos");
    FILE *f = fopen(TCQ_SOURCE_DIR "/tests/data/tokenizers/tok512-expected.txt", "r");
    CHECK(f != NULL, "no tok512-expected.txt");
    char line[4096], text[2048];
    int cases = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        int32_t want[1024];
        size_t nw = 0;
        for (char *s = line, *e; s < tab && nw < 1024; s = e) {
            long v = strtol(s, &e, 10);
            if (e == s) break;
            want[nw++] = (int32_t)v;
        }
        size_t tl = json_unquote(tab + 1, text);
        int32_t ids[1024];
        size_t n = 0;
        CHECK_OK(tcq_tokenizer_encode(tok, text, tl, TCQ_TOK_ADD_SPECIAL, ids, 1024, &n));
        check_ids(text, ids, n, want, nw);
        char *back = NULL;
        CHECK_OK(tcq_tokenizer_decode(tok, ids, n, TCQ_DETOK_SKIP_SPECIAL, &back, NULL));
        CHECK(back && strcmp(back, text) == 0, "llama2c round trip \"%s\" -> \"%s\"", text, back ? back : "");
        free(back);
        cases++;
    }
    if (f) fclose(f);
    CHECK(cases >= 5, "only %d llama2.c cases", cases);

    /* byte fallback: U+1F600 is four <0x..> tokens; the stream holds it until it is whole */
    int32_t ids[16];
    size_t n = 0;
    CHECK_OK(tcq_tokenizer_encode(tok, "\xF0\x9F\x98\x80", 4, 0, ids, 16, &n));
    CHECK(n == 5 && ids[1] == 0xF0 + 3 && ids[4] == 0x80 + 3, "emoji -> %zu ids", n);
    tcq_detok *d = NULL;
    CHECK_OK(tcq_detok_create(tok, TCQ_DETOK_SKIP_SPECIAL, &d));
    if (d && n == 5) {
        const char *p;
        size_t len;
        for (int i = 1; i < 4; i++) {
            CHECK_OK(tcq_detok_push(d, ids[i], &p, &len));
            CHECK(len == 0, "partial character emitted after token %d (%zu bytes)", i, len);
        }
        CHECK_OK(tcq_detok_push(d, ids[4], &p, &len));
        CHECK(len == 4 && memcmp(p, "\xF0\x9F\x98\x80", 4) == 0, "whole character: %zu bytes", len);
        /* an incomplete tail at the end of the stream becomes U+FFFD */
        CHECK_OK(tcq_detok_push(d, ids[1], &p, &len));
        CHECK_OK(tcq_detok_flush(d, &p, &len));
        CHECK(len == 3 && memcmp(p, "\xEF\xBF\xBD", 3) == 0, "flush: %zu bytes", len);
    }
    tcq_detok_free(d);
    char buf[8];
    size_t bl = 0;
    CHECK_OK(tcq_tokenizer_token_bytes(tok, 13, buf, sizeof buf, &bl));   /* <0x0A> */
    CHECK(bl == 1 && buf[0] == '\n', "token 13 -> %zu bytes", bl);
    CHECK(tcq_tokenizer_encode(tok, "Once upon a time", 16, TCQ_TOK_ADD_SPECIAL, ids, 2, &n) == TCQ_ERR_RANGE && n == 5,
          "small buffer: need %zu", n);
    tcq_tokenizer_free(tok);
    tcq_tokenizer_free(tok0);
}

static void test_tinyqwen(void)
{
    tcq_tokenizer *tok = NULL;
    CHECK_OK(tcq_tokenizer_load(TEST_REPO_DATA "/tinyqwen", &tok));
    if (!tok) return;
    CHECK(tcq_tokenizer_vocab_size(tok) == 8192, "vocab %d", tcq_tokenizer_vocab_size(tok));
    CHECK(tcq_tokenizer_eos(tok) == 2 && tcq_tokenizer_find(tok, "<|im_end|>") == 2, "eos %d", tcq_tokenizer_eos(tok));
    CHECK(!tcq_tokenizer_adds_bos(tok) && tcq_tokenizer_is_special(tok, 1), "bos/special");
    const char *ct = tcq_tokenizer_chat_template(tok);
    CHECK(ct && strstr(ct, "<|im_start|>"), "chat template from chat_template.jinja");

    FILE *f = fopen(TEST_REPO_DATA "/tinyqwen/valid.txt", "rb");
    CHECK(f != NULL, "valid.txt");
    char text[8193];
    size_t tl = f ? fread(text, 1, 8192, f) : 0;
    if (f) fclose(f);
    while (tl && ((unsigned char)text[tl - 1] & 0xC0) == 0x80) tl--;   /* whole characters only */
    if (tl && (unsigned char)text[tl - 1] >= 0xC0) tl--;
    text[tl] = 0;
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(tcq_tokenizer_encode_alloc(tok, text, tl, TCQ_TOK_ADD_SPECIAL, &ids, &n));
    CHECK(n > tl / 8 && n < tl, "%zu tokens for %zu bytes", n, tl);
    char *back = NULL;
    size_t bl = 0;
    CHECK_OK(tcq_tokenizer_decode(tok, ids, n, 0, &back, &bl));
    CHECK(back && bl == tl && memcmp(back, text, tl) == 0, "valid.txt round trip (%zu vs %zu bytes)", bl, tl);
    /* the stream gives the same text token by token */
    tcq_detok *d = NULL;
    CHECK_OK(tcq_detok_create(tok, 0, &d));
    size_t at = 0;
    int stream_ok = d != NULL;
    for (size_t i = 0; d && i < n; i++) {
        const char *p;
        size_t len;
        if (tcq_detok_push(d, ids[i], &p, &len) != TCQ_OK || at + len > tl || memcmp(text + at, p, len) != 0) stream_ok = 0;
        at += len;
    }
    CHECK(stream_ok && at == tl, "streamed %zu of %zu bytes", at, tl);
    tcq_detok_free(d);
    free(back);
    free(ids);

    const char *chat = "<|im_start|>user\nhi<|im_end|>";
    CHECK_OK(tcq_tokenizer_encode_alloc(tok, chat, strlen(chat), 0, &ids, &n));
    CHECK(ids && n >= 3 && ids[0] == 1 && ids[n - 1] == 2, "special tokens matched in text");
    free(ids);
    CHECK_OK(tcq_tokenizer_encode_alloc(tok, chat, strlen(chat), TCQ_TOK_NO_PARSE_SPECIAL, &ids, &n));
    int any = 0;
    for (size_t i = 0; ids && i < n; i++) any |= ids[i] == 1 || ids[i] == 2;
    CHECK(ids && !any, "NO_PARSE_SPECIAL: special text is plain text");
    free(ids);
    /* invalid UTF-8 still round-trips byte for byte through the byte-level alphabet */
    const char bad[] = "a\xFF\xFE" "b";
    CHECK_OK(tcq_tokenizer_encode_alloc(tok, bad, 4, 0, &ids, &n));
    char cat[64];
    size_t cl = 0;
    for (size_t i = 0; ids && i < n; i++) {
        size_t k = 0;
        CHECK_OK(tcq_tokenizer_token_bytes(tok, ids[i], cat + cl, sizeof cat - cl, &k));
        cl += k;
    }
    CHECK(cl == 4 && memcmp(cat, bad, 4) == 0, "invalid UTF-8 bytes kept (%zu)", cl);
    CHECK_OK(tcq_tokenizer_decode(tok, ids, n, 0, &back, &bl));
    CHECK(back && strcmp(back, "a\xEF\xBF\xBD\xEF\xBF\xBD" "b") == 0, "decode repairs to U+FFFD");
    free(back);
    free(ids);
    tcq_tokenizer_free(tok);
}

static void test_qwen3_stream(void)
{
    tcq_tokenizer *tok = NULL;
    CHECK_OK(tcq_tokenizer_load(TEST_REPO_DATA "/tokenizers/qwen3", &tok));
    if (!tok) return;
    CHECK(tcq_tokenizer_find(tok, "<think>") == 151667 && !tcq_tokenizer_is_special(tok, 151667), "<think>");
    CHECK(tcq_tokenizer_chat_template(tok) != NULL, "qwen3 chat template");
    /* find a character that byte-level BPE splits over tokens */
    const char *cands[] = {"\xF0\x9F\xA6\x9C", "\xF0\x90\x8C\xB0", "\xE2\xBF\xB0", "\xF0\x9F\xAB\x8F"};
    int tested = 0;
    for (size_t c = 0; c < sizeof cands / sizeof cands[0] && !tested; c++) {
        int32_t ids[8];
        size_t n = 0;
        CHECK_OK(tcq_tokenizer_encode(tok, cands[c], strlen(cands[c]), 0, ids, 8, &n));
        if (n < 2) continue;
        tested = 1;
        tcq_detok *d = NULL;
        CHECK_OK(tcq_detok_create(tok, 0, &d));
        if (!d) break;
        const char *p;
        size_t len;
        for (size_t i = 0; i + 1 < n; i++) {
            CHECK_OK(tcq_detok_push(d, ids[i], &p, &len));
            CHECK(len == 0, "partial character emitted");
        }
        CHECK_OK(tcq_detok_push(d, ids[n - 1], &p, &len));
        CHECK(len == strlen(cands[c]) && memcmp(p, cands[c], len) == 0, "completed character");
        tcq_detok_free(d);
    }
    CHECK(tested, "no split character found");
    tcq_tokenizer_free(tok);
}

/* One tokenizer, several threads: every thread gets the same ids. */
typedef struct job { const tcq_tokenizer *tok; const char *text; size_t len; int32_t *ids; size_t n; tcq_status st; } job;

static void *encode_job(void *arg)
{
    job *j = arg;
    for (int r = 0; r < 3 && j->st == TCQ_OK; r++) {
        free(j->ids);
        j->st = tcq_tokenizer_encode_alloc(j->tok, j->text, j->len, TCQ_TOK_ADD_SPECIAL, &j->ids, &j->n);
    }
    return NULL;
}

static void test_threads(void)
{
    tcq_tokenizer *tok = NULL;
    CHECK_OK(tcq_tokenizer_load(TEST_REPO_DATA "/tinyqwen", &tok));
    FILE *f = fopen(TEST_REPO_DATA "/tinyqwen/valid.txt", "rb");
    static char text[32768];
    size_t tl = f ? fread(text, 1, sizeof text, f) : 0;
    if (f) fclose(f);
    if (!tok || !tl) return;
    job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job){tok, text, tl, NULL, 0, TCQ_OK};
        pthread_create(&th[i], NULL, encode_job, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        CHECK(jobs[i].st == TCQ_OK && jobs[i].n == jobs[0].n && jobs[i].ids &&
                  memcmp(jobs[i].ids, jobs[0].ids, jobs[0].n * sizeof(int32_t)) == 0,
              "thread %d differs", i);
    }
    for (int i = 0; i < 4; i++) free(jobs[i].ids);
    tcq_tokenizer_free(tok);
}

/* Cutting long words where no vocabulary piece spans a boundary (tok_bpe.c) changes no id:
 * the same text with the cut disabled gives the same ids. */
static void test_word_cut(void)
{
    static char text[16384];
    FILE *f = fopen(TEST_REPO_DATA "/tinyqwen/valid.txt", "rb");
    size_t tl = f ? fread(text, 1, sizeof text - 64, f) : 0;
    if (f) fclose(f);
    while (tl && ((unsigned char)text[tl - 1] & 0xC0) == 0x80) tl--;
    if (tl && (unsigned char)text[tl - 1] >= 0xC0) tl--;
    memcpy(text + tl, "  caf\xC3\xA9 \xF0\x9F\x98\x80\t\tx\n\n", 18);
    tl += 18;
    const char *paths[] = {TEST_REPO_DATA "/tokenizers/llama2", TEST_REPO_DATA "/stories260K/tok512.bin"};
    for (int k = 0; k < 2; k++) {
        tcq_tokenizer *tok = NULL;
        CHECK_OK(tcq_tokenizer_load(paths[k], &tok));
        if (!tok) continue;
        CHECK(tok->adjacent.keys != NULL, "%s: no adjacency set", paths[k]);
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        CHECK_OK(tcq_tokenizer_encode_alloc(tok, text, tl, 0, &a, &na));
        tok_pairmap_free(&tok->adjacent);
        CHECK_OK(tcq_tokenizer_encode_alloc(tok, text, tl, 0, &b, &nb));
        CHECK(a && b && na == nb && memcmp(a, b, na * sizeof *a) == 0, "%s: cut changed the ids (%zu vs %zu)", paths[k], na, nb);
        free(a);
        free(b);
        tcq_tokenizer_free(tok);
    }
}

static void write_file(const char *path, const char *s);

/* stories260K: the greedy ids of the HF copy (tests/data/stories260K_ref/greedy.json), streamed
 * through the llama2.c decoder, give the first section of stories260K.expected.txt. */
static void test_stories_greedy(void)
{
    FILE *f = fopen(TCQ_SOURCE_DIR "/tests/data/stories260K_ref/greedy.json", "rb");
    static char js[65536], exp_txt[8192];
    size_t jl = f ? fread(js, 1, sizeof js - 1, f) : 0;
    if (f) fclose(f);
    js[jl] = 0;
    f = fopen(TEST_REPO_DATA "/stories260K/stories260K.expected.txt", "rb");
    size_t el = f ? fread(exp_txt, 1, sizeof exp_txt - 1, f) : 0;
    if (f) fclose(f);
    exp_txt[el] = 0;
    char *a = strchr(exp_txt, '\n'), *b = a ? strstr(a, "\n\n## ") : NULL;   /* the first section */
    char *ids_at = strstr(js, "\"greedy_ids\"");
    CHECK(a && b && ids_at, "greedy.json / expected.txt");
    if (!a || !b || !ids_at) return;
    a++;
    *b = 0;
    tcq_tokenizer *tok = NULL;
    tcq_detok *d = NULL;
    CHECK_OK(tcq_tokenizer_load(TEST_REPO_DATA "/stories260K/tok512.bin", &tok));
    if (tok) CHECK_OK(tcq_detok_create(tok, TCQ_DETOK_SKIP_SPECIAL, &d));
    if (!d) { tcq_tokenizer_free(tok); return; }
    char out[8192];
    size_t on = 0;
    int n_ids = 0;
    for (char *p = strchr(ids_at, '[') + 1, *e; *p && *p != ']'; p = e + (*e == ',')) {
        long id = strtol(p, &e, 10);
        if (e == p) break;
        const char *t;
        size_t tl;
        CHECK_OK(tcq_detok_push(d, (int32_t)id, &t, &tl));
        if (on + tl < sizeof out) { memcpy(out + on, t, tl); on += tl; }
        n_ids++;
    }
    out[on] = 0;
    while (on && (out[on - 1] == '\n' || out[on - 1] == ' ')) out[--on] = 0;
    CHECK(n_ids == 257 && strcmp(out, a) == 0, "greedy text (%d ids):\n%s\n--- want:\n%s", n_ids, out, a);
    tcq_detok_free(d);
    tcq_tokenizer_free(tok);
}

/* Regex classes as Oniguruma (tokenizers' engine) has them: \s matches U+0085, \w marks. */
static void test_regex_classes(void)
{
    const char *p = TCQ_BINARY_DIR "/tok-classes.json";
    write_file(p, "{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
                  "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"behavior\": \"Removed\"},"
                  "{\"type\": \"Whitespace\"}]},"
                  "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"\\u0085\": 2, \"e\": 3, "
                  "\"\\u0301\": 4, \"x\": 5, \"e\\u0301\": 6, \"e\\u0301x\": 7},"
                  "\"merges\": [[\"e\", \"\\u0301\"], [\"e\\u0301\", \"x\"]]}}");
    tcq_tokenizer *tok = NULL;
    CHECK_OK(tcq_tokenizer_load(p, &tok));
    if (tok) {
        int32_t ids[8];
        size_t n = 0;
        CHECK_OK(tcq_tokenizer_encode(tok, "a\xC2\x85" "b", 4, 0, ids, 8, &n));
        CHECK(n == 2 && ids[0] == 0 && ids[1] == 1, "NEL is whitespace: %zu ids", n);
        CHECK_OK(tcq_tokenizer_encode(tok, "e\xCC\x81x", 4, 0, ids, 8, &n));
        CHECK(n == 1 && ids[0] == 7, "a combining mark is a word character: %zu ids", n);
        tcq_tokenizer_free(tok);
    }
    remove(p);
}

static void write_file(const char *path, const char *s)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(s, f);
        fclose(f);
    }
}

static void test_errors(void)
{
    tcq_tokenizer *tok = NULL;
    CHECK(tcq_tokenizer_load(TCQ_BINARY_DIR "/no-such-tokenizer.json", &tok) == TCQ_ERR_NOT_FOUND && !tok, "missing");
    CHECK(strstr(tcq_last_error(), "no-such-tokenizer.json") != NULL, "message names the file: %s", tcq_last_error());
    const char *p = TCQ_BINARY_DIR "/tok-bad.json";
    write_file(p, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,}}}");
    CHECK(tcq_tokenizer_load(p, &tok) == TCQ_ERR_FORMAT, "malformed JSON");
    CHECK(strstr(tcq_last_error(), "tok-bad.json") != NULL, "message: %s", tcq_last_error());
    write_file(p, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a c\"]}}");
    CHECK(tcq_tokenizer_load(p, &tok) == TCQ_ERR_FORMAT && strstr(tcq_last_error(), "merges[0]"), "bad merge: %s",
          tcq_last_error());
    write_file(p, "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}");
    CHECK(tcq_tokenizer_load(p, &tok) == TCQ_ERR_UNSUPPORTED, "unigram: %s", tcq_last_error());
    write_file(p, "[1, 2]");
    CHECK(tcq_tokenizer_load(p, &tok) == TCQ_ERR_FORMAT, "not an object");
    /* a truncated tokenizer.bin */
    FILE *src = fopen(TEST_REPO_DATA "/stories260K/tok512.bin", "rb");
    char buf[3000];
    size_t n = src ? fread(buf, 1, sizeof buf, src) : 0;
    if (src) fclose(src);
    const char *q = TCQ_BINARY_DIR "/tok-trunc.bin";
    FILE *dst = fopen(q, "wb");
    if (dst) {
        fwrite(buf, 1, n, dst);
        fclose(dst);
    }
    CHECK(tcq_tokenizer_load_llama2c(q, 512, &tok) == TCQ_ERR_FORMAT && !tok, "truncated tokenizer.bin");
    CHECK(strstr(tcq_last_error(), "tok-trunc.bin") != NULL, "message: %s", tcq_last_error());
    remove(p);
    remove(q);
}

int main(void)
{
    test_llama2c();
    test_tinyqwen();
    test_qwen3_stream();
    test_errors();
    test_threads();
    test_word_cut();
    test_regex_classes();
    test_stories_greedy();
    return test_done("test_tokenizer");
}
