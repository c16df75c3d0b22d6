// tcq serve against the official OpenAI client (the `openai` npm package).  Run by run.sh with
// TCQ_URL (the server's base URL) and TCQ_KEY (its --api-key); the server has 16 slots, the tiny
// random model (its replies are gibberish, but greedy ones are reproducible) and a 64 KiB body limit.
import OpenAI from 'openai';
import assert from 'node:assert/strict';

const base = process.env.TCQ_URL, key = process.env.TCQ_KEY;
const client = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 60000 });
let failed = 0, passed = 0;
async function test(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e && e.stack || e}`);
  }
}
const greedy = { temperature: 0 };
const chat = (content, extra = {}) => ({ model: 'tiny', messages: [{ role: 'user', content }], ...greedy, ...extra });

async function streamChat(req) {
  const s = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null, roles = 0;
  for await (const c of s) {
    assert.equal(c.object, 'chat.completion.chunk');
    if (c.usage) usage = c.usage;
    if (!c.choices.length) continue;
    const ch = c.choices[0];
    if (ch.delta.role) { assert.equal(ch.delta.role, 'assistant'); roles++; }
    if (ch.delta.content) text += ch.delta.content;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  assert.equal(roles, 1, 'one chunk carries the role');
  return { text, finish, usage };
}

async function expectError(status, fn, check) {
  try {
    await fn();
  } catch (e) {
    assert.equal(e.status, status, `status ${e.status}, want ${status}: ${e.message}`);
    if (check) check(e);
    return;
  }
  assert.fail(`no error, want ${status}`);
}

async function raw(path, init = {}) {
  const r = await fetch(base + path, init);
  const body = await r.text();
  let json = null;
  try { json = JSON.parse(body); } catch { /* not JSON */ }
  return { status: r.status, body, json, type: r.headers.get('content-type') };
}
const auth = { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' };

function errorShape(j) {
  assert.ok(j && j.error, 'an error object');
  assert.equal(typeof j.error.message, 'string');
  assert.equal(typeof j.error.type, 'string');
  assert.ok('code' in j.error);
}

async function metrics() {
  const r = await raw('/metrics', { headers: auth });
  assert.equal(r.status, 200);
  const m = {};
  for (const line of r.body.split('\n')) {
    const x = line.match(/^(tcq_\w+) ([0-9.e+-]+)$/);
    if (x) m[x[1]] = Number(x[2]);
  }
  return m;
}

await test('models', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map(m => m.id), ['tiny']);
  assert.equal(list.data[0].object, 'model');
});

let ref = null;   // a greedy reply of 40 tokens, reused below
await test('chat, not streamed: max_tokens, usage', async () => {
  const r = await client.chat.completions.create(chat('Tell me a story about a cat.', { max_tokens: 40 }));
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, 'tiny');
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  assert.ok(r.usage.prompt_tokens > 5);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  if (c.finish_reason === 'length') assert.equal(r.usage.completion_tokens, 40);
  else assert.ok(r.usage.completion_tokens < 40);
  ref = r;
});

await test('chat, streamed: same text and usage as not streamed', async () => {
  const s = await streamChat(chat('Tell me a story about a cat.', { max_tokens: 40 }));
  assert.equal(s.text, ref.choices[0].message.content);
  assert.equal(s.finish, ref.choices[0].finish_reason);
  assert.deepEqual(s.usage, ref.usage);
});

await test('chat: max_completion_tokens, system turn, thinking kwarg', async () => {
  const r = await client.chat.completions.create({
    model: 'tiny', ...greedy, max_completion_tokens: 5,
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
    chat_template_kwargs: { enable_thinking: false },
  });
  assert.ok(r.usage.completion_tokens <= 5);
  if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, 5);
  const one = await client.chat.completions.create(chat('Hi', { max_completion_tokens: 1 }));
  assert.ok(one.usage.completion_tokens <= 1);
});

await test('completions, streamed and not', async () => {
  const req = { model: 'tiny', prompt: 'Once upon a time', max_tokens: 16, ...greedy };
  const r = await client.completions.create(req);
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  const s = await client.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = '', usage = null, finish = null;
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    if (c.choices.length) {
      text += c.choices[0].text;
      if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
    }
  }
  assert.equal(text, r.choices[0].text);
  assert.equal(finish, r.choices[0].finish_reason);
  assert.deepEqual(usage, r.usage);
});

await test('stop strings (a string, a list): the reply ends before the first match', async () => {
  const full = ref.choices[0].message.content;
  // two ASCII letters or digits from the middle of the greedy reply
  let at = -1;
  for (let i = Math.floor(full.length / 3); i + 2 <= full.length && at < 0; i++)
    if (/^[A-Za-z0-9]{2}$/.test(full.slice(i, i + 2))) at = i;
  assert.ok(at > 0, `no stop candidate in ${JSON.stringify(full)}`);
  const stop = full.slice(at, at + 2), first = full.indexOf(stop);
  for (const s of [stop, ['never-in-the-text', stop]]) {
    const r = await client.chat.completions.create(chat('Tell me a story about a cat.', { max_tokens: 40, stop: s }));
    assert.equal(r.choices[0].message.content, full.slice(0, first));
    assert.equal(r.choices[0].finish_reason, 'stop');
    const st = await streamChat(chat('Tell me a story about a cat.', { max_tokens: 40, stop: s }));
    assert.equal(st.text, full.slice(0, first));
    assert.equal(st.finish, 'stop');
  }
});

await test('sampling fields accepted; a seed repeats a sample', async () => {
  const req = chat('Hello', { temperature: 0.9, top_p: 0.9, top_k: 20, min_p: 0.01, seed: 42, max_tokens: 12, n: 1 });
  const a = await client.chat.completions.create(req), b = await client.chat.completions.create(req);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
});

await test('400: malformed JSON, wrong field types (naming the field), n > 1', async () => {
  const r = await raw('/v1/chat/completions', { method: 'POST', headers: auth, body: '{"messages": [' });
  assert.equal(r.status, 400);
  errorShape(r.json);
  assert.match(r.json.error.message, /JSON/);
  for (const [field, bad] of [['temperature', 'hot'], ['max_tokens', 1.5], ['messages', 'hi'], ['stop', 7],
                              ['stream', 'yes'], ['top_k', -1], ['n', 2]]) {
    await expectError(400, () => client.chat.completions.create({ ...chat('Hi'), [field]: bad }), e => {
      assert.equal(e.param, field);
      assert.ok(e.message.includes(field), e.message);
      assert.equal(e.type, 'invalid_request_error');
    });
  }
  await expectError(400, () => client.chat.completions.create({ model: 'tiny', messages: [{ role: 'wizard', content: 'x' }] }),
    e => assert.equal(e.param, 'messages[0].role'));
  await expectError(400, () => client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 3 }] }),
    e => assert.equal(e.param, 'messages[0].content'));
  await expectError(400, () => client.completions.create({ model: 'tiny' }), e => assert.equal(e.param, 'prompt'));
});

await test('400: a prompt longer than the context names both lengths', async () => {
  await expectError(400, () => client.completions.create({ model: 'tiny', prompt: 'word '.repeat(400), max_tokens: 4 }),
    e => {
      const m = e.message.match(/(\d+) tokens, the context (\d+)/);
      assert.ok(m, e.message);
      assert.ok(Number(m[1]) >= 256 && Number(m[2]) === 256, e.message);
      assert.equal(e.code, 'context_length_exceeded');
    });
});

await test('404 unknown route, 405 wrong method', async () => {
  const r = await raw('/v1/nope', { headers: auth });
  assert.equal(r.status, 404);
  errorShape(r.json);
  const m = await raw('/v1/chat/completions', { headers: auth });
  assert.equal(m.status, 405);
  errorShape(m.json);
});

await test('401 wrong or missing key', async () => {
  const bad = new OpenAI({ baseURL: base + '/v1', apiKey: 'wrong', maxRetries: 0 });
  await expectError(401, () => bad.chat.completions.create(chat('Hi')));
  await expectError(401, () => bad.models.list());
  const r = await raw('/v1/models');
  assert.equal(r.status, 401);
  errorShape(r.json);
  assert.equal((await raw('/health')).status, 200);   // health needs no key
});

await test('413 body over the limit', async () => {
  const body = JSON.stringify(chat('x'.repeat(100000)));
  const r = await raw('/v1/chat/completions', { method: 'POST', headers: auth, body });
  assert.equal(r.status, 413);
  errorShape(r.json);
  // the server is fine afterwards
  const ok = await client.chat.completions.create(chat('Hi', { max_tokens: 2 }));
  assert.ok(ok.usage.completion_tokens <= 2);
});

const prompts = Array.from({ length: 16 }, (_, i) => `Request number ${i}: say something about ${'abcdefghijklmnop'[i]}.`);
await test('16 concurrent streams give the 16 sequential greedy texts', async () => {
  const seq = [];
  for (const p of prompts) seq.push((await client.chat.completions.create(chat(p, { max_tokens: 24 }))).choices[0].message.content);
  const par = await Promise.all(prompts.map(p => streamChat(chat(p, { max_tokens: 24 }))));
  for (let i = 0; i < 16; i++) assert.equal(par[i].text, seq[i], `request ${i}`);
  assert.ok(new Set(seq).size > 1, 'different prompts, different replies');
});

await test('clients that disconnect mid-stream: all slots free again', async () => {
  const before = await metrics();
  await Promise.all(prompts.map(async p => {
    const s = await client.chat.completions.create({ ...chat(p), max_tokens: 220, stream: true });
    let n = 0;
    for await (const c of s) { if (++n === 2) break; }   // leaving the loop aborts the request
  }));
  let m = null;
  for (let i = 0; i < 100; i++) {
    m = await metrics();
    if (m.tcq_slots_busy === 0 && m.tcq_queue_length === 0) break;
    await new Promise(r => setTimeout(r, 100));
  }
  assert.equal(m.tcq_slots_busy, 0);
  assert.equal(m.tcq_queue_length, 0);
  const cancelled = m.tcq_requests_cancelled_total - before.tcq_requests_cancelled_total;
  console.log(`     ${cancelled} of 16 streams were cancelled mid-generation`);
  assert.ok(cancelled >= 1, 'at least one stream was cut mid-generation');
  const ok = await client.chat.completions.create(chat(prompts[3], { max_tokens: 24 }));
  assert.ok(ok.choices[0].message.content.length >= 0);
});

await test('load: 64 requests from 8 clients, all complete and well-formed', async () => {
  let done = 0;
  await Promise.all(Array.from({ length: 8 }, async (_, w) => {
    for (let i = 0; i < 8; i++) {
      const p = `client ${w} request ${i}`, max_tokens = 1 + ((w * 8 + i) * 7) % 30;
      if ((w + i) % 3 === 0) {
        const s = await streamChat(chat(p, { max_tokens, temperature: 0.7, seed: w * 8 + i }));
        assert.ok(['stop', 'length'].includes(s.finish));
        assert.ok(s.usage.completion_tokens <= max_tokens);
      } else if ((w + i) % 3 === 1) {
        const r = await client.chat.completions.create(chat(p, { max_tokens }));
        assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
        assert.ok(r.usage.completion_tokens <= max_tokens);
        if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, max_tokens);
      } else {
        const r = await client.completions.create({ model: 'tiny', prompt: p, max_tokens, ...greedy });
        assert.equal(typeof r.choices[0].text, 'string');
        assert.ok(r.usage.completion_tokens <= max_tokens);
      }
      done++;
    }
  }));
  assert.equal(done, 64);
  const m = await metrics();
  assert.equal(m.tcq_slots_busy, 0);
});

await test('a conversation that goes on reuses its cached prefix', async () => {
  const before = await metrics();
  const msgs = [{ role: 'user', content: 'First question about the weather today, please.' }];
  const a = await client.chat.completions.create({ model: 'tiny', messages: msgs, ...greedy, max_tokens: 8 });
  msgs.push({ role: 'assistant', content: a.choices[0].message.content }, { role: 'user', content: 'And tomorrow?' });
  await client.chat.completions.create({ model: 'tiny', messages: msgs, ...greedy, max_tokens: 8 });
  const m = await metrics();
  assert.ok(m.tcq_prompt_tokens_reused_total - before.tcq_prompt_tokens_reused_total >= a.usage.prompt_tokens,
    `reused ${m.tcq_prompt_tokens_reused_total - before.tcq_prompt_tokens_reused_total}, first prompt ${a.usage.prompt_tokens}`);
});

await test('the prompt cache: a prompt whose slot went to others is served from the cache', async () => {
  // 17 new prompts one after another on 16 slots: the 17th takes the slot of the first, whose
  // content (prompt and reply) goes to the prompt cache; the first prompt again is then a hit.
  const p = i => `Cache test prompt ${i}: tell me about ${'qrstuvwxyzabcdefg'[i]}.`;
  const first = (await client.chat.completions.create(chat(p(0), { max_tokens: 6 }))).choices[0].message.content;
  for (let i = 1; i <= 16; i++) await client.chat.completions.create(chat(p(i), { max_tokens: 2 }));
  const before = await metrics();
  assert.ok(before.tcq_prompt_cache_entries >= 1 && before.tcq_prompt_cache_bytes > 0, 'entries kept');
  const again = await client.chat.completions.create(chat(p(0), { max_tokens: 6 }));
  const m = await metrics();
  assert.equal(m.tcq_prompt_cache_hits_total - before.tcq_prompt_cache_hits_total, 1);
  assert.ok(m.tcq_prompt_tokens_reused_total - before.tcq_prompt_tokens_reused_total >= again.usage.prompt_tokens - 1,
    `reused ${m.tcq_prompt_tokens_reused_total - before.tcq_prompt_tokens_reused_total} of ${again.usage.prompt_tokens}`);
  assert.equal(again.choices[0].message.content, first, 'the same greedy reply from the cached prefix');
});

await test('metrics: Prometheus text', async () => {
  const r = await raw('/metrics', { headers: auth });
  assert.match(r.type, /^text\/plain/);
  for (const name of ['requests_total', 'prompt_tokens_total', 'generated_tokens_total', 'generated_tokens_per_second',
                      'slots_busy', 'queue_length'])
    assert.match(r.body, new RegExp(`^# TYPE tcq_${name} (counter|gauge)$`, 'm'));
  const m = await metrics();
  assert.ok(m.tcq_requests_total >= 100 && m.tcq_generated_tokens_total > 1000);
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
