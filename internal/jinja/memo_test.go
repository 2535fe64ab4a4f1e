package jinja

import (
	"fmt"
	"strings"
	"testing"
)

// memoPool is the messages the memo tests draw from: plain text turns, a turn with parts, a
// tool turn and a system turn.
var memoPool = []map[string]any{
	{"role": "system", "content": "You are terse."},
	{"role": "user", "content": "first question"},
	{"role": "assistant", "content": "<think>\nhm\n</think>\n\nfirst answer"},
	{"role": "user", "content": "second question"},
	{"role": "assistant", "content": "second answer"},
	{"role": "tool", "content": "tool output"},
	{"role": "user", "content": "third question", "parts": []any{map[string]any{"type": "text", "text": "p1"}, map[string]any{"type": "image"}}},
	{"role": "assistant", "content": "third answer"},
}

type memoRender struct {
	msgs []int          // indices into memoPool
	vars map[string]any // other variables
	// replays is the number of iterations this render must replay (-1: not checked).
	replays int
}

// TestMemoMatchesFreshRender renders each case's sequence twice: with the messages as keyed
// shared dicts reused across the renders (so later renders may replay recorded iterations),
// and with fresh unshared values (no memo). Outputs and errors must be identical, and the
// number of replayed iterations is checked where the rules fix it: a replay must happen where
// nothing the iteration read changed, and must not where something did.
func TestMemoMatchesFreshRender(t *testing.T) {
	grow := func(vars map[string]any, replays ...int) []memoRender {
		seqs := [][]int{{0, 1}, {0, 1, 2, 3}, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5, 6, 7}}
		out := make([]memoRender, len(seqs))
		for i, s := range seqs {
			out[i] = memoRender{msgs: s, vars: vars, replays: -1}
			if i < len(replays) {
				out[i].replays = replays[i]
			}
		}
		return out
	}
	cases := []struct {
		name    string
		src     string
		renders []memoRender
	}{
		{"plain loop replays every earlier message",
			`{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}`,
			grow(nil, 0, 2, 4, 6)},
		{"loop.last: earlier turns replay, the previous last does not",
			`{% for m in messages %}{{ m.content }}{% if loop.last %}!{% endif %}{% endfor %}`,
			grow(nil, 0, 1, 3, 5)},
		{"loop.index printed: a replay needs the same position",
			`{% for m in messages %}{{ loop.index }}{{ m.content }}{% endfor %}`,
			grow(nil, 0, 2, 4, 6)},
		{"loop.length printed: never replays while the list grows",
			`{% for m in messages %}{{ loop.length }}{{ m.content }}{% endfor %}`,
			grow(nil, 0, 0, 0, 0)},
		{"outside variable read: replays while it is unchanged",
			`{% for m in messages %}{{ prefix }}{{ m.content }}{% endfor %}`,
			[]memoRender{
				{msgs: []int{1, 2}, vars: map[string]any{"prefix": "a"}, replays: 0},
				{msgs: []int{1, 2, 3}, vars: map[string]any{"prefix": "a"}, replays: 2},
				{msgs: []int{1, 2, 3, 4}, vars: map[string]any{"prefix": "b"}, replays: 0},
				{msgs: []int{1, 2, 3, 4}, vars: map[string]any{"prefix": 1}, replays: 0},
				{msgs: []int{1, 2, 3, 4}, vars: map[string]any{}, replays: 0},
				{msgs: []int{1, 2, 3, 4}, vars: map[string]any{}, replays: 4},
			}},
		{"an undefined variable defined later",
			`{% for m in messages %}{% if flag is defined %}F{% endif %}{{ m.content }}{% endfor %}`,
			[]memoRender{
				{msgs: []int{1, 2}, replays: 0},
				{msgs: []int{1, 2}, vars: map[string]any{"flag": false}, replays: 0},
				{msgs: []int{1, 2}, vars: map[string]any{"flag": true}, replays: 2},
			}},
		{"Qwen3's last query index: the condition is recorded, not the index",
			`{% set ns = namespace(last=-1) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.last = loop.index0 %}{% endif %}{% endfor %}` +
				`{% for m in messages %}{% if loop.index0 > ns.last %}[after]{% else %}[before]{% endif %}{{ m.content }}{% endfor %}`,
			// The first loop records only the iterations that write nothing (the non-user
			// turns). The second replays every message that stays before the last query.
			grow(nil, 0, 3, 6, 8)},
		{"namespace written in the loop: never recorded",
			`{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ ns.n }}{{ m.content }}{% endfor %}`,
			grow(nil, 0, 0, 0, 0)},
		{"namespace attribute printed",
			`{% set ns = namespace(tag=tag) %}{% for m in messages %}{{ ns.tag }}{{ m.content }}{% endfor %}`,
			[]memoRender{
				{msgs: []int{1, 2}, vars: map[string]any{"tag": "x"}, replays: 0},
				{msgs: []int{1, 2}, vars: map[string]any{"tag": "x"}, replays: 2},
				{msgs: []int{1, 2}, vars: map[string]any{"tag": "y"}, replays: 0},
			}},
		{"a variable set in the iteration shadows the outside one",
			`{% for m in messages %}{% set prefix = m.role %}{{ prefix }}:{{ m.content }}{% endfor %}`,
			[]memoRender{
				{msgs: []int{1, 2}, vars: map[string]any{"prefix": "a"}, replays: 0},
				{msgs: []int{1, 2}, vars: map[string]any{"prefix": "b"}, replays: 2},
			}},
		{"read before set in the iteration is a dependency",
			`{% for m in messages %}{{ prefix }}{% set prefix = m.role %}{{ prefix }}{% endfor %}`,
			[]memoRender{
				{msgs: []int{1, 2}, vars: map[string]any{"prefix": "a"}, replays: 0},
				{msgs: []int{1, 2}, vars: map[string]any{"prefix": "b"}, replays: 0},
				{msgs: []int{1, 2}, vars: map[string]any{"prefix": "b"}, replays: 2},
			}},
		{"the previous message through messages: the condition is recorded",
			`{% for m in messages %}{% if loop.index0 > 0 and messages[loop.index0 - 1].role == 'tool' %}T{% endif %}{{ m.content }}{% endfor %}`,
			grow(nil, 0, 2, 4, 6)},
		{"the previous message through messages, printed: recorded only for the first",
			`{% for m in messages %}{% if loop.index0 > 0 %}{{ messages[loop.index0 - 1].role }}{% endif %}{{ m.content }}{% endfor %}`,
			grow(nil, 0, 1, 1, 1)},
		{"previtem is a shared message, compared by identity",
			`{% for m in messages %}{% if loop.previtem is defined %}{{ loop.previtem.role }}>{% endif %}{{ m.content }}{% endfor %}`,
			grow(nil, 0, 2, 4, 6)},
		{"a macro defined outside: never recorded",
			`{% macro show(x) %}[{{ x }}]{% endmacro %}{% for m in messages %}{{ show(m.content) }}{% endfor %}`,
			grow(nil, 0, 0, 0, 0)},
		{"a macro defined inside the iteration",
			`{% for m in messages %}{% macro show(x) %}[{{ x }}]{% endmacro %}{{ show(m.content) }}{% endfor %}`,
			grow(nil, 0, 2, 4, 6)},
		{"strftime_now: never recorded",
			`{% for m in messages %}{{ strftime_now('%Y') | length }}{{ m.content }}{% endfor %}`,
			grow(nil, 0, 0, 0, 0)},
		{"builtins and filters are constants",
			`{% for m in messages %}{% for i in range(2) %}{{ i }}{% endfor %}{{ m.content | upper | trim }}{% endfor %}`,
			grow(nil, 0, 2, 4, 6)},
		{"continue: not recorded, output unchanged",
			`{% for m in messages %}{% if m.role == 'tool' %}{% continue %}{% endif %}{{ m.content }}{% endfor %}`,
			grow(nil, -1, -1, -1, -1)},
		{"break",
			`{% for m in messages %}{% if m.role == 'tool' %}{% break %}{% endif %}{{ m.content }}{% endfor %}`,
			grow(nil, -1, -1, -1, -1)},
		{"loop.cycle: never recorded",
			`{% for m in messages %}{{ loop.cycle('a', 'b') }}{{ m.content }}{% endfor %}`,
			grow(nil, 0, 0, 0, 0)},
		{"the loop object passed whole: never recorded",
			`{% for m in messages %}{{ loop | length }}{{ m.content }}{% endfor %}`,
			grow(nil, 0, 0, 0, 0)},
		{"inner loop over a shared part list",
			`{% for m in messages %}{% if m.parts is defined %}{% for p in m.parts %}{{ loop.index }}{{ p.type }}{% endfor %}{% endif %}{{ m.content }}{% endfor %}`,
			grow(nil, 0, 2, 4, 6)},
		{"a condition with a call is not recorded as a condition; its reads are",
			`{% for m in messages %}{% if m.content.startswith('first') and flag %}*{% endif %}{{ m.content }}{% endfor %}`,
			[]memoRender{
				{msgs: []int{1, 2}, vars: map[string]any{"flag": true}, replays: 0},
				{msgs: []int{1, 2}, vars: map[string]any{"flag": false}, replays: 1}, // message 2 never read flag
				{msgs: []int{1, 2}, vars: map[string]any{"flag": false}, replays: 2},
			}},
		{"filter of an outside list in a condition",
			`{% for m in messages %}{% if messages | length > 3 %}L{% endif %}{{ m.content }}{% endfor %}`,
			grow(nil, 0, 0, 4, 6)},
		{"set block and filter block inside the iteration",
			`{% for m in messages %}{% set b %}{{ prefix }}{{ m.role }}{% endset %}{% filter upper %}{{ b }}{% endfilter %}{% endfor %}`,
			[]memoRender{
				{msgs: []int{1, 2}, vars: map[string]any{"prefix": "a"}, replays: 0},
				{msgs: []int{1, 2}, vars: map[string]any{"prefix": "b"}, replays: 0},
				{msgs: []int{1, 2, 3}, vars: map[string]any{"prefix": "b"}, replays: 2},
			}},
		{"tojson of the message",
			`{% for m in messages %}{{ m | tojson }}{% endfor %}`,
			grow(nil, 0, 2, 4, 6)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := Compile(c.src)
			if err != nil {
				t.Fatal(err)
			}
			keyed := make([]Value, len(memoPool))
			for i, m := range memoPool {
				keyed[i] = ShareKeyed(FromGoValue(m), 1<<20, false)
			}
			for ri, r := range c.renders {
				fresh := make([]Value, len(r.msgs))
				shared := make([]Value, len(r.msgs))
				for i, k := range r.msgs {
					fresh[i], shared[i] = FromGoValue(memoPool[k]), keyed[k]
				}
				data := func(msgs []Value) map[string]Value {
					d := map[string]Value{"messages": NewList(msgs)}
					for k, v := range r.vars {
						d[k] = FromGoValue(v)
					}
					return d
				}
				want, wantErr := tmpl.RenderValues(data(fresh))
				before, _ := MemoCounts()
				got, gotErr := tmpl.RenderValues(data(shared))
				after, _ := MemoCounts()
				if got != want || (gotErr == nil) != (wantErr == nil) {
					t.Fatalf("render %d: memo %q (err %v), fresh %q (err %v)", ri, got, gotErr, want, wantErr)
				}
				if r.replays >= 0 && int(after-before) != r.replays {
					t.Errorf("render %d: %d iterations replayed, want %d", ri, after-before, r.replays)
				}
				// The same render in pieces (README change 5): the texts join to the fresh
				// render, and each replayed piece carries a note.
				pieces, pErr := tmpl.RenderPieces(data(shared), 0)
				var joined strings.Builder
				for _, p := range pieces {
					joined.WriteString(p.Text)
					if p.Replayed && p.Note == nil {
						t.Fatalf("render %d: replayed piece %q without a note", ri, p.Text)
					}
				}
				if joined.String() != want || (pErr == nil) != (wantErr == nil) {
					t.Fatalf("render %d: pieces join to %q (err %v), fresh %q (err %v)", ri, joined.String(), pErr, want, wantErr)
				}
			}
		})
	}
}

