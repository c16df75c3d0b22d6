#!/usr/bin/env python3
"""A bf16 safetensors model of Qwen3-14B geometry for the quantizer's memory check
(docs/PERFORMANCE.md, "Quantizer: memory").  Usage:
    synth_qwen3_14b.py OUT_DIR TOKENIZER_JSON [RANDOM_LAYERS]
The embedding and the first RANDOM_LAYERS (default 4) decoder layers get random weights
(N(0, 1/in), embedding N(0, 1)); norms are 1; every other tensor is zero and left as a hole
in the file (sparse: ~28 GB apparent, ~3 GB on disk for 4 layers).  Standard library only (no
numpy here): a random value is a random sign and mantissa with its exponent drawn from two
neighbours, so |w| is spread over [2^-7, 2^-5) for the projections (RMS ~0.017, near
1/sqrt(5120) = 0.014) and [0.5, 2) for the embedding."""
import json, os, random, shutil, sys

DIM, FFN, HEADS, KV, HD, VOCAB, LAYERS = 5120, 17408, 40, 8, 128, 151936, 40

def tensors():
    t = {"model.embed_tokens.weight": (VOCAB, DIM), "lm_head.weight": (VOCAB, DIM), "model.norm.weight": (DIM,)}
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = (DIM,)
        t[p + "post_attention_layernorm.weight"] = (DIM,)
        t[p + "self_attn.q_norm.weight"] = (HD,)
        t[p + "self_attn.k_norm.weight"] = (HD,)
        t[p + "self_attn.q_proj.weight"] = (HEADS * HD, DIM)
        t[p + "self_attn.k_proj.weight"] = (KV * HD, DIM)
        t[p + "self_attn.v_proj.weight"] = (KV * HD, DIM)
        t[p + "self_attn.o_proj.weight"] = (DIM, HEADS * HD)
        t[p + "mlp.gate_proj.weight"] = (FFN, DIM)
        t[p + "mlp.up_proj.weight"] = (FFN, DIM)
        t[p + "mlp.down_proj.weight"] = (DIM, FFN)
    return t

def prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n

def hi_table(top):
    """High byte of a bf16 (sign, exponent bits 7..1) -> the sign kept, the exponent bits set to top."""
    return bytes((b & 0x80) | top for b in range(256))

def random_bf16(rng, n, table):
    buf = bytearray(rng.randbytes(2 * n))
    buf[1::2] = buf[1::2].translate(table)   # little-endian: odd bytes are the high ones
    return buf

def main():
    out, tok = sys.argv[1], sys.argv[2]
    n_rand = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    os.makedirs(out, exist_ok=True)
    ts = tensors()
    names = sorted(ts)
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    for n in names:
        nb = prod(ts[n]) * 2
        hdr[n] = {"dtype": "BF16", "shape": list(ts[n]), "data_offsets": [off, off + nb]}
        off += nb
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    rng = random.Random(1)
    w_tab, e_tab = hi_table(0x3c), hi_table(0x3f)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        base = f.tell()
        for n in names:
            shape = ts[n]
            start = base + hdr[n]["data_offsets"][0]
            layer = int(n.split(".")[2]) if n.startswith("model.layers.") else -1
            if len(shape) == 1:
                f.seek(start)
                f.write(b"\x80\x3f" * shape[0])   # bf16 1.0
            elif n == "model.embed_tokens.weight" or 0 <= layer < n_rand:
                tab = e_tab if layer < 0 else w_tab
                f.seek(start)
                for r0 in range(0, shape[0], 2048):   # in slices: bounded memory
                    rows = min(2048, shape[0] - r0)
                    f.write(random_bf16(rng, rows * shape[1], tab))
        f.truncate(base + off)   # the zero tensors stay holes
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": DIM,
           "intermediate_size": FFN, "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": HD,
           "num_hidden_layers": LAYERS, "vocab_size": VOCAB, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
           "max_position_embeddings": 40960, "tie_word_embeddings": False, "hidden_act": "silu",
           "torch_dtype": "bfloat16", "attention_bias": False}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    shutil.copy(tok, os.path.join(out, "tokenizer.json"))

if __name__ == "__main__":
    main()
