#!/usr/bin/env python3
"""Reference data for tcq's parity tests, produced with Hugging Face transformers + PyTorch.

Not part of the build or of CI: its outputs are committed under tests/data/ (see
tests/data/README.md) and the C tests read those files.  Re-run it only to regenerate them.

Two steps, because the machine with PyTorch (the device machine) cannot see ../shared:

  1. Here (stdlib only): bundle the inputs from the shared data folder, gzipping text files so
     the bundle stays under the 64 MiB a device run may carry:
         python3 tests/ref/gen_reference.py pack DEST [--shared ../shared/data]
  2. Where torch + transformers are installed (inputs either a bundle from step 1 or the shared
     data folder itself; *.gz files are unpacked to a temporary folder on the fly):
         python3 gen_reference.py gen --inputs DEST --out OUTDIR [--tar FILE.tar.gz]
     OUTDIR then mirrors tests/data/ (tiny_llama/, tiny_qwen3/, tinyqwen_ref/, stories260K_ref/,
     chat_hf/, tokenizer_hf/, gen_info.json).

What "gen" computes (all seeded, f32 on the CPU unless stated):
  * tiny_llama, tiny_qwen3: small random models built from configs (hidden 256, GQA, random
    norm gains), stored in bf16; reference logits computed in f32 from the stored (bf16-rounded)
    weights, after loading the saved directory back with from_pretrained.
  * tinyqwen: f32 logits for 32 tokens; perplexity on valid.txt (64 non-overlapping windows of
    512 tokens, NLL of positions 1..511 of each) in f32 (CPU) and bf16 (GPU if present).
  * stories260K (HF copy): greedy generation from BOS, f32 logits for BOS + 31 greedy tokens.
  * Chat templates and tokenizer vectors rendered by transformers' tokenizers.
Each part runs on its own; a part that fails is reported in gen_info.json["errors"] and the
others still produce their files.
"""
import argparse
import copy
import gzip
import json
import math
import os
import shutil
import sys
import tarfile
import tempfile
import time
import traceback

T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


# ---------------------------------------------------------------------------------------------
# pack (stdlib only)

PACK_FILES = {
    # shared-data relative path: gzip it?
    "tinyqwen/config.json": False,
    "tinyqwen/generation_config.json": False,
    "tinyqwen/model.safetensors.index.json": False,
    "tinyqwen/tokenizer.json": True,
    "tinyqwen/tokenizer_config.json": False,
    "tinyqwen/chat_template.jinja": False,
    "tinyqwen/valid.txt": True,
    "stories260K/hf/config.json": False,
    "stories260K/hf/model.safetensors": False,
    "stories260K/tok512.model": False,
    "stories260K/stories260K.expected.txt": False,
    "tokenizers/qwen3/tokenizer.json": True,
    "tokenizers/qwen3/tokenizer_config.json": False,
}


def cmd_pack(args):
    shared = args.shared
    files = dict(PACK_FILES)
    for name in sorted(os.listdir(os.path.join(shared, "tinyqwen"))):
        if name.endswith(".safetensors"):
            files["tinyqwen/" + name] = False
    total = 0
    for rel, gz in sorted(files.items()):
        src = os.path.join(shared, rel)
        dst = os.path.join(args.dest, rel + (".gz" if gz else ""))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if gz:
            with open(src, "rb") as f, gzip.open(dst, "wb", compresslevel=9) as g:
                shutil.copyfileobj(f, g)
        else:
            shutil.copyfile(src, dst)
        total += os.path.getsize(dst)
        print(f"{os.path.getsize(dst):10d}  {rel}{'.gz' if gz else ''}")
    print(f"{total:10d}  total ({total / 2**20:.1f} MiB)")


# ---------------------------------------------------------------------------------------------
# gen helpers

def inputs_dir(root, rel, tmp):
    """Directory root/rel with any *.gz unpacked: a temporary copy where needed."""
    src = os.path.join(root, rel)
    names = sorted(os.listdir(src))
    if not any(n.endswith(".gz") for n in names):
        return src
    dst = os.path.join(tmp, rel)
    if os.path.isdir(dst):  # unpacked by an earlier part
        return dst
    os.makedirs(dst)
    for n in names:
        p = os.path.join(src, n)
        if n.endswith(".gz"):
            with gzip.open(p, "rb") as f, open(os.path.join(dst, n[:-3]), "wb") as g:
                shutil.copyfileobj(f, g)
        else:
            os.symlink(os.path.abspath(p), os.path.join(dst, n))
    return dst