// TestSharedValuesAreReadOnly: the methods and assignments that modify a list or dict fail on
// shared values (transformers' ImmutableSandboxedEnvironment refuses them on any value) and
// leave the value as it was.
func TestSharedValuesAreReadOnly(t *testing.T) {
	for _, src := range []string{
		`{% for m in messages %}{% set ns = m.parts.append(1) %}{% endfor %}`,
		`{% for m in messages %}{{ m.parts.pop() }}{% endfor %}`,
		`{% for m in messages %}{{ m.parts.insert(0, 1) }}{% endfor %}`,
		`{% for m in messages %}{{ m.pop('role') }}{% endfor %}`,
		`{% for m in messages %}{{ m.update({'role': 'x'}) }}{% endfor %}`,
		`{% for m in messages %}{% set m.role = 'x' %}{% endfor %}`,
		`{% set first = messages[0] %}{% set first.role = 'x' %}`,
	} {
		tmpl, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		m := ShareKeyed(FromGoValue(memoPool[6]), 1<<20, false)
		before := printValue(m)
		_, err = tmpl.RenderValues(map[string]Value{"messages": NewList([]Value{m})})
		if err == nil || !strings.Contains(err.Error(), "object") {
			t.Errorf("%s: err %v, want a refusal", src, err)
		}
		if after := printValue(m); after != before {
			t.Errorf("%s: shared message changed: %s → %s", src, before, after)
		}
		// The same template on an unshared value keeps upstream's behaviour (no error).
		if _, err := tmpl.RenderValues(map[string]Value{"messages": NewList([]Value{FromGoValue(memoPool[6])})}); err != nil {
			t.Errorf("%s on an unshared value: %v", src, err)
		}
	}
}

