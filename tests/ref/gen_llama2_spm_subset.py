#!/usr/bin/env python3
"""Build tests/data/tokenizers/llama2-spm-subset.json: the Llama 2 tokenizer restricted to what
llama.cpp's llama-spm test inputs can reach.

Why: ../shared/data/tokenizers/llama2/tokenizer.json holds Mistral 7B's vocabulary, not Llama 2's,
so llama.cpp's ggml-vocab-llama-spm vectors (made with Llama 2's tokenizer) cannot match it.
The Llama 2 vocabulary and scores are in llama.cpp's models/ggml-vocab-llama-spm.gguf.  This
script rebuilds the tokenizer.json merges the way transformers' SentencePieceExtractor does
(every split l+r of a vocabulary piece whose halves are pieces, ordered by the piece's score,
ties by (id(l), id(r))), keeping only pieces that occur in the normalized inputs (plus <unk>,
<s>, </s> and the 256 byte tokens).  BPE merges only ever build substrings of the word, so the
subset tokenizes those inputs exactly as the full one does.  Ids are the original ids.

usage: gen_llama2_spm_subset.py ggml-vocab-llama-spm.gguf VECTORS.inp SHARED_LLAMA2_TOKENIZER.json OUT.json
"""
import json
import struct
import sys


def read_gguf_kv(path):
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n].decode("utf-8")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t in scalar:
            return take(scalar[t])
        if t == 8:
            return string()
        if t == 9:
            et = take("I")
            n = take("Q")
            return [value(et) for _ in range(n)]
        raise ValueError("gguf type %d" % t)

    assert data[:4] == b"GGUF"
    pos = 4
    take("I")  # version
    take("Q")  # tensors
    n_kv = take("Q")
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take("I"))
    return kv


def main():
    gguf, inp, shared, out = sys.argv[1:5]
    kv = read_gguf_kv(gguf)
    tokens = kv["tokenizer.ggml.tokens"]
    scores = kv["tokenizer.ggml.scores"]
    types = kv["tokenizer.ggml.token_type"]
    assert tokens[15043] == "\u2581Hello", "not the Llama 2 vocabulary"
    texts = open(inp, encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
    norm = ["\u2581" + t.replace(" ", "\u2581") for t in texts if t]
    keep = set(range(259))  # <unk>, <s>, </s>, <0x00>..<0xFF>
    for i, t in enumerate(tokens):
        if types[i] == 1 and any(t in s for s in norm):
            keep.add(i)
    vocab = {tokens[i]: i for i in sorted(keep)}
    merges = []
    for i in sorted(keep):
        if types[i] != 1:
            continue
        m = tokens[i]
        local = [(m[:k], m[k:]) for k in range(1, len(m)) if m[:k] in vocab and m[k:] in vocab]
        local.sort(key=lambda p: (vocab[p[0]], vocab[p[1]]))
        merges.extend((l, r, scores[i]) for l, r in local)
    merges.sort(key=lambda x: x[2], reverse=True)  # stable: ties keep the order above
    base = json.load(open(shared, encoding="utf-8"))
    doc = {
        "version": "1.0",
        "added_tokens": base["added_tokens"],
        "normalizer": base["normalizer"],
        "pre_tokenizer": base["pre_tokenizer"],
        "post_processor": base["post_processor"],
        "decoder": base["decoder"],
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "vocab": vocab, "merges": [[l, r] for l, r, _ in merges]},
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print("%s: %d pieces, %d merges" % (out, len(vocab), len(merges)))


if __name__ == "__main__":
    main()
