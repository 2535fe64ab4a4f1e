#!/usr/bin/env python3
"""Writes tokenizer.json of kvroute's Nemotron 3 Nano Omni test model (deterministic, stdlib only).

No public copy of the real Nemotron tokenizer was available (golden/nemotron/README.md §3-4). This is a
small byte-level BPE in the one shape routing/tokenizer loads (Qwen's split regex + ByteLevel), with the
ids the README reports: <image> 18, <img> 19, </img> 20, <so_embedding> 27; <video> is NOT an added token
(Dynamo's code: "<video>" is not an atomic Nemotron token), so the prompt placeholder is a run of ids.
Byte tokens are ids 32-287 (GPT-2 byte order), merges of a few words of the separators and of the
test prompts follow from 288. Run: python3 gen_tokenizer.py > tokenizer.json
"""
import json


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


B2U = bytes_to_unicode()
ADDED = [(0, "<unk>"), (1, "<s>"), (2, "</s>"), (10, "<|im_start|>"), (11, "<|im_end|>"), (18, "<image>"),
         (19, "<img>"), (20, "</img>"), (26, "<so_start>"), (27, "<so_embedding>"), (28, "<so_end>")]
WORDS = ["Frame", " frame", " sampled", " at", " seconds", " and", "<video", " the", " clip", "user", "assistant",
         "system", "Describe", " Describe", " video", " this", " What", " happens", " in", " seconds:"]

vocab = {}
for b in range(256):
    vocab[B2U[b]] = 32 + b
merges = []
next_id = 288
for w in WORDS:
    syms = [B2U[b] for b in w.encode("utf-8")]
    cur = syms[0]
    for s in syms[1:]:
        pair = [cur, s]
        cur = cur + s
        if cur not in vocab:
            vocab[cur] = next_id
            next_id += 1
            merges.append(pair)

split = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
doc = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True} for i, c in ADDED],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False}, bl]},
    "post_processor": bl, "decoder": bl,
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
              "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
              "vocab": vocab, "merges": merges},
}
print(json.dumps(doc, ensure_ascii=False, indent=1))