// TestMemoOutputBound: an iteration whose output is longer than the slot's maxOut is not
// recorded.
func TestMemoOutputBound(t *testing.T) {
	tmpl, err := Compile(`{% for m in messages %}{{ m.content }}{{ m.content }}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	m := ShareKeyed(FromGoValue(map[string]any{"content": strings.Repeat("x", 100)}), 150, false)
	for range 2 {
		if _, err := tmpl.RenderValues(map[string]Value{"messages": NewList([]Value{m})}); err != nil {
			t.Fatal(err)
		}
	}
	if n := MemoBytes(m); n != 0 {
		t.Fatalf("recorded %d bytes over a 150-byte bound", n)
	}
	m2 := ShareKeyed(FromGoValue(map[string]any{"content": strings.Repeat("x", 100)}), 200, false)
	if _, err := tmpl.RenderValues(map[string]Value{"messages": NewList([]Value{m2})}); err != nil {
		t.Fatal(err)
	}
	if n := MemoBytes(m2); n != 200 {
		t.Fatalf("recorded %d bytes, want 200", n)
	}
}

// TestMemoDeferFirst: with deferFirst the first iteration over a keyed dict runs untraced and
// records nothing, the second records, the third replays; outputs equal the fresh render.
func TestMemoDeferFirst(t *testing.T) {
	tmpl, err := Compile(`{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	m := ShareKeyed(FromGoValue(memoPool[1]), 1<<20, true)
	want, _ := tmpl.RenderValues(map[string]Value{"messages": NewList([]Value{FromGoValue(memoPool[1])})})
	var got []string
	for i, wantBytes := range []int{0, len(want), len(want)} {
		r0, _ := MemoCounts()
		out, err := tmpl.RenderValues(map[string]Value{"messages": NewList([]Value{m})})
		r1, _ := MemoCounts()
		if err != nil || out != want {
			t.Fatalf("render %d: %q (%v), want %q", i, out, err, want)
		}
		if n := MemoBytes(m); n != wantBytes {
			t.Fatalf("render %d: %d bytes recorded, want %d", i, n, wantBytes)
		}
		got = append(got, fmt.Sprint(r1-r0))
	}
	if strings.Join(got, ",") != "0,0,1" {
		t.Fatalf("replays per render %v, want 0,0,1", got)
	}
}
