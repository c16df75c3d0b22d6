// node tests/cli/cut_tokenizer.mjs SRC DST N: DST/tokenizer.json = SRC's with only ids < N (and
// the merges whose result survives), DST/tokenizer_config.json copied.  A model whose vocabulary
// is larger than its tokenizer's, as Qwen3's 151936 rows hold 151669 tokens: tests/cli/model_run.sh
// and tests/server/run.sh use it so that greedy replies hold ids without text.
import fs from 'node:fs';
const [src, dst, n] = process.argv.slice(2);
const t = JSON.parse(fs.readFileSync(src + '/tokenizer.json', 'utf8')), m = t.model;
m.vocab = Object.fromEntries(Object.entries(m.vocab).filter(([, id]) => id < Number(n)));
m.merges = m.merges.filter(p => (Array.isArray(p) ? p.join('') : p.replace(' ', '')) in m.vocab);
fs.writeFileSync(dst + '/tokenizer.json', JSON.stringify(t));
fs.copyFileSync(src + '/tokenizer_config.json', dst + '/tokenizer_config.json');
