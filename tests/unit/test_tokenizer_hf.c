/* Against Hugging Face transformers 5.17 / tokenizers 0.23 (tests/data/README.md):
 * tokenizer_hf/vectors.json (AutoTokenizer ids, with special tokens, decode) and chat_hf/
 * (apply_chat_template renderings and their ids) for tinyqwen and Qwen3, and tinyqwen's ids of
 * the whole valid.txt (tinyqwen_ref/). */
#include "test.h"

#include <jansson.h>

/* ids equal to the JSON array want; prints both on a difference. */
static int same_ids(const int32_t *ids, size_t n, const json_t *want)
{
    int same = ids && n == json_array_size(want);
    for (size_t i = 0; same && i < n; i++) same = ids[i] == json_integer_value(json_array_get(want, i));
    if (!same) {
        fprintf(stderr, "  got :");
        for (size_t i = 0; ids && i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n  want:");
        for (size_t i = 0; i < json_array_size(want) && i < 40; i++) fprintf(stderr, " %lld", json_integer_value(json_array_get(want, i)));
        fprintf(stderr, "\n");
    }
    return same;
}

static const char *const NAMES[2] = {"tinyqwen", "qwen3"};
static const char *const DIRS[2] = {TEST_REPO_DATA "/tinyqwen", TEST_REPO_DATA "/tokenizers/qwen3"};

static void test_vectors(tcq_tokenizer *const toks[2])
{
    json_error_t err;
    json_t *root = json_load_file(TCQ_SOURCE_DIR "/tests/data/tokenizer_hf/vectors.json", 0, &err);
    CHECK(root != NULL, "vectors.json: %s", err.text);
    for (int t = 0; root && t < 2; t++) {
        json_t *r = json_object_get(root, NAMES[t]);
        const tcq_tokenizer *tok = toks[t];
        if (!tok || !r) continue;
        json_t *bos = json_object_get(r, "bos_token_id"), *eos = json_object_get(r, "eos_token_id");
        CHECK(tcq_tokenizer_bos(tok) == (json_is_integer(bos) ? json_integer_value(bos) : -1), "%s: bos", NAMES[t]);
        CHECK(tcq_tokenizer_eos(tok) == json_integer_value(eos), "%s: eos %d", NAMES[t], tcq_tokenizer_eos(tok));
        size_t i;
        json_t *v;
        int n_rows = 0;
        json_array_foreach(json_object_get(r, "vectors"), i, v) {
            const char *text = json_string_value(json_object_get(v, "text"));
            size_t len = json_string_length(json_object_get(v, "text"));
            int32_t *ids = NULL;
            size_t n = 0;
            CHECK_OK(tcq_tokenizer_encode_alloc(tok, text, len, 0, &ids, &n));
            CHECK(same_ids(ids, n, json_object_get(v, "ids")), "%s vector %zu (\"%.40s\"): ids", NAMES[t], i, text);
            char *dec = NULL;
            size_t dl = 0;
            CHECK_OK(tcq_tokenizer_decode(tok, ids, n, 0, &dec, &dl));
            const char *want = json_string_value(json_object_get(v, "decoded"));
            CHECK(dec && dl == json_string_length(json_object_get(v, "decoded")) && memcmp(dec, want, dl) == 0,
                  "%s vector %zu: decoded \"%.40s\"", NAMES[t], i, dec ? dec : "");
            free(dec);
            free(ids);
            CHECK_OK(tcq_tokenizer_encode_alloc(tok, text, len, TCQ_TOK_ADD_SPECIAL, &ids, &n));
            CHECK(same_ids(ids, n, json_object_get(v, "ids_with_special")), "%s vector %zu: ids with special", NAMES[t], i);
            free(ids);
            n_rows++;
        }
        CHECK(n_rows >= 10, "%s: only %d vectors", NAMES[t], n_rows);
    }
    json_decref(root);
}

static void test_chat(tcq_tokenizer *const toks[2])
{
    json_error_t err;
    json_t *convs = json_load_file(TCQ_SOURCE_DIR "/tests/data/chat_hf/conversations.json", 0, &err);
    json_t *ids_ref = json_load_file(TCQ_SOURCE_DIR "/tests/data/chat_hf/rendered_ids.json", 0, &err);
    CHECK(convs && ids_ref, "chat_hf: %s", err.text);
    int n_cases = 0;
    for (int t = 0; convs && ids_ref && t < 2; t++) {
        const char *cname;
        json_t *c;
        json_object_foreach(convs, cname, c) {
            if (!toks[t]) continue;
            json_t *msgs = json_object_get(c, "messages");
            size_t nm = json_array_size(msgs);
            tcq_chat_message *m = calloc(nm + 1, sizeof *m);
            for (size_t k = 0; k < nm; k++) {
                m[k].role = json_string_value(json_object_get(json_array_get(msgs, k), "role"));
                m[k].content = json_string_value(json_object_get(json_array_get(msgs, k), "content"));
            }
            json_t *think = json_object_get(c, "enable_thinking");
            tcq_chat_opts o = {.add_generation_prompt = json_is_true(json_object_get(c, "add_generation_prompt")),
                               .enable_thinking = json_is_boolean(think) ? json_is_true(think) : -1};
            char *out = NULL, path[1024], key[256];
            CHECK_OK(tcq_tokenizer_apply_chat(toks[t], m, nm, &o, &out));
            snprintf(path, sizeof path, "%s/tests/data/chat_hf/%s_%s.txt", TCQ_SOURCE_DIR, NAMES[t], cname);
            snprintf(key, sizeof key, "%s_%s", NAMES[t], cname);
            char *want = test_slurp(path, NULL);
            CHECK(out && want && strcmp(out, want) == 0, "%s: rendering differs from transformers'", key);
            int32_t *ids = NULL;
            size_t n = 0;
            if (out) CHECK_OK(tcq_tokenizer_encode_alloc(toks[t], out, strlen(out), 0, &ids, &n));
            CHECK(same_ids(ids, n, json_object_get(ids_ref, key)), "%s: ids of the rendering", key);
            free(ids);
            free(want);
            free(out);
            free(m);
            n_cases++;
        }
    }
    CHECK(n_cases >= 10, "only %d chat cases", n_cases);
    json_decref(convs);
    json_decref(ids_ref);
}

/* The whole valid.txt: the count transformers gave (tinyqwen_ref/ppl.json) and the first 32768
 * ids it stored (ppl_tokens.safetensors, the perplexity windows). */
static void test_valid_txt(const tcq_tokenizer *tok)
{
    char *text = test_slurp(TEST_REPO_DATA "/tinyqwen/valid.txt", NULL);
    json_error_t err;
    json_t *ppl = json_load_file(TCQ_SOURCE_DIR "/tests/data/tinyqwen_ref/ppl.json", 0, &err);
    tcq_st_file *st = NULL;
    CHECK_OK(tcq_st_open(TCQ_SOURCE_DIR "/tests/data/tinyqwen_ref/ppl_tokens.safetensors", &st));
    const tcq_tensor_info *ti = st ? tcq_st_find(st, "tokens") : NULL;
    CHECK(text && ppl && ti && ti->dtype == TCQ_DTYPE_I32, "valid.txt / ppl.json / ppl_tokens");
    if (text && ppl && ti && ti->dtype == TCQ_DTYPE_I32 && tok) {
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_OK(tcq_tokenizer_encode_alloc(tok, text, strlen(text), 0, &ids, &n));
        CHECK((json_int_t)n == json_integer_value(json_object_get(ppl, "n_tokens")), "valid.txt: %zu tokens, want %lld", n,
              json_integer_value(json_object_get(ppl, "n_tokens")));
        const int32_t *want = ti->data;
        size_t k = 0;
        while (ids && k < n && k < (size_t)ti->numel && ids[k] == want[k]) k++;
        CHECK(k == (size_t)ti->numel, "valid.txt: first difference at token %zu of %lld", k, (long long)ti->numel);
        free(ids);
    }
    tcq_st_close(st);
    json_decref(ppl);
    free(text);
}

int main(void)
{
    tcq_tokenizer *toks[2] = {NULL, NULL};
    for (int t = 0; t < 2; t++) CHECK_OK(tcq_tokenizer_load(DIRS[t], &toks[t]));
    test_vectors(toks);
    test_chat(toks);
    test_valid_txt(toks[0]);
    for (int t = 0; t < 2; t++) tcq_tokenizer_free(toks[t]);
    return test_done("test_tokenizer_hf");
}
