#!/usr/bin/env python3
"""Generates pyjson_numbers.jsonl: JSON number texts and what Python prints for the value
json.loads gives: json.dumps(v) (what tojson shows) and str(v) (what {{ v }} shows).
Run: python3 gen_numbers.py > pyjson_numbers.jsonl (CPython 3.11+)."""
import json
import random

rng = random.Random(1129)
texts = ["0", "-0", "1", "-1", "0.0", "-0.0", "1.0", "1.50", "1e3", "1E3", "1e-7", "3e-07", "1e16", "1e15",
         "123456789012345678", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
         "-9223372036854775809", "12345678901234567890", "1e308", "1e309", "-1e309", "1e-324", "5e-324",
         "0.1", "0.2", "0.30000000000000004", "100.0", "1000000.0", "1e22", "1e21", "0.0001", "0.00001",
         "123.456e-10", "2.5e-05", "1.7976931348623157e308", "4.9e-324", "9007199254740993",
         "9007199254740993.0", "1" + "0" * 40, "-" + "9" * 30]
for _ in range(300):
    k = rng.random()
    if k < 0.3:
        t = str(rng.randint(-10**rng.randint(1, 30), 10**rng.randint(1, 30)))
    elif k < 0.6:
        t = f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 17)}f}"
    else:
        m = f"{rng.uniform(-10, 10):.{rng.randint(0, 17)}f}"
        t = f"{m}{rng.choice('eE')}{rng.choice(['', '+', '-'])}{rng.randint(0, 330)}"
    texts.append(t)
for t in texts:
    v = json.loads(t)
    print(json.dumps({"text": t, "dumps": json.dumps(v), "str": str(v)}))
