/* stories260K: greedy generation from BOS reproduces llama2.c's output, from the llama2.c
 * checkpoint (interleaved RoPE) and from the HF copy (rotate-half, q/k permuted). */
#include "test.h"

#define D TEST_REPO_DATA "/stories260K/"

/* Minimal llama2.c tok512.bin decoder (test-only). */
static char *pieces[512];
static int load_tok512(void)
{
    FILE *f = fopen(D "tok512.bin", "rb");
    if (!f) return -1;
    int maxlen;
    if (fread(&maxlen, 4, 1, f) != 1) return -1;
    for (int i = 0; i < 512; i++) {
        float score;
        int len;
        if (fread(&score, 4, 1, f) != 1 || fread(&len, 4, 1, f) != 1 || len < 0 || len > 64) return -1;
        pieces[i] = calloc((size_t)len + 1, 1);
        if (fread(pieces[i], 1, (size_t)len, f) != (size_t)len) return -1;
    }
    fclose(f);
    return 0;
}
static void append_piece(char *out, size_t cap, int prev, int tok)
{
    const char *p = pieces[tok];
    if (prev == 1 && p[0] == ' ') p++;
    unsigned b;
    char tmp[2] = {0, 0};
    if (sscanf(p, "<0x%02X>", &b) == 1) {
        tmp[0] = (char)b;
        p = tmp;
    }
    strncat(out, p, cap - strlen(out) - 1);
}

static char *expected_first(void)
{
    static char buf[4096];
    FILE *f = fopen(D "stories260K.expected.txt", "r");
    if (!f) return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *s = strchr(buf, '\n');   /* skip the "## ./run ..." line */
    return s ? s + 1 : NULL;
}

typedef struct gen_ctx {
    char text[8192];
    int prev;
    int32_t toks[512];
    int n;
} gen_ctx;

static int on_tok(void *arg, int32_t t)
{
    gen_ctx *g = arg;
    append_piece(g->text, sizeof g->text, g->prev, t);
    g->prev = t;
    g->toks[g->n++] = t;
    return 0;
}

static void greedy(const char *path, const char *want, tcq_kv_dtype kv, gen_ctx *g)
{
    tcq_model *m = NULL;
    tcq_status s = tcq_model_load(path, NULL, &m);
    CHECK(s == TCQ_OK, "load %s: %s", path, tcq_last_error());
    if (s != TCQ_OK) return;
    const tcq_model_config *c = tcq_model_get_config(m);
    CHECK(c->dim == 64 && c->n_layers == 5 && c->n_kv_heads == 4 && c->vocab_size == 512, "config of %s", path);
    tcq_session *ss = NULL;
    tcq_sampler *smp = NULL;
    tcq_sampler_params sp = tcq_sampler_defaults();
    sp.temperature = 0;
    CHECK_OK(tcq_session_create(m, 0, kv, &ss));
    CHECK_OK(tcq_sampler_create(&sp, c->vocab_size, &smp));
    memset(g, 0, sizeof *g);
    g->prev = 1;
    int32_t bos = 1;
    tcq_gen_stats st;
    CHECK_OK(tcq_generate(m, ss, smp, &bos, 1, 100, on_tok, g, &st));
    CHECK(st.n_generated == 100, "%d tokens", st.n_generated);
    CHECK(strlen(g->text) >= 200 && strncmp(g->text, want, 200) == 0, "%s (kv %d):\n got: %.200s\nwant: %.200s", path,
          kv, g->text, want);
    tcq_sampler_free(smp);
    tcq_session_free(ss);
    tcq_model_free(m);
}

int main(void)
{
    CHECK(load_tok512() == 0, "tok512.bin");
    const char *want = expected_first();
    CHECK(want != NULL, "expected text");
    if (!want || test_failures) return test_done("test_model_stories");
    gen_ctx *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    greedy(D "stories260K.bin", want, TCQ_KV_F32, a);
    greedy(D "stories260K.bin", want, TCQ_KV_F16, b);
    greedy(D "hf", want, TCQ_KV_F32, b);
    CHECK(memcmp(a->toks, b->toks, sizeof a->toks) == 0, "bin and hf generate different tokens");
    free(a);
    free(b);
    return test_done("test_model_stories");
}
