package chat_test

import (
	"testing"

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
