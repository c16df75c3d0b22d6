"""Make tests/data/tiny_chat_tok: the first 512 tokens of ../shared/data/tinyqwen's byte-level BPE
tokenizer (3 specials, 256 bytes, the first 253 merges) and its chat template, so that
tests/data/tiny_qwen3 (vocab 512) can be driven by text without ../shared (tcq serve's tests).

    /usr/bin/python3 tests/ref/gen_tiny_chat_tok.py ../shared/data/tinyqwen tests/data/tiny_chat_tok

Only the standard library; the output is deterministic."""
import json
import os
import sys

N = 512
src, dst = sys.argv[1], sys.argv[2]
tok = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
vocab = {p: i for p, i in tok["model"]["vocab"].items() if i < N}
merges = []
for m in tok["model"]["merges"]:
    a, b = m if isinstance(m, list) else m.split(" ", 1)
    if a in vocab and b in vocab and a + b in vocab:
        merges.append([a, b])
tok["model"]["vocab"] = vocab
tok["model"]["merges"] = merges
tok["added_tokens"] = [t for t in tok["added_tokens"] if t["id"] < N]
assert len(vocab) == N, len(vocab)
os.makedirs(dst, exist_ok=True)
with open(os.path.join(dst, "tokenizer.json"), "w", encoding="utf-8") as f:
    json.dump(tok, f, ensure_ascii=False, indent=1)
    f.write("\n")
cfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
cfg = {k: v for k, v in cfg.items() if k != "added_tokens_decoder"}
cfg["model_max_length"] = 256
cfg["chat_template"] = open(os.path.join(src, "chat_template.jinja"), encoding="utf-8").read()
with open(os.path.join(dst, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump(cfg, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(f"{dst}: {len(vocab)} tokens, {len(merges)} merges")
