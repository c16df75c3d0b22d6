// Load client for any OpenAI-compatible server (tcq serve, llama-server, ...): node only, no packages.
//   node bench/serve_load.mjs URL [--clients 1,4,16] [--gen 16] [--prompt-words 24] [--waves 3] [--seed N]
// For each client count C, `--waves` times: C concurrent streamed /v1/completions requests, each
// a distinct prompt of --prompt-words random words, --gen greedy tokens with end tokens ignored
// (ignore_eos, a llama-server extension tcq serve also takes).  Prints per C the median wave's
// aggregate generated tokens/s (first request sent to last token received) and the median and
// worst time to first token.
// The prompts come from --seed (default: a new one each run, printed).  A fixed seed sends the
// same prompts as an earlier run, which a server's prompt cache (llama-server's --cache-ram, tcq
// serve's --cache-ram) answers without a prefill: that measures the cache, not the prefill.
const args = process.argv.slice(2);
const url = args[0];
const opt = (name, def) => { const i = args.indexOf(name); return i > 0 ? args[i + 1] : def; };
const clients = opt('--clients', '1,4,16').split(',').map(Number);
const gen = Number(opt('--gen', '16')), words = Number(opt('--prompt-words', '24')), waves = Number(opt('--waves', '3'));
if (!/^https?:\/\/./.test(url || '') || ![...clients, gen, words, waves].every(n => Number.isInteger(n) && n > 0)) {
  console.error('usage: node bench/serve_load.mjs http://HOST:PORT [--clients 1,4,16] [--gen 16] [--prompt-words 24] ' +
                '[--waves 3] [--seed N]  (counts: positive integers)');
  process.exit(2);
}
const vocab = ['time', 'river', 'stone', 'light', 'market', 'garden', 'number', 'paper', 'winter', 'engine',
               'silver', 'window', 'forest', 'letter', 'morning', 'island', 'bridge', 'signal', 'copper', 'harbor'];
let seed = Number(opt('--seed', String(Date.now() % 2147483648)));
console.log(`prompts from --seed ${seed}`);
const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;

async function one() {
  const prompt = Array.from({ length: words }, () => vocab[Math.floor(rnd() * vocab.length)]).join(' ');
  const t0 = performance.now();
  const r = await fetch(url + '/v1/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: gen, temperature: 0, stream: true, ignore_eos: true,
                           stream_options: { include_usage: true } }),
  });
  if (!r.ok) throw new Error(`${r.status} ${await r.text()}`);
  const rd = r.body.getReader(), dec = new TextDecoder();
  let buf = '', first = 0, chunks = 0, usage = null;
  for (;;) {
    const { done, value } = await rd.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i); buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      if (j.usage) usage = j.usage;
      if (j.choices && j.choices.length && j.choices[0].text) { chunks++; if (!first) first = performance.now(); }
    }
  }
  return { ttft: (first - t0) / 1000, tokens: usage ? usage.completion_tokens : chunks, end: performance.now() };
}

const med = a => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
await one();   // warm-up
for (const C of clients) {
  const agg = [], ttft = [];
  let tokens = 0;
  for (let w = 0; w < waves; w++) {
    const t0 = performance.now();
    const rs = await Promise.all(Array.from({ length: C }, one));
    const n = rs.reduce((s, r) => s + r.tokens, 0);
    tokens += n;
    agg.push(n / ((Math.max(...rs.map(r => r.end)) - t0) / 1000));
    ttft.push(...rs.map(r => r.ttft));
  }
  console.log(`${String(C).padStart(3)} clients: ${med(agg).toFixed(2).padStart(7)} tok/s aggregate, ` +
              `TTFT median ${med(ttft).toFixed(3)} s, max ${Math.max(...ttft).toFixed(3)} s ` +
              `(${tokens} tokens in ${waves} waves)`);
}
