// Generates vectors.jsonl: the token ids of texts encoded with add_special_tokens true and false by
// independent implementations, for every tokenizer folder of testdata/ and the derived
// post-processors of variants.json. See SOURCE.md (tool versions, command).
//
//   reading "tokenizer.json":  Hugging Face tokenizers (Rust, npm "tokenizers" 0.23.2),
//                              Tokenizer.fromString(tokenizer.json) and encode(text, null,
//                              {addSpecialTokens}); for a variant, tokenizer.json with its
//                              post_processor member replaced (Rust deserializes it).
//   reading "transformers4":   the same Rust tokenizer with the post-processor transformers 4.x
//                              LlamaTokenizerFast/GemmaTokenizerFast.update_post_processor sets at
//                              load time (models/llama/tokenization_llama_fast.py): for
//                              tokenizer_class LlamaTokenizer[Fast]/GemmaTokenizer[Fast] only,
//                              templateProcessing("<bos>:0 $A:0[ <eos>:0]", …) from
//                              tokenizer_config.json add_bos_token/add_eos_token (defaults true/false).
//   reading "transformers_js": @huggingface/transformers 4.3.1 AutoTokenizer (tokenizer.json plus
//                              tokenizer_config.json) encode(text, {add_special_tokens}), recorded as
//                              a cross-check only.
import fs from 'node:fs';
import path from 'node:path';
import { Tokenizer, templateProcessing } from 'tokenizers';
import { AutoTokenizer, env } from '@huggingface/transformers';

const testdata = path.resolve(process.argv[2] ?? '..');
const out = process.argv[3] ?? 'vectors.jsonl';
env.allowRemoteModels = false;
env.localModelPath = '/';

const texts = [
  'Hello world',
  '',
  ' leading space and trailing space ',
  'The quick brown fox jumps over the lazy dog.\nSecond line\n\nThird: 1234567 numbers.',
  'naïve café — 日本語のテキスト, emoji 🦀🚀',
  '<|im_start|>user\nhi<|im_end|>',
  '<bos><s><|begin_of_text|><｜begin▁of▁sentence｜> literal special tokens',
  // long enough for several 16-token blocks (tests/integration/special_tokens_test.go)
  'Summarize the following notes. ' + Array.from({ length: 60 }, (_, i) => `router${i % 10} cache${(i * 7) % 10} block${i}`).join(' '),
];
const folders = ['tokenizers/llama3', 'tokenizers/gemma3', 'tokenizers/deepseek_v3', 'tokenizers/gptoss',
  'tokenizers/qwen35_pretok', 'golden/qwen3vl-test-model', 'nemotron-test-model'];
const variants = JSON.parse(fs.readFileSync(path.join(path.dirname(new URL(import.meta.url).pathname), 'variants.json'), 'utf8'));

const lines = [];
async function rust(name, reading, tok) {
  for (const text of texts) {
    for (const add of [true, false]) {
      const enc = await tok.encode(text, null, { addSpecialTokens: add });
      lines.push({ model: name, reading, text, add_special_tokens: add, ids: enc.getIds() });
    }
  }
}

// transformers 4.x update_post_processor (tokenization_llama_fast.py), transcribed.
const overrides = { LlamaTokenizer: ['<s>', '</s>'], GemmaTokenizer: ['<bos>', '<eos>'] };
function content(v) { return v && typeof v === 'object' ? v.content : v; }

// transformers4 returns the Rust tokenizer of json with the post-processor update_post_processor
// builds from cfg (tokenizer_config.json).
function transformers4(json, cfg) {
  const cls = (cfg.tokenizer_class ?? '').replace(/Fast$/, '');
  const tok = Tokenizer.fromString(json);
  const addBos = cfg.add_bos_token ?? true, addEos = cfg.add_eos_token ?? false;
  const bos = 'bos_token' in cfg ? content(cfg.bos_token) : overrides[cls][0];
  const eos = 'eos_token' in cfg ? content(cfg.eos_token) : overrides[cls][1];
  const single = `${addBos ? bos + ':0 ' : ''}$A:0${addEos ? ' ' + eos + ':0' : ''}`;
  const pair = `${single}${addBos ? ' ' + bos + ':1' : ''} $B:1${addEos ? ' ' + eos + ':1' : ''}`;
  const special = [];
  if (addBos) special.push([bos, tok.tokenToId(bos)]);
  if (addEos) special.push([eos, tok.tokenToId(eos)]);
  tok.setPostProcessor(templateProcessing(single, pair, special));
  return tok;
}

for (const f of folders) {
  const dir = path.join(testdata, f);
  const json = fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8');
  await rust(f, 'tokenizer.json', Tokenizer.fromString(json));
  const cfgPath = path.join(dir, 'tokenizer_config.json');
  if (!fs.existsSync(cfgPath)) continue;
  const cfg = JSON.parse(fs.readFileSync(cfgPath, 'utf8'));
  const cls = (cfg.tokenizer_class ?? '').replace(/Fast$/, '');
  if (overrides[cls]) await rust(f, 'transformers4', transformers4(json, cfg));
  const tj = await AutoTokenizer.from_pretrained(dir);
  for (const text of texts) {
    for (const add of [true, false]) {
      lines.push({ model: f, reading: 'transformers_js', text, add_special_tokens: add, ids: tj.encode(text, { add_special_tokens: add }) });
    }
  }
}

for (const [name, v] of Object.entries(variants)) {
  const json = fs.readFileSync(path.join(testdata, v.base, 'tokenizer.json'), 'utf8');
  if (v.tokenizer_config) {
    // A tokenizer_config.json variant: the transformers reading over the base tokenizer.json.
    await rust(name, 'transformers4', transformers4(json, v.tokenizer_config));
    continue;
  }
  const file = JSON.parse(json);
  file.post_processor = v.post_processor;
  await rust(name, 'tokenizer.json', Tokenizer.fromString(JSON.stringify(file)));
}

fs.writeFileSync(out, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
console.error(`wrote ${lines.length} vectors to ${out}`);
