#!/usr/bin/env python3
"""Reference token ids and chat renderings from Hugging Face tokenizers/transformers (run where
they are installed: the device machine).  Reads DATA_DIR laid out like ../shared/data (only the
tokenizer folders, tinyqwen/valid.txt, the llama.cpp .inp file and tests/data/chat/cases.json are
needed) and writes OUT_DIR/hf_reference.json:
  tokenizers[name] = {"vectors": [ids per llama.cpp input, add_special_tokens=False],
                      "valid_ids": ids of the whole valid.txt (no special tokens),
                      "auto_hello": AutoTokenizer(dir).encode("Hello world") (special tokens added),
                      "decode_hello": AutoTokenizer decode of that with skip_special_tokens=True}
  chat[case name] = apply_chat_template(..., tokenize=False) for the qwen3/tinyqwen cases
usage: gen_hf_reference.py DATA_DIR CASES_JSON OUT_DIR
"""
import json
import os
import sys

import tokenizers
import transformers

TOKENIZERS = {"qwen3": "tokenizers/qwen3", "llama2": "tokenizers/llama2", "tinyqwen": "tinyqwen"}


def main():
    data, cases_path, out = sys.argv[1:4]
    inputs = open(os.path.join(data, "tokenizers/llamacpp-vectors/ggml-vocab-qwen2.gguf.inp"),
                  encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
    valid = open(os.path.join(data, "tinyqwen/valid.txt"), encoding="utf-8").read()
    res = {"versions": {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__},
           "tokenizers": {}, "chat": {}}
    autos = {}
    for name, sub in TOKENIZERS.items():
        d = os.path.join(data, sub)
        tok = tokenizers.Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        r = {"vectors": [tok.encode(t, add_special_tokens=False).ids for t in inputs],
             "valid_ids": tok.encode(valid, add_special_tokens=False).ids}
        try:
            auto = transformers.AutoTokenizer.from_pretrained(d)
            autos[name] = auto
            ids = auto.encode("Hello world")
            r["auto_hello"] = ids
            r["decode_hello"] = auto.decode(ids, skip_special_tokens=True)
            r["auto_class"] = type(auto).__name__
        except Exception as e:  # report, do not stop the other references
            r["auto_error"] = repr(e)
        res["tokenizers"][name] = r
    cases = json.load(open(cases_path, encoding="utf-8"))["cases"]
    for c in cases:
        if c["template"] not in autos or "error" in c:
            continue
        kw = {}
        if c["enable_thinking"] >= 0:
            kw["enable_thinking"] = bool(c["enable_thinking"])
        try:
            res["chat"][c["name"]] = autos[c["template"]].apply_chat_template(
                c["messages"], tools=c.get("tools"), tokenize=False,
                add_generation_prompt=c["add_generation_prompt"], **kw)
        except Exception as e:
            res["chat"][c["name"]] = "ERROR: " + repr(e)
    with open(os.path.join(out, "hf_reference.json"), "w", encoding="utf-8") as f:
        json.dump(res, f, ensure_ascii=False)
    print({k: (len(v["vectors"]), len(v["valid_ids"]), v.get("auto_hello"), v.get("auto_class"), v.get("auto_error"))
           for k, v in res["tokenizers"].items()})
    print(len(res["chat"]), "chat renderings")


if __name__ == "__main__":
    main()
