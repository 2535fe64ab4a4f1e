package chat_test

import (
	"encoding/json"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/routing/chat"
)

// Jinja2 3.1 output (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False) for
// whitespace cases the engine alone gets wrong or that exercise each lexer rule.
func TestJinja2Whitespace(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"{% for x in [1,2] %}{{ x }}\n{% endfor %}", "1\n2\n"},
		{"{% for x in [1,2] %}{{ x }}\n  {% endfor %}", "1\n2\n"},
		{"{% for x in [1,2] %}{{ x }}\n\n{% endfor %}", "1\n\n2\n\n"},
		{"a \n{{ 'x' }}{%- if true %}y{% endif %}", "a \nxy"},
		{"  {% if true %}\nX\n  {% endif %}\nb", "X\nb"},
		{"{{ 1 }}  {% if true %}y{% endif %}", "1  y"},
		{"x\r\ny\r\n", "x\ny"},
		{"x\n\n", "x\n"},
		{"{# c #}\n  {%- if true -%}\n  a  \n{%- endif %}", "a"},
		{"{# c #}\n  {% if true %}a{% endif %}", "a"},
		{"{% raw %}{{ x }}{% endraw %}", "{{ x }}"},
		{"{%- raw -%}\n {{ x }}\n  {%- endraw %}\nz", "{{ x }}z"},
		{"{{ '}}' }}|{{ \"%}\" }}", "}}|%}"},
		{"{{- ' a ' -}}  \n b", " a b"},
		{"{ {%- if true %}x{% endif %}", "{x"},
		{"{% for x in [1] %}\n{{ x }}{% endfor %}", "1"},
		{"\t{%+ if true %}a{% endif +%}\nb", "\ta\nb"},
		{"a\u3000{%- if true %}b{% endif %}", "ab"},
		{"{% set s = 'x' %}  {{ s }}", "  x"},
	} {
		tmpl, err := chat.NewTemplate(tc.src, nil)
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		got, err := tmpl.RenderInput(chat.Input{Messages: []byte(`[]`)})
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.src, got, tc.want)
		}
	}
	for _, bad := range []string{"{{ x", "{% if %", "{# c", "{% raw %}x", "{{ 'a }}"} {
		if _, err := chat.NewTemplate(bad, nil); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}

// testdata/jinja2_whitespace.jsonl: random templates from whitespace-sensitive pieces (text with
// spaces, tabs, CR/LF, U+3000; {{ }} with and without "-"; if/for/set with "-" and "+" on
// either side; comments), rendered by Jinja2 3.1.6 (testdata/gen_whitespace.py).
func TestJinja2WhitespaceRandom(t *testing.T) {
	lines := goldens.Lines(t, "testdata/jinja2_whitespace.jsonl")
	matched := 0
	for _, line := range lines {
		var c struct {
			Template string `json:"template"`
			Rendered string `json:"rendered"`
		}
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		tmpl, err := chat.NewTemplate(c.Template, nil)
		if err != nil {
			t.Errorf("%q: %v", c.Template, err)
			continue
		}
		got, err := tmpl.RenderInput(chat.Input{Messages: []byte(`[]`), Kwargs: []byte(`{"x":"X","n":"N"}`)})
		if err != nil {
			t.Errorf("%q: %v", c.Template, err)
			continue
		}
		if got != c.Rendered {
			t.Errorf("%q:\n got %q\nwant %q", c.Template, got, c.Rendered)
			continue
		}
		matched++
	}
	t.Logf("jinja2_whitespace.jsonl: %d/%d identical", matched, len(lines))
}
