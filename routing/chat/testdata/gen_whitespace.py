#!/usr/bin/env python3
"""Generates jinja2_whitespace.jsonl: random templates built from whitespace-sensitive pieces,
rendered by Jinja2 set up like transformers' apply_chat_template (trim_blocks, lstrip_blocks,
loopcontrols). Run: python3 gen_whitespace.py > jinja2_whitespace.jsonl (Jinja2 3.1.x)."""
import json
import random

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=["jinja2.ext.loopcontrols"])
rng = random.Random(20261129)
TEXT = ["", " ", "  ", "\t", "\n", "\n\n", " \n", "\n  ", "a", "b c", "x\n", "\n y \n", "\r\n", "\u3000", "{", "}"]
MARK_L = ["", "", "-", "+"]
MARK_R = ["", "", "-", "+"]


def text():
    return "".join(rng.choice(TEXT) for _ in range(rng.randint(0, 3)))


def var():
    return "{{" + rng.choice(["", "", "-"]) + " " + rng.choice(["x", "'v'", "n ~ '|'", "'}}'"]) + " " + rng.choice(["", "", "-"]) + "}}"


def block(inner):
    kind = rng.choice(["if", "for", "set", "comment"])
    l1, r1, l2, r2 = (rng.choice(MARK_L), rng.choice(MARK_R), rng.choice(MARK_L), rng.choice(MARK_R))
    if kind == "comment":
        return "{#" + rng.choice(["", "-"]) + " c " + rng.choice(["", "-"]) + "#}"
    if kind == "set":
        return "{%" + l1 + " set m = 'k' " + r1 + "%}"
    head = {"if": " if x ", "for": " for i in [1, 2] "}[kind]
    end = {"if": " endif ", "for": " endfor "}[kind]
    return "{%" + l1 + head + r1 + "%}" + inner + "{%" + l2 + end + r2 + "%}"


def tmpl(depth=0):
    parts = []
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.35:
            parts.append(text())
        elif r < 0.6:
            parts.append(var())
        elif depth < 2:
            parts.append(block(tmpl(depth + 1)))
        else:
            parts.append(text())
    return "".join(parts)


seen = set()
while len(seen) < 400:
    src = tmpl()
    if src in seen:
        continue
    seen.add(src)
    try:
        out = env.from_string(src).render(x="X", n="N")
    except jinja2.TemplateError:
        continue
    print(json.dumps({"template": src, "rendered": out}, ensure_ascii=False))
