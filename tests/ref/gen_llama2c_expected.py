#!/usr/bin/env python3
"""Expected ids for llama2.c's tokenizer (tok512.bin): a direct transcription of run.c's encode()
(dummy-prefix space, code points, byte fallback +3, then repeatedly merge the adjacent pair whose
concatenation has the highest score, leftmost on ties).  Writes one line per case:
    <ids with BOS, space separated>\t<text as a JSON string>
usage: gen_llama2c_expected.py tok512.bin OUT.txt
"""
import json
import struct
import sys

TEXTS = [
    "Once upon a time",
    "Lily's mom said, \"Lily, let's go to the park.\"",
    "Hello world!\nA new line, and  two spaces.",
    "caf\u00e9 na\u00efve \u2014 \U0001F600 emoji",
    "x",
    "   leading spaces",
    "The quick brown fox jumps over the lazy dog 1234567890.",
]


def load(path):
    data = open(path, "rb").read()
    pos = 4
    vocab, scores = [], []
    while pos < len(data):
        score, n = struct.unpack_from("<fi", data, pos)
        pos += 8
        vocab.append(data[pos:pos + n])
        scores.append(score)
        pos += n
    return vocab, scores


def encode(text, vocab, scores):
    lookup = {}
    for i, v in enumerate(vocab):
        lookup.setdefault(v, i)
    raw = text.encode("utf-8")
    tokens = [1]
    if raw:
        tokens.append(lookup[b" "])
    i = 0
    while i < len(raw):
        j = i + 1
        while j < len(raw) and (raw[j] & 0xC0) == 0x80 and j - i < 4:
            j += 1
        cp = raw[i:j]
        if cp in lookup:
            tokens.append(lookup[cp])
        else:
            tokens.extend(b + 3 for b in cp)
        i = j
    while True:
        best, best_id, best_i = -1e10, -1, -1
        for k in range(len(tokens) - 1):
            m = vocab[tokens[k]] + vocab[tokens[k + 1]]
            if m in lookup and scores[lookup[m]] > best:
                best, best_id, best_i = scores[lookup[m]], lookup[m], k
        if best_i < 0:
            break
        tokens[best_i:best_i + 2] = [best_id]
    return tokens


def main():
    vocab, scores = load(sys.argv[1])
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        for t in TEXTS:
            f.write(" ".join(map(str, encode(t, vocab, scores))) + "\t" + json.dumps(t) + "\n")


if __name__ == "__main__":
    main()
