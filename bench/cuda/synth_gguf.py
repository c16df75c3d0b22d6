#!/usr/bin/env python3
"""A GGUF with random weights in the synthetic Qwen3-14B geometry of `tcq bench model` (issue 25's
side by side with llama.cpp): written with llama.cpp's own gguf-py, never run through its quantizer.

    PYTHONPATH=<llama.cpp>/gguf-py python3 bench/cuda/synth_gguf.py OUT.gguf TYPE [--layers 40]

TYPE: IQ2_XXS, IQ3_XXS, Q4_K (or any type whose blocks start with fp16 scales listed below), or
F16 / BF16 (random values of magnitude [2^-7, 2^-6), random signs: issue 27's dense side by side).
--vocab V sets the vocabulary (default 151936); --tokenizer DIR writes DIR/tokenizer.json's BPE
vocabulary, merges and chat template (ids past it are [PAD<i>]) so llama-server can tokenize
(issue 24's side by side); without it the vocabulary is "none" (llama-bench draws random ids).  The
projections' blocks are random bytes with their fp16 scale fields set to small positive normal
values (quantizing 28 GB of bf16 would take longer than the device call); q/k/v/o and the MLP all
in TYPE, norms f32 ones.  token_embd is bf16 and tied (no output.weight), like tcq's bench model
(its output projection is the tied bf16 embedding table), so both engines read the same 1.56 GB
output matrix per token.  One random block set per tensor kind is reused for every layer (the
bytes differ from layer to layer only in place; no kernel's speed depends on their values).
"""
import argparse
import json
import os
import sys

import numpy as np
import gguf

DIM, FFN, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 5120, 17408, 40, 8, 128, 151936

# byte offsets of the fp16 scale fields inside one block
SCALE_FIELDS = {"IQ2_XXS": (0,), "IQ3_XXS": (0,), "Q4_K": (0, 2), "IQ2_XS": (0,), "Q2_K": (80, 82), "Q3_K": (108,),
                "IQ4_XS": (0,), "Q8_0": (0,)}


def random_blocks(rng, qtype, rows, cols, fields):
    blk, size = gguf.GGML_QUANT_SIZES[qtype]
    assert cols % blk == 0
    nb = cols // blk
    a = np.frombuffer(rng.bytes(rows * nb * size), dtype=np.uint8).copy().reshape(rows * nb, size)
    # fp16 in [2^-9, 2^-8): exponent 6, random mantissa, positive
    for off in fields:
        h = (0x1800 | (rng.integers(0, 1024, rows * nb, dtype=np.uint16))).astype("<u2")
        a[:, off:off + 2] = h.view(np.uint8).reshape(-1, 2)
    return a.reshape(rows, nb * size)


def random_dense(rng, qtype, rows, cols):
    """f16 / bf16 bits with magnitude in [2^-7, 2^-6) and random signs and mantissas."""
    bits = np.frombuffer(rng.bytes(rows * cols * 2), dtype="<u2")
    if qtype == gguf.GGMLQuantizationType.F16:
        bits = (bits & 0x83FF) | 0x2000
    else:
        bits = (bits & 0x807F) | 0x3C00
    return bits.astype("<u2").reshape(rows, cols)


def add_tokenizer(w, path, vocab):
    tj = json.load(open(os.path.join(path, "tokenizer.json"), encoding="utf-8"))
    tokens = [f"[PAD{i}]" for i in range(vocab)]
    types = [gguf.TokenType.UNUSED] * vocab
    for tok, i in tj["model"]["vocab"].items():
        tokens[i], types[i] = tok, gguf.TokenType.NORMAL
    for t in tj.get("added_tokens", []):
        tokens[t["id"]] = t["content"]
        types[t["id"]] = gguf.TokenType.CONTROL if t.get("special") else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    ids = {t["content"]: t["id"] for t in tj.get("added_tokens", [])}
    w.add_eos_token_id(ids.get("<|im_end|>", ids.get("<|endoftext|>", 0)))
    w.add_pad_token_id(ids.get("<|endoftext|>", 0))
    w.add_add_bos_token(False)
    cfg = os.path.join(path, "tokenizer_config.json")
    if os.path.exists(cfg):
        tmpl = json.load(open(cfg, encoding="utf-8")).get("chat_template")
        if isinstance(tmpl, str):
            w.add_chat_template(tmpl)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("type")
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--vocab", type=int, default=VOCAB)
    ap.add_argument("--tokenizer", help="a directory with tokenizer.json (and tokenizer_config.json)")
    a = ap.parse_args()
    qt = gguf.GGMLQuantizationType[a.type]
    dense = qt in (gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.BF16)
    fields = None if dense else SCALE_FIELDS[a.type]
    rng = np.random.default_rng(25)
    w = gguf.GGUFWriter(a.out, "qwen3")
    w.add_name(f"synthetic-qwen3-14b-{a.type}")
    w.add_context_length(40960)
    w.add_embedding_length(DIM)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type({"IQ2_XXS": gguf.LlamaFileType.MOSTLY_IQ2_XXS, "IQ3_XXS": gguf.LlamaFileType.MOSTLY_IQ3_XXS,
                     "Q4_K": gguf.LlamaFileType.MOSTLY_Q4_K_M, "F16": gguf.LlamaFileType.MOSTLY_F16}
                    .get(a.type, gguf.LlamaFileType.MOSTLY_BF16))
    if a.tokenizer:
        add_tokenizer(w, a.tokenizer, a.vocab)
    else:  # llama.cpp's "none" vocabulary with a.vocab dummy tokens (llama-bench draws random ids)
        w.add_tokenizer_model("none")
    w.add_uint32("qwen3.vocab_size", a.vocab)
    # embeddings in [2^-7, 2^-6) with random signs: f16 in an F16 model (as tcq's synthetic f16), else bf16
    et = qt if qt == gguf.GGMLQuantizationType.F16 else gguf.GGMLQuantizationType.BF16
    w.add_tensor("token_embd.weight", random_dense(rng, et, a.vocab, DIM), raw_dtype=et)
    ones = np.ones(DIM, dtype=np.float32)
    w.add_tensor("output_norm.weight", ones)
    shapes = {"attn_q": (HEADS * HEAD_DIM, DIM), "attn_k": (KV_HEADS * HEAD_DIM, DIM),
              "attn_v": (KV_HEADS * HEAD_DIM, DIM), "attn_output": (DIM, HEADS * HEAD_DIM),
              "ffn_gate": (FFN, DIM), "ffn_up": (FFN, DIM), "ffn_down": (DIM, FFN)}
    blocks = {k: random_dense(rng, qt, r, c) if dense else random_blocks(rng, qt, r, c, fields)
              for k, (r, c) in shapes.items()}
    hd_ones = np.ones(HEAD_DIM, dtype=np.float32)
    for l in range(a.layers):
        w.add_tensor(f"blk.{l}.attn_norm.weight", ones)
        w.add_tensor(f"blk.{l}.ffn_norm.weight", ones)
        w.add_tensor(f"blk.{l}.attn_q_norm.weight", hd_ones)
        w.add_tensor(f"blk.{l}.attn_k_norm.weight", hd_ones)
        for k, (r, c) in shapes.items():
            w.add_tensor(f"blk.{l}.{k}.weight", blocks[k], raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{a.out}: {a.type}, {a.layers} layers", file=sys.stderr)


if __name__ == "__main__":
    main()
