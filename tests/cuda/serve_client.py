#!/usr/bin/env python3
"""tcq serve on a GPU, checked and timed from the device machine (python3 stdlib only: the device
image has no node for the CI's openai-package tests).  Used by tests/cuda/serve-on-device.sh.

  serve_client.py check URL [--identical]   the API on a real model: /health, /v1/models, chat (plain and
                              streamed), /v1/completions with a stop string, a prompt over the
                              context (400), 16 concurrent greedy streams == the same 16 requests
                              one after another (byte for byte with --identical, else
                              counted), a client dropped mid-stream,
                              then /metrics shows every slot free.  Exit 1 on any failure.
  serve_client.py load URL --clients 1,4,16 --gen N   aggregate generated tokens/s per client
                              count (streamed /v1/completions, ignore_eos, distinct prompts) and
                              the median time to first token; one JSON line per count."""
import json
import socket
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlparse

fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    fails += 0 if ok else 1


def call(url, path, body=None, timeout=120):
    req = urllib.request.Request(url + path, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def stream(url, path, body, timeout=300):
    """(text, ttft seconds, n chunks with content, usage) of a streamed request."""
    req = urllib.request.Request(url + path, data=json.dumps(dict(body, stream=True)).encode(),
                                 headers={"Content-Type": "application/json"})
    t0, ttft, text, n, usage = time.perf_counter(), None, "", 0, None
    with urllib.request.urlopen(req, timeout=timeout) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            d = json.loads(line[6:])
            usage = d.get("usage") or usage
            for c in d.get("choices", []):
                piece = (c.get("delta") or {}).get("content") or c.get("text") or ""
                if piece:
                    ttft = ttft if ttft is not None else time.perf_counter() - t0
                    text += piece
                    n += 1
    return text, ttft, n, usage


def parallel(fn, args):
    out = [None] * len(args)

    def run(i):
        try:
            out[i] = fn(*args[i])
        except Exception as e:  # noqa: BLE001 -- reported as a failed check
            out[i] = e
    th = [threading.Thread(target=run, args=(i,)) for i in range(len(args))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    return out


def metric(url, name):
    _, body = call(url, "/metrics")
    for line in body.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.split()[-1])
    return None


def wait_ready(url, seconds=300):
    for _ in range(seconds * 5):
        try:
            if call(url, "/health", timeout=5)[0] == 200:
                return
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.2)


def do_check(url, identical):
    wait_ready(url)
    check(call(url, "/health")[0] == 200, "/health 200 once loaded")
    st, body = call(url, "/v1/models")
    check(st == 200 and json.loads(body)["data"], "/v1/models lists the model")
    chat = {"messages": [{"role": "user", "content": "Tell me a story about a cat."}], "max_tokens": 24,
            "temperature": 0}
    st, body = call(url, "/v1/chat/completions", chat)
    d = json.loads(body) if st == 200 else {}
    plain = d.get("choices", [{}])[0].get("message", {}).get("content", "")
    check(st == 200 and d.get("usage", {}).get("completion_tokens", 0) > 0, f"chat: {plain[:60]!r}")
    text, _, n, usage = stream(url, "/v1/chat/completions", dict(chat, stream_options={"include_usage": True}))
    check(text == plain and n > 0 and usage and usage["completion_tokens"] == d["usage"]["completion_tokens"],
          "streamed chat == plain chat, usage in the last chunk")
    st, body = call(url, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0})
    full = json.loads(body)["choices"][0]["text"] if st == 200 else ""
    cut = full[len(full) // 2:][:3]
    if cut.strip():
        st, body = call(url, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 40,
                                                  "temperature": 0, "stop": cut})
        c = json.loads(body)["choices"][0] if st == 200 else {}
        check(c.get("finish_reason") == "stop" and cut not in c.get("text", cut), f"stop string {cut!r}")
    st, body = call(url, "/v1/completions", {"prompt": "word " * 5000, "max_tokens": 4})
    check(st == 400 and "context" in body, "a prompt over the context: 400 naming it")
    prompts = [f"Story number {i}: once upon a time" for i in range(16)]
    req = lambda p: ("/v1/completions", {"prompt": p, "max_tokens": 32, "temperature": 0})  # noqa: E731
    seq = [stream(url, *req(p))[0] for p in prompts]
    con = parallel(lambda p: stream(url, *req(p))[0], [(p,) for p in prompts])
    same = sum(1 for a, b in zip(seq, con) if a == b)
    # byte-identical only where the path makes a row's arithmetic independent of the batch (CPU:
    # --kpath exact --max-batch 15; docs/PERFORMANCE.md, "Batch composition and bit-identity"):
    # reported, and a failure only with --identical
    check(same == 16 or not identical, f"16 concurrent greedy streams vs 16 sequential: {same}/16 identical")
    # a client that drops its stream after the first chunk frees its slot
    u = urlparse(url)
    s = socket.create_connection((u.hostname, u.port))
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 200, "stream": True, "ignore_eos": True})
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    s.recv(256)
    s.close()
    busy = None
    for _ in range(100):
        time.sleep(0.1)
        busy = metric(url, "tcq_slots_busy")
        if busy == 0:
            break
    check(busy == 0, f"after a dropped stream every slot is free (tcq_slots_busy {busy})")


def do_load(url, clients, gen):
    words = ["time", "river", "stone", "light", "market", "garden", "number", "paper", "winter", "engine"]
    seed = int(time.time()) % 100000
    wait_ready(url)
    for c in clients:
        prompts = [" ".join(words[(seed + i * 7 + j * 3) % len(words)] for j in range(24)) + f" {seed} {i}"
                   for i in range(c)]
        seed += 1
        t0 = time.perf_counter()
        res = parallel(lambda p: stream(url, "/v1/completions", {"prompt": p, "max_tokens": gen, "temperature": 0,
                                                                 "ignore_eos": True,
                                                                 "stream_options": {"include_usage": True}}),
                       [(p,) for p in prompts])
        wall = time.perf_counter() - t0
        bad = [r for r in res if isinstance(r, Exception)]
        toks = sum(r[3]["completion_tokens"] for r in res if not isinstance(r, Exception) and r[3])
        ttft = [r[1] for r in res if not isinstance(r, Exception) and r[1] is not None]
        print(json.dumps({"clients": c, "gen": gen, "tokens": toks, "wall_s": round(wall, 3),
                          "agg_tok_s": round(toks / wall, 2), "ttft_median_s": round(statistics.median(ttft), 3)
                          if ttft else None, "errors": len(bad)}), flush=True)
        for e in bad[:1]:
            print(f"error: {e}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("check", "load"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if sys.argv[1] == "check":
        do_check(sys.argv[2], "--identical" in sys.argv[3:])
        print(f"{fails} failed", flush=True)
        sys.exit(1 if fails else 0)
    a = sys.argv[3:]
    cl = [int(x) for x in a[a.index("--clients") + 1].split(",")] if "--clients" in a else [1, 4, 16]
    g = int(a[a.index("--gen") + 1]) if "--gen" in a else 64
    do_load(sys.argv[2], cl, g)
