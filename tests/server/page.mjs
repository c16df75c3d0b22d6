// The chat page of GET / in a real browser: Debian's chromium, headless, driven by playwright-core.
// Run by run.sh with TCQ_URL (a server with --ctx 2048).  The tiny model is fast, so the page's
// updates are counted by a MutationObserver, and the stop button is clicked from the page itself at
// the first text of a reply that would otherwise run to the end of the context.
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';

const base = process.env.TCQ_URL;
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
                                        args: ['--no-sandbox', '--headless=new'] });
let rc = 0;
try {
  const page = await browser.newPage();
  const outside = [];
  page.on('request', r => { if (!r.url().startsWith(base)) outside.push(r.url()); });
  await page.goto(base + '/');
  await page.waitForFunction(() => document.getElementById('model').textContent.length > 0);
  assert.equal(await page.textContent('#model'), 'tiny_qwen3');

  await page.fill('#max', '400');

  // 1: type, send, see the reply arrive in several updates, then its tokens/s
  await page.evaluate(() => {
    window.updates = 0;
    new MutationObserver(() => window.updates++).observe(document.getElementById('log'),
      { subtree: true, childList: true, characterData: true });
  });
  await page.fill('#input', 'Hello, who are you?');
  await page.click('#send');
  await page.waitForSelector('.stats.done');
  const stats1 = await page.textContent('.stats.done'), updates = await page.evaluate(() => window.updates);
  console.log(`page: reply 1 in ${updates} page updates; "${stats1}"`);
  assert.ok(updates >= 4, 'the reply appeared piece by piece');
  assert.match(stats1, /^\d+ tokens, [\d.]+ tok\/s$/);
  assert.ok((await page.textContent('.msg.assistant')).length > 0);
  assert.equal(await page.isDisabled('#send'), false);

  // 2: a reply up to the context (2048 positions), stopped from the page at its first text
  await page.fill('#max', '');
  const clicked = page.evaluate(() => new Promise(res => {
    const o = new MutationObserver(() => {
      const m = document.querySelectorAll('.msg.assistant')[1];
      if (m && m.textContent.length) { o.disconnect(); document.getElementById('stop').click(); res(m.textContent); }
    });
    o.observe(document.getElementById('log'), { subtree: true, childList: true, characterData: true });
  }));
  await page.fill('#input', 'Tell me more.');
  await page.click('#send');
  const atStop = await clicked;
  await page.waitForFunction(() => document.querySelectorAll('.stats.done').length === 2);
  const stats2 = (await page.$$eval('.stats.done', e => e.map(x => x.textContent)))[1];
  console.log(`page: reply 2 "${stats2}"`);
  assert.match(stats2, /\(stopped\)$/);
  await page.waitForTimeout(500);
  const after = await page.evaluate(() => document.querySelectorAll('.msg.assistant')[1].textContent);
  assert.ok(after.length < 4 * atStop.length + 64, `stopped early: ${after.length} characters after stop`);
  await page.waitForTimeout(300);
  assert.equal(await page.evaluate(() => document.querySelectorAll('.msg.assistant')[1].textContent), after,
               'no text after stop');
  assert.equal(await page.isDisabled('#stop'), true);
  assert.equal(await page.isDisabled('#send'), false);
  // the server let the request go: no slot busy
  let busy = -1;
  for (let i = 0; i < 50 && busy !== 0; i++) {
    const m = (await (await fetch(base + '/metrics')).text()).match(/^tcq_slots_busy (\d+)$/m);
    busy = Number(m[1]);
    if (busy) await new Promise(r => setTimeout(r, 100));
  }
  assert.equal(busy, 0, 'slots busy after stop');
  assert.deepEqual(outside, [], 'the page fetches nothing from elsewhere');
  console.log('page: ok');
} catch (e) {
  console.log(`page: FAIL ${e && e.stack || e}`);
  rc = 1;
} finally {
  await browser.close();
}
process.exit(rc);
