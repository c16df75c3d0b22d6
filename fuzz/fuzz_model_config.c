/* libFuzzer target: config.json -> tcq_model_config.  What parses must be consistent (the checks
 * the forward relies on), and the llama2.c checkpoint loader must reject or accept a file made of
 * the same bytes without crashing. */
#include "tcq.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tcq_model_config c;
    if (tcq_model_config_parse((const char *)data, size, "fuzz.json", &c) == TCQ_OK) {
        if (c.dim < 1 || c.n_heads < 1 || c.n_kv_heads < 1 || c.n_heads % c.n_kv_heads || c.head_dim < 2 ||
            c.head_dim % 2 || c.vocab_size < 1 || c.n_layers < 1 || !(c.rope_theta > 1) || c.n_eos < 0 ||
            c.n_eos > TCQ_MAX_EOS || (c.arch != TCQ_ARCH_LLAMA && c.arch != TCQ_ARCH_QWEN3))
            abort();
    }
    /* The same bytes as a llama2.c checkpoint. */
    char path[64];
    snprintf(path, sizeof path, "/tmp/tcq_fuzz_%d.bin", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    tcq_model *m = NULL;
    tcq_model_opts o = {.n_threads = 1};
    if (tcq_model_load(path, &o, &m) == TCQ_OK) {
        tcq_session *s = NULL;
        if (tcq_session_create(m, 4, TCQ_KV_F32, &s) == TCQ_OK) {
            int32_t t = 0;
            float *lg = malloc(sizeof(float) * (size_t)tcq_model_get_config(m)->vocab_size);
            if (lg) tcq_model_forward(m, s, &t, 1, lg);
            free(lg);
            tcq_session_free(s);
        }
        tcq_model_free(m);
    }
    unlink(path);
    return 0;
}
