// A model whose vocabulary is larger than its tokenizer's (Qwen3's 151936 rows hold 151669
// tokens): run.sh starts a server on the tiny model with a tokenizer cut to its first 384 ids, so
// greedy replies sample ids that have no text.  Each is a generated token without text: every
// stream still ends with finish_reason "length" and, with stream_options.include_usage, the usage
// chunk counting all max_tokens tokens (a failed detokenization used to end the stream with an
// error and no usage).  TCQ_URL: the server's base URL.
import OpenAI from 'openai';
import assert from 'node:assert/strict';

const client = new OpenAI({ baseURL: process.env.TCQ_URL + '/v1', apiKey: 'none', maxRetries: 0, timeout: 60000 });
const max_tokens = 32;
let failed = 0;
await Promise.all(Array.from({ length: 8 }, async (_, i) => {
  const req = { model: 'tiny', prompt: `the river ${i} and the stone`, max_tokens, temperature: 0, ignore_eos: true };
  try {
    const s = await client.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
    let usage = null, finish = null, text = '';
    for await (const c of s) {
      if (c.usage) usage = c.usage;
      if (c.choices.length) {
        text += c.choices[0].text;
        if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
      }
    }
    assert.ok(usage, 'a usage chunk');
    assert.equal(usage.completion_tokens, max_tokens);
    assert.equal(finish, 'length');
    const r = await client.completions.create(req);
    assert.equal(r.usage.completion_tokens, max_tokens);
    assert.equal(r.choices[0].text, text);
  } catch (e) {
    failed++;
    console.log(`FAIL vocab request ${i}: ${e && e.stack || e}`);
  }
}));
console.log(failed ? `vocab: ${failed} of 8 failed` : 'ok   vocab: ids past the tokenizer are tokens without text (8 requests)');
process.exit(failed ? 1 : 0);
