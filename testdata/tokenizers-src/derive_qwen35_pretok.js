// Derives qwen35_pretok/tokenizer.json from the Qwen3 tokenizer.json (golden README,
// "qwen35_pretok"): only the Split regex of the pre_tokenizer changes, from Qwen3's
// \p{L}+ word to Qwen3.5's [\p{L}\p{M}]+ (and marks leave the punctuation class).
// The replacement is textual (one line), so every other byte stays as it was.
// Usage: node derive_qwen35_pretok.js IN OUT
const fs = require("fs");
const [inPath, outPath] = process.argv.slice(2);
const qwen3 = String.raw`"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"`;
const qwen35 = String.raw`"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"`;
const src = fs.readFileSync(inPath, "utf8");
const parts = src.split(qwen3);
if (parts.length !== 2) {
  console.error(`derive_qwen35_pretok: want exactly one Qwen3 Split regex in ${inPath}, found ${parts.length - 1}`);
  process.exit(1);
}
const out = parts.join(qwen35);
const a = JSON.parse(src), b = JSON.parse(out);
a.pre_tokenizer.pretokenizers[0].pattern.Regex = b.pre_tokenizer.pretokenizers[0].pattern.Regex;
if (JSON.stringify(a) !== JSON.stringify(b)) {
  console.error("derive_qwen35_pretok: more than the Split regex changed");
  process.exit(1);
}
fs.writeFileSync(outPath, out);