def read_text(path):
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        with gzip.open(path + ".gz", "rb") as f:
            return f.read().decode("utf-8")
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write("\n")


class Gen:
    def __init__(self, args):
        import torch
        import transformers
        self.torch = torch
        self.tf = transformers
        self.args = args
        self.out = args.out
        self.tmp = tempfile.mkdtemp(prefix="tcq_ref_")
        self.info = {"errors": {}, "parts": {}}
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.set_num_threads(max(1, min(16, os.cpu_count() or 1)))
        self.cuda = torch.cuda.is_available()

    # -- utilities ------------------------------------------------------------------------
    def save_st(self, path, tensors, meta=None):
        from safetensors.torch import save_file
        os.makedirs(os.path.dirname(path), exist_ok=True)
        save_file({k: v.contiguous() for k, v in tensors.items()}, path,
                  metadata={k: str(v) for k, v in (meta or {}).items()})

    def load_f32(self, path, device="cpu", dtype=None, attn="eager"):
        torch = self.torch
        m = self.tf.AutoModelForCausalLM.from_pretrained(
            path, dtype=dtype or torch.float32, attn_implementation=attn)
        return m.to(device).eval()

    def logits(self, model, ids):
        torch = self.torch
        dev = next(model.parameters()).device
        with torch.no_grad():
            x = torch.tensor([ids], dtype=torch.long, device=dev)
            return model(input_ids=x, use_cache=False).logits[0].float().cpu()

    def inv_freq(self, model):
        rot = getattr(getattr(model, "model", model), "rotary_emb", None)
        f = getattr(rot, "inv_freq", None)
        return None if f is None else f.detach().float().cpu()

    # -- random models ----------------------------------------------------------------------
    def randomize(self, model, seed):
        """Deterministic weights with O(1) activations and logits; norm gains random, not 1."""
        torch = self.torch
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in sorted(model.named_parameters()):
                shape = tuple(p.shape)
                if "norm" in name:
                    v = 1.0 + 0.3 * torch.randn(shape, generator=g)
                elif "embed_tokens" in name:
                    # tied: the same matrix makes the logits, so keep those O(few) too
                    tied = getattr(model.config, "tie_word_embeddings", False)
                    v = torch.randn(shape, generator=g) * (2.0 / math.sqrt(shape[1]) if tied
                                                           else 1.0)
                elif len(shape) == 2:
                    scale = (2.0 if "lm_head" in name else 1.0) / math.sqrt(shape[1])
                    v = torch.randn(shape, generator=g) * scale
                else:
                    v = 0.1 * torch.randn(shape, generator=g)
                p.copy_(v.to(p.dtype))

    def llama3_inv_freq(self, head_dim, theta, factor, low, high, orig):
        """Independent implementation of the llama3 frequency rule (Llama 3.1 reference code)."""
        out = []
        low_wl, high_wl = orig / low, orig / high
        for i in range(0, head_dim, 2):
            f = 1.0 / (theta ** (i / head_dim))
            wl = 2 * math.pi / f
            if wl < high_wl:
                out.append(f)
            elif wl > low_wl:
                out.append(f / factor)
            else:
                s = (orig / wl - low) / (high - low)
                out.append((1 - s) * f / factor + s * f)
        return out

    def random_model(self, name, arch, cfg, seed, n_tokens, legacy_rope=None):
        torch, tf = self.torch, self.tf
        d = os.path.join(self.out, name)
        os.makedirs(d, exist_ok=True)
        cls_cfg = {"llama": tf.LlamaConfig, "qwen3": tf.Qwen3Config}[arch]
        cls_m = {"llama": tf.LlamaForCausalLM, "qwen3": tf.Qwen3ForCausalLM}[arch]
        config = cls_cfg(**cfg)
        try:
            config._attn_implementation = "eager"
        except Exception:  # noqa: BLE001
            pass
        torch.manual_seed(seed)
        mem = cls_m(config).eval()
        self.randomize(mem, seed)
        with torch.no_grad():  # what the bf16 file holds, kept in f32 (inv_freq stays f32)
            for prm in mem.parameters():
                prm.copy_(prm.to(torch.bfloat16).to(torch.float32))
        copy.deepcopy(mem).to(torch.bfloat16).save_pretrained(d)
        part = {"config_in": cfg, "seed": seed}
        if legacy_rope is not None:
            # Rewrite the rope entries the transformers-4 way (what most published Llama 3
            # configs say), so the runtime's parser sees both styles across the test models.
            # Kept only if transformers reads it back to the same frequencies.
            p = os.path.join(d, "config.json")
            with open(p) as f:
                cj = json.load(f)
            saved = json.dumps(cj, indent=2)
            cj.pop("rope_parameters", None)
            cj.update(legacy_rope)
            with open(p, "w") as f:
                json.dump(cj, f, indent=2)
                f.write("\n")
            part["config_style"] = "legacy rope_theta + rope_scaling"
        # Reference from the directory as saved: bf16 weights read back as f32.
        ref = self.load_f32(d)
        got_freq = self.inv_freq(ref)
        mem_freq = self.inv_freq(mem)
        g = torch.Generator().manual_seed(seed + 1)
        vocab = cfg["vocab_size"]
        ids = torch.randint(0, vocab, (n_tokens,), generator=g).tolist()
        ids[0], ids[5], ids[7] = 1, vocab - 1, 0
        lg = self.logits(ref, ids)
        lg_mem = self.logits(mem, ids)
        sd_ref, sd_mem = ref.state_dict(), mem.state_dict()
        part["weights_reload_equal_memory"] = sorted(sd_ref) == sorted(sd_mem) and all(
            torch.equal(sd_ref[k].float(), sd_mem[k].float()) for k in sd_mem)
        if cfg.get("tie_word_embeddings"):
            part["tied_reload"] = torch.equal(ref.lm_head.weight, ref.model.embed_tokens.weight)
        part["max_abs_diff_reload_vs_memory"] = float((lg - lg_mem).abs().max())
        if got_freq is not None and mem_freq is not None:
            part["inv_freq_reload_vs_memory"] = float((got_freq - mem_freq).abs().max())
        if legacy_rope is not None and part.get("inv_freq_reload_vs_memory", 1.0) > 1e-7:
            log(name, "legacy rope config not read back the same; keeping transformers' own")
            with open(os.path.join(d, "config.json"), "w") as f:
                f.write(saved + "\n")
            part["config_style"] = "transformers rope_parameters (legacy style fell back)"
            ref = self.load_f32(d)
            got_freq = self.inv_freq(ref)
            lg = self.logits(ref, ids)
        if arch == "llama" and got_freq is not None:
            rp = cfg.get("rope_parameters") or dict(cfg.get("rope_scaling", {}),
                                                     rope_theta=cfg.get("rope_theta"))
            want = self.llama3_inv_freq(cfg["hidden_size"] // cfg["num_attention_heads"],
                                        rp["rope_theta"], rp["factor"], rp["low_freq_factor"],
                                        rp["high_freq_factor"],
                                        rp["original_max_position_embeddings"])
            part["inv_freq_vs_own_llama3_rule_maxrel"] = max(
                abs(a - b) / b for a, b in zip(got_freq.tolist(), want))
        # Diagnostic only: the same model in float64 (HF still rounds norms/rope to f32).
        try:
            lg64 = self.logits(ref.to(torch.float64), ids)
            part["max_abs_diff_f32_vs_f64"] = float((lg - lg64).abs().max())
        except Exception as e:  # noqa: BLE001
            part["max_abs_diff_f32_vs_f64"] = f"n/a: {e}"
        part["logits_absmax"] = float(lg.abs().max())
        part["logits_std"] = float(lg.std())
        part["argmax"] = lg.argmax(-1).tolist()
        part["tokens"] = ids
        self.save_st(os.path.join(d, "ref_logits.safetensors"),
                     {"logits": lg, "tokens": torch.tensor(ids, dtype=torch.int32)},
                     {"producer": "tests/ref/gen_reference.py", "compute": "f32 cpu eager",
                      "weights": "model.safetensors (bf16) read as f32"})
        part["files"] = sorted(os.listdir(d))
        part["model_bytes"] = os.path.getsize(os.path.join(d, "model.safetensors"))
        log(name, json.dumps({k: v for k, v in part.items() if k not in ("argmax", "tokens")}))
        return part

    def part_tiny_llama(self):
        theta, rs = 500000.0, {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 64}
        cfg = dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                   rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=1,
                   eos_token_id=2, hidden_act="silu", attention_bias=False, mlp_bias=False)
        import inspect
        if "rope_parameters" in inspect.signature(self.tf.LlamaConfig.__init__).parameters:
            cfg["rope_parameters"] = dict(rs, rope_type="llama3", rope_theta=theta)
        else:
            cfg["rope_theta"], cfg["rope_scaling"] = theta, dict(rs, rope_type="llama3")
        legacy = {"rope_theta": theta, "rope_scaling": dict(rs, rope_type="llama3")}
        return self.random_model("tiny_llama", "llama", cfg, 1234, 40, legacy_rope=legacy)

    def part_tiny_qwen3(self):
        # head_dim 128 with 4 heads: q_proj is 256 -> 512, as in Qwen3 where heads*head_dim
        # differs from hidden_size.
        cfg = dict(vocab_size=512, hidden_size=256, intermediate_size=256, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=128,
                   max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=True,
                   bos_token_id=None, eos_token_id=2, hidden_act="silu", attention_bias=False)
        import inspect
        if "rope_parameters" in inspect.signature(self.tf.Qwen3Config.__init__).parameters:
            cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": 1000000.0}
        else:
            cfg["rope_theta"] = 1000000.0
        return self.random_model("tiny_qwen3", "qwen3", cfg, 4321, 40)

    # -- tinyqwen ---------------------------------------------------------------------------
    def part_tinyqwen(self):
        torch, tf = self.torch, self.tf
        src = inputs_dir(self.args.inputs, "tinyqwen", self.tmp)
        d = os.path.join(self.out, "tinyqwen_ref")
        os.makedirs(d, exist_ok=True)
        tok = tf.AutoTokenizer.from_pretrained(src)
        text = read_text(os.path.join(self.args.inputs, "tinyqwen", "valid.txt"))
        ids = tok(text, add_special_tokens=False)["input_ids"]
        log("tinyqwen: valid.txt", len(text), "chars,", len(ids), "tokens")
        W, C = 64, 512
        if len(ids) < W * C:
            raise RuntimeError(f"valid.txt has only {len(ids)} tokens")
        win = torch.tensor(ids[:W * C], dtype=torch.long).view(W, C)
        part = {"n_chars": len(text), "n_tokens": len(ids), "windows": W, "ctx": C,
                "predicted_per_window": C - 1, "bos_token_id": tok.bos_token_id,
                "first_window_tokens": ids[:C]}

        def ppl(model, batch=8):
            dev = next(model.parameters()).device
            nll_w = []
            with torch.no_grad():
                for b in range(0, W, batch):
                    x = win[b:b + batch].to(dev)
                    lg = model(input_ids=x, use_cache=False).logits.float()
                    lp = torch.log_softmax(lg[:, :-1], dim=-1)
                    nll = -lp.gather(-1, x[:, 1:, None])[..., 0]  # [B, C-1]
                    nll_w += nll.double().mean(1).cpu().tolist()
            mean = sum(nll_w) / len(nll_w)  # equal counts per window
            return math.exp(mean), mean, nll_w

        m32 = self.load_f32(src)
        seq = ids[:32]
        lg = self.logits(m32, seq)
        self.save_st(os.path.join(d, "ref_logits.safetensors"),
                     {"logits": lg, "tokens": torch.tensor(seq, dtype=torch.int32)},
                     {"producer": "tests/ref/gen_reference.py", "compute": "f32 cpu eager",
                      "tokens": "first 32 tokens of valid.txt"})
        part["logits_tokens"] = seq
        part["logits_argmax"] = lg.argmax(-1).tolist()
        t = time.time()
        p, mnll, w = ppl(m32)
        part["f32_cpu_eager"] = {"ppl": p, "mean_nll": mnll, "window_mean_nll": w,
                                 "seconds": time.time() - t}
        log(f"tinyqwen f32 cpu ppl {p:.6f} ({time.time() - t:.1f}s)")
        if self.cuda:
            for dt, attn in ((torch.float32, "eager"), (torch.bfloat16, "eager"),
                             (torch.bfloat16, "sdpa")):
                key = f"{'f32' if dt == torch.float32 else 'bf16'}_cuda_{attn}"
                try:
                    m = self.load_f32(src, device="cuda", dtype=dt, attn=attn)
                    t = time.time()
                    p, mnll, w = ppl(m)
                    part[key] = {"ppl": p, "mean_nll": mnll, "window_mean_nll": w,
                                 "seconds": time.time() - t}
                    log(f"tinyqwen {key} ppl {p:.6f}")
                    del m
                except Exception as e:  # noqa: BLE001
                    part[key] = f"failed: {e!r}"
                    log("tinyqwen", key, "failed", e)
        else:
            m = self.load_f32(src, dtype=torch.bfloat16)
            p, mnll, w = ppl(m)
            part["bf16_cpu_eager"] = {"ppl": p, "mean_nll": mnll, "window_mean_nll": w}
        self.save_st(os.path.join(d, "ppl_tokens.safetensors"),
                     {"tokens": win.to(torch.int32)},
                     {"what": "valid.txt tokens [64 windows, 512]: the first 32768 tokens"})
        write_json(os.path.join(d, "ppl.json"), part)
        return {k: (v if not isinstance(v, dict) else
                    {kk: vv for kk, vv in v.items() if kk != "window_mean_nll"})
                for k, v in part.items() if k not in ("first_window_tokens", "logits_tokens",
                                                      "logits_argmax")}

    # -- stories260K --------------------------------------------------------------------------
    def part_stories(self):
        torch = self.torch
        src = os.path.join(self.args.inputs, "stories260K", "hf")
        d = os.path.join(self.out, "stories260K_ref")
        os.makedirs(d, exist_ok=True)
        m = self.load_f32(src)
        ids = [1]
        with torch.no_grad():
            for _ in range(256):  # llama2.c run.c -n 256: 256 tokens sampled after BOS
                nxt = int(self.logits(m, ids)[-1].argmax())
                if nxt == 1:  # run.c stops at BOS
                    break
                ids.append(nxt)
        part = {"greedy_ids": ids}
        try:
            import sentencepiece as spm
            sp = spm.SentencePieceProcessor(
                model_file=os.path.join(self.args.inputs, "stories260K", "tok512.model"))
            text = sp.decode(ids[1:])
            part["greedy_text"] = text
            exp = read_text(os.path.join(self.args.inputs, "stories260K",
                                         "stories260K.expected.txt"))
            first = exp.split("\n", 1)[1].split("\n\n## ")[0]
            part["greedy_matches_expected_first_200"] = text[:200] == first[:200]
            part["greedy_matches_expected_section"] = text.strip() == first.strip()
        except Exception as e:  # noqa: BLE001
            part["greedy_text"] = f"n/a: {e!r}"
        seq = ids[:32]
        lg = self.logits(m, seq)
        self.save_st(os.path.join(d, "ref_logits.safetensors"),
                     {"logits": lg, "tokens": torch.tensor(seq, dtype=torch.int32)},
                     {"producer": "tests/ref/gen_reference.py", "compute": "f32 cpu eager",
                      "tokens": "BOS + first 31 greedy tokens"})
        write_json(os.path.join(d, "greedy.json"), part)
        log("stories260K:", {k: v for k, v in part.items() if k != "greedy_ids"})
        return {k: v for k, v in part.items() if k not in ("greedy_ids",)}

    # -- chat templates + tokenizer vectors -----------------------------------------------
    CONVS = {
        "sys_user": dict(messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"}],
            add_generation_prompt=True),
        "multi_turn": dict(messages=[
            {"role": "user", "content": "Hi there!"},
            {"role": "assistant", "content": "Hello! How can I help you today?"},
            {"role": "user", "content": "Grüße aus Köln 🌍 — tell me a joke about cats."}],
            add_generation_prompt=True),
        "no_thinking": dict(messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Explain RMSNorm in one sentence."}],
            add_generation_prompt=True, enable_thinking=False),
        "think_history": dict(messages=[
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant",
             "content": "<think>\nThe user asks a simple sum: 2+2=4.\n</think>\n\n2 + 2 = 4."},
            {"role": "user", "content": "And 3+3?"}],
            add_generation_prompt=True),
        "think_last": dict(messages=[
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant",
             "content": "<think>\nSimple arithmetic.\n</think>\n\nIt is 4."}],
            add_generation_prompt=False),
    }

    STRINGS = [
        "Hello world", " Hello world", "Hello  world\n\n\tindented\n", "I'm sure we'll can't",
        "123456789 3.14159 1,000,000", "Grüße, 世界! 🌍🚀", "café naïve cafe\u0301",
        "<|im_start|>user\nhi<|im_end|>\n", "def f(x):\n    return x**2\n",
        "   leading and trailing   ", "\u00a0non-breaking\u3000ideographic space", "a",
        "The quick brown fox jumps over the lazy dog.",
    ]

    def tokenizers(self):
        # No llama2/: transformers 5's LlamaTokenizer rebuilds its own pipeline instead of
        # following tokenizer.json (" Hello world" lost its leading space), so its ids are no
        # reference for a tokenizer.json implementation.
        tf = self.tf
        return {
            "tinyqwen": inputs_dir(self.args.inputs, "tinyqwen", self.tmp),
            "qwen3": inputs_dir(self.args.inputs, "tokenizers/qwen3", self.tmp),
        }, tf

    def part_chat(self):
        dirs, tf = self.tokenizers()
        d = os.path.join(self.out, "chat_hf")
        os.makedirs(d, exist_ok=True)
        write_json(os.path.join(d, "conversations.json"), self.CONVS)
        part, ids = {}, {}
        for tname in ("tinyqwen", "qwen3"):
            tok = tf.AutoTokenizer.from_pretrained(dirs[tname])
            for cname, c in self.CONVS.items():
                kw = {k: v for k, v in c.items() if k != "messages"}
                s = tok.apply_chat_template(c["messages"], tokenize=False, **kw)
                with open(os.path.join(d, f"{tname}_{cname}.txt"), "w", encoding="utf-8",
                          newline="") as f:
                    f.write(s)
                ids[f"{tname}_{cname}"] = tok(s, add_special_tokens=False)["input_ids"]
                part[f"{tname}_{cname}"] = len(s)
        write_json(os.path.join(d, "rendered_ids.json"), ids)
        log("chat:", part)
        return part

    def part_tokvec(self):
        dirs, tf = self.tokenizers()
        texts = list(self.STRINGS)
        valid = read_text(os.path.join(self.args.inputs, "tinyqwen", "valid.txt"))
        texts.append(valid[:2000])
        out, part = {}, {}
        for tname, p in dirs.items():
            tok = tf.AutoTokenizer.from_pretrained(p)
            rows = []
            for s in texts:
                a = tok(s, add_special_tokens=False)["input_ids"]
                b = tok(s, add_special_tokens=True)["input_ids"]
                rows.append({"text": s, "ids": a, "ids_with_special": b,
                             "decoded": tok.decode(a)})
            out[tname] = {"class": type(tok).__name__, "bos_token_id": tok.bos_token_id,
                          "eos_token_id": tok.eos_token_id, "vectors": rows}
            part[tname] = type(tok).__name__
        write_json(os.path.join(self.out, "tokenizer_hf", "vectors.json"), out)
        log("tokenizer vectors:", part)
        return part

    def run(self):
        import platform
        torch, tf = self.torch, self.tf
        info = self.info
        info["versions"] = {"python": platform.python_version(), "torch": torch.__version__,
                            "transformers": tf.__version__}
        for mod in ("tokenizers", "safetensors", "sentencepiece", "jinja2"):
            try:
                info["versions"][mod] = __import__(mod).__version__
            except Exception:  # noqa: BLE001
                pass
        info["device"] = torch.cuda.get_device_name(0) if self.cuda else "cpu only"
        info["date_utc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        info["threads"] = torch.get_num_threads()
        log("versions", info["versions"], info["device"])
        parts = [("tiny_llama", self.part_tiny_llama), ("tiny_qwen3", self.part_tiny_qwen3),
                 ("stories260K", self.part_stories), ("chat", self.part_chat),
                 ("tokenizer_vectors", self.part_tokvec), ("tinyqwen", self.part_tinyqwen)]
        only = set(self.args.only.split(",")) if self.args.only else None
        for name, fn in parts:
            if only and name not in only:
                continue
            log("== part", name)
            try:
                info["parts"][name] = fn()
            except Exception:  # noqa: BLE001
                info["errors"][name] = traceback.format_exc()
                log("FAILED", name, "\n" + info["errors"][name])
        info["seconds"] = time.time() - T0
        write_json(os.path.join(self.out, "gen_info.json"), info)
        log("errors:", list(info["errors"]) or "none")
        return 0 if not info["errors"] else 1


def cmd_gen(args):
    os.makedirs(args.out, exist_ok=True)
    rc = Gen(args).run()
    if args.tar:
        with tarfile.open(args.tar, "w:gz") as t:
            t.add(args.out, arcname="refdata")
        log("wrote", args.tar, os.path.getsize(args.tar), "bytes")
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="bundle inputs from the shared data folder (stdlib only)")
    p.add_argument("dest")
    p.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                                    "shared", "data"))
    g = sub.add_parser("gen", help="compute the reference data (needs torch + transformers)")
    g.add_argument("--inputs", required=True, help="bundle from 'pack' or the shared data dir")
    g.add_argument("--out", required=True)
    g.add_argument("--tar", help="also pack OUT into this .tar.gz")
    g.add_argument("--only", help="comma-separated parts to run (default: all)")
    args = ap.parse_args()
    return cmd_pack(args) if args.cmd == "pack" else cmd_gen(args)


if __name__ == "__main__":
    sys.exit(main())
