/* llama.cpp's tokenizer vectors: exact ids for the Qwen2/3 byte-level BPE and the Llama 2
 * SentencePiece-style BPE (tokenizer.json), and the round trip decode(encode(x)) == x. */
#include "test.h"

#include <utf8proc.h>

/* ids: 0 checks only the round trip (the vocabulary is not the one the vectors were made for). */
static void run_vectors(const char *tok_path, const char *vec, int nfc_lossy, int ids_too)
{
    char path[1024];
    tcq_tokenizer *tok = NULL;
    CHECK_OK(tcq_tokenizer_load(tok_path, &tok));
    if (!tok) return;
    if (!ids_too) fprintf(stderr, "%s: round trip only\n", tok_path);
    snprintf(path, sizeof path, "%s/tokenizers/llamacpp-vectors/%s.inp", TEST_REPO_DATA, vec);
    char *inp = test_slurp(path, NULL);
    snprintf(path, sizeof path, "%s/tokenizers/llamacpp-vectors/%s.out", TEST_REPO_DATA, vec);
    char *outp = test_slurp(path, NULL);
    CHECK(inp && outp, "cannot read %s", path);
    if (!inp || !outp) return;
    const char *sep = "\n__ggml_vocab_test__\n";
    char *p = inp, *line = outp;
    int n_cases = 0, n_ok = 0, n_rt = 0;
    for (char *q; (q = strstr(p, sep)); p = q + strlen(sep)) {
        size_t len = (size_t)(q - p);
        char *eol = strchr(line, '\n');
        if (!eol) break;
        *eol = 0;
        int32_t want[4096];
        int nw = 0;
        for (char *s = line, *e; nw < 4096; s = e) {
            long v = strtol(s, &e, 10);
            if (e == s) break;
            want[nw++] = (int32_t)v;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_OK(tcq_tokenizer_encode_alloc(tok, p, len, 0, &ids, &n));
        int same = ids && (int)n == nw && memcmp(ids, want, n * sizeof *ids) == 0;
        CHECK(same || !ids_too, "%s case %d (\"%.*s\"): %zu ids, want %d", vec, n_cases, (int)(len < 60 ? len : 60), p, n, nw);
        if (!same && ids && ids_too) {
            fprintf(stderr, "  got :");
            for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n  want: %s\n", line);
        }
        n_ok += same;
        /* round trip, where normalization leaves the text as it is */
        char *text = NULL;
        size_t tl = 0;
        CHECK_OK(tcq_tokenizer_decode(tok, ids, n, 0, &text, &tl));
        int lossless = 1;
        if (nfc_lossy && len) {
            char *z = malloc(len + 1);
            memcpy(z, p, len);
            z[len] = 0;
            utf8proc_uint8_t *nfc = utf8proc_NFC((const utf8proc_uint8_t *)z);
            lossless = nfc && strcmp((char *)nfc, z) == 0;
            free(nfc);
            free(z);
        }
        if (lossless && text) {
            CHECK(tl == len && memcmp(text, p, len) == 0, "%s case %d: round trip gave \"%s\"", vec, n_cases, text);
            n_rt++;
        }
        free(text);
        free(ids);
        line = eol + 1;
        n_cases++;
    }
    fprintf(stderr, "%s: %d/%d exact, %d round trips checked\n", vec, n_ok, n_cases, n_rt);
    CHECK(n_cases >= 40, "%s: only %d cases parsed", vec, n_cases);
    free(inp);
    free(outp);
    tcq_tokenizer_free(tok);
}

int main(void)
{
    run_vectors(TEST_REPO_DATA "/tokenizers/qwen3/tokenizer.json", "ggml-vocab-qwen2.gguf", 1, 1);
    /* The shared llama2/tokenizer.json holds Mistral 7B's vocabulary ("\u2581Hello" = 22557, not
     * Llama 2's 15043), so the llama-spm ids can only be checked where the file is Llama 2's. */
    tcq_tokenizer *l2 = NULL;
    CHECK_OK(tcq_tokenizer_load(TEST_REPO_DATA "/tokenizers/llama2/tokenizer.json", &l2));
    int is_llama2 = l2 && tcq_tokenizer_find(l2, "\xE2\x96\x81Hello") == 15043;
    tcq_tokenizer_free(l2);
    if (!is_llama2) fprintf(stderr, "NOTE: shared llama2/tokenizer.json is not Llama 2's vocabulary\n");
    run_vectors(TEST_REPO_DATA "/tokenizers/llama2/tokenizer.json", "ggml-vocab-llama-spm.gguf", 0, is_llama2);
    /* Llama 2's vocabulary restricted to these inputs (tests/ref/gen_llama2_spm_subset.py, from
     * llama.cpp's ggml-vocab-llama-spm.gguf) with the shared file's normalizer and decoder. */
    run_vectors(TCQ_SOURCE_DIR "/tests/data/tokenizers/llama2-spm-subset.json", "ggml-vocab-llama-spm.gguf", 0, 1);
    return test_done("test_tokenizer_vectors");
}
