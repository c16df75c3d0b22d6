/* llama2.c checkpoints (run.c's legacy format): a header of 7 int32 (dim, hidden_dim, n_layers,
 * n_heads, n_kv_heads, vocab_size, seq_len; vocab_size < 0 means an untied classifier), then f32
 * tensors in run.c's order.  The file is mmapped and the tensors used in place.  llama2.c rotates
 * interleaved pairs (2i, 2i+1), so the model keeps that RoPE layout instead of permuting q/k. */
#include "model/model.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static tcq_weight dense_f32(const float *p, int64_t out, int64_t in)
{
    tcq_weight w;
    memset(&w, 0, sizeof w);
    w.fmt = TCQ_WF_F32;
    w.out = out;
    w.in = in;
    w.dense = p;
    return w;
}

tcq_status tcq_model_load_llama2c(tcq_model *m, const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return tcq_fail(TCQ_ERR_IO, "%s: cannot open", path);
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 28) {
        close(fd);
        return tcq_fail(TCQ_ERR_FORMAT, "%s: too short for a llama2.c header", path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return tcq_fail(TCQ_ERR_IO, "%s: mmap failed", path);
    m->map = map;
    m->map_len = (size_t)st.st_size;

    int32_t h[7];
    memcpy(h, map, sizeof h);
    tcq_model_config *c = &m->cfg;
    memset(c, 0, sizeof *c);
    c->arch = TCQ_ARCH_LLAMA;
    c->dim = h[0];
    c->hidden_dim = h[1];
    c->n_layers = h[2];
    c->n_heads = h[3];
    c->n_kv_heads = h[4];
    c->tied_embeddings = h[5] > 0;
    /* negative means untied; INT32_MIN has no positive twin and becomes 0, rejected below */
    c->vocab_size = h[5] == INT32_MIN ? 0 : h[5] < 0 ? -h[5] : h[5];
    c->max_seq = h[6];
    for (int i = 0; i < 7; i++)
        if (i != 5 && (h[i] <= 0 || h[i] > (1 << 20)))
            return tcq_fail(TCQ_ERR_FORMAT, "%s: llama2.c header field %d = %d out of range", path, i, h[i]);
    if (c->vocab_size <= 0 || c->vocab_size > (1 << 24) || c->dim % c->n_heads || c->n_heads % c->n_kv_heads ||
        (c->dim / c->n_heads) % 2)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: inconsistent llama2.c header", path);
    c->head_dim = c->dim / c->n_heads;
    c->norm_eps = 1e-5f;
    c->rope_theta = 10000.0;
    c->rope_interleaved = 1;
    c->bos_id = 1;
    /* EOS 2; run.c also ends a story when the model emits BOS (1). */
    c->n_eos = 2;
    c->eos_ids[0] = 2;
    c->eos_ids[1] = 1;

    const int64_t d = c->dim, hd = c->hidden_dim, L = c->n_layers, V = c->vocab_size;
    const int64_t kvd = (int64_t)c->n_kv_heads * c->head_dim, S = c->max_seq;
    /* The size the header implies, first in double: absurd headers must not overflow int64. */
    const double needd = (double)V * d * (c->tied_embeddings ? 1 : 2) + (double)L * d * (2.0 + 2 * d + 2 * kvd + 3 * hd) +
                         d + (double)S * c->head_dim;
    if (28 + 4 * needd > (double)m->map_len)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: truncated: %zu bytes, the header implies %.0f", path, m->map_len,
                        28 + 4 * needd);
    const int64_t need = V * d + L * d + L * d * d + 2 * L * d * kvd + L * d * d + L * d + 3 * L * d * hd + d +
                         S * c->head_dim + (c->tied_embeddings ? 0 : V * d);

    const float *p = (const float *)((const char *)map + 28);
    m->layers = calloc((size_t)L, sizeof *m->layers);
    if (!m->layers) return tcq_fail(TCQ_ERR_NOMEM, "model: out of memory");
    m->emb = dense_f32(p, V, d);
    p += V * d;
    for (int64_t l = 0; l < L; l++) m->layers[l].attn_norm = p + l * d;
    p += L * d;
    for (int64_t l = 0; l < L; l++) m->layers[l].wq = dense_f32(p + l * d * d, d, d);
    p += L * d * d;
    for (int64_t l = 0; l < L; l++) m->layers[l].wk = dense_f32(p + l * d * kvd, kvd, d);
    p += L * d * kvd;
    for (int64_t l = 0; l < L; l++) m->layers[l].wv = dense_f32(p + l * d * kvd, kvd, d);
    p += L * d * kvd;
    for (int64_t l = 0; l < L; l++) m->layers[l].wo = dense_f32(p + l * d * d, d, d);
    p += L * d * d;
    for (int64_t l = 0; l < L; l++) m->layers[l].ffn_norm = p + l * d;
    p += L * d;
    for (int64_t l = 0; l < L; l++) m->layers[l].gate = dense_f32(p + l * d * hd, hd, d);
    p += L * d * hd;
    for (int64_t l = 0; l < L; l++) m->layers[l].down = dense_f32(p + l * d * hd, d, hd);
    p += L * d * hd;
    for (int64_t l = 0; l < L; l++) m->layers[l].up = dense_f32(p + l * d * hd, hd, d);
    p += L * d * hd;
    m->final_norm = p;
    p += d;
    p += S * c->head_dim; /* freq_cis_real and freq_cis_imag, [S, head_dim/2] each: unused */
    m->lm_head = c->tied_embeddings ? m->emb : dense_f32(p, V, d);
    m->weight_bytes = (size_t)need * 4 - (size_t)S * c->head_dim * 4;
    snprintf(m->describe, sizeof m->describe, "f32 (llama2.c checkpoint)");
    return TCQ_OK;
}
