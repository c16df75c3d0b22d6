/* Internal pieces of the quantize driver. */
#ifndef TCQ_QUANT_H
#define TCQ_QUANT_H

#include "../core/internal.h"

#include <jansson.h>

/* What the fold does with a tensor of a Llama / Qwen3 checkpoint. */
typedef enum qrole {
    QR_UNKNOWN = 0,
    QR_EMBED,          /* model.embed_tokens.weight: rows R^T e */
    QR_LM_HEAD,        /* lm_head.weight: final norm folded, W R */
    QR_NORM,           /* input / post-attention / final RMSNorm: folded away, becomes 1 */
    QR_HEAD_NORM,      /* q_norm / k_norm: in head space, copied */
    QR_READER,         /* q/k/v/gate/up: gain folded, W R, coded axis 1 */
    QR_WRITER,         /* o/down: R^T W, coded axis 0 (stored transposed) */
    QR_BIAS_READER,    /* bias of a reader: in its output space, copied */
    QR_BIAS_WRITER,    /* bias of a writer: lives in the residual stream, R^T b */
    QR_SKIP,           /* rotary_emb.inv_freq of old checkpoints: recomputed by runtimes */
} qrole;

/* Role of a tensor name; for readers, gain receives the name of the norm folded into it. */
qrole tcq_quant_role(const char *name, char *gain, size_t gain_size);

/* Load a F32/F16/BF16 tensor as f32 (malloc'd). Names the file and tensor on failure. */
tcq_status tcq_quant_load_f32(const tcq_tensor_info *t, float **out);

/* out_dir/config.json: the input config with tie_word_embeddings false and the quantization
 * object (mirrored as quantization_config; qobj NULL: neither, a plain dense model). */
tcq_status tcq_quant_write_config(const json_t *in_config, json_t *qobj, const char *path);
/* A trellis entry {"bits":k,"group_size":T,"mode":"trellis","trellis":{"L":L,"code":"1mad","axis":a}}. */
json_t *tcq_quant_entry(int k, int T, int L, int axis);
/* Copy the tokenizer files that exist in in_dir to out_dir. */
tcq_status tcq_quant_copy_tokenizer(const char *in_dir, const char *out_dir);

#endif
