package chat

import (
	"os"
	"testing"
)

func TestLoopsOverContent(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"{% for message in messages %}{% for c in message.content %}{% endfor %}{% endfor %}", true},
		{"{% for m in messages[1:] %}{% for c in m['content'] | selectattr('type', 'equalto', 'text') %}{% endfor %}{% endfor %}", true},
		{"{% set loop_messages = messages[1:] %}{% for m in loop_messages %}{%- for c in m.content if c.type == 'text' %}{% endfor %}{% endfor %}", true},
		{"{% for m in messages %}{{ m.content }}{% endfor %}", false},
		{"{% for m in messages %}{% if m.content is string %}{{ m.content }}{% endif %}{% endfor %}", false},
		{"{% for t in tools %}{% for c in t.content %}{% endfor %}{% endfor %}", false},
		{"{% set first = messages[0] %}{% for c in first.content %}{% endfor %}", false},
		{"{# {% for m in messages %}{% for c in m.content %}{% endfor %}{% endfor %} #}", false},
	} {
		_, blocks, err := normalizeTemplateBlocks(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if got := loopsOverContent(blocks); got != tc.want {
			t.Errorf("%q: got %v want %v", tc.src, got, tc.want)
		}
	}
	for _, tc := range []struct {
		file string
		want bool
	}{
		{"../../testdata/golden/qwen3vl-test-model/chat_template.jinja", true},
		{"../../testdata/golden/qwen3-text-chat-template.jinja", false},
	} {
		src, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		_, blocks, err := normalizeTemplateBlocks(string(src))
		if err != nil {
			t.Fatal(err)
		}
		if got := loopsOverContent(blocks); got != tc.want {
			t.Errorf("%s: got %v want %v", tc.file, got, tc.want)
		}
	}
}
