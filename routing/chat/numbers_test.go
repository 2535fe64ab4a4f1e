package chat_test

import (
	"encoding/json"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/routing/chat"
)

// testdata/pyjson_numbers.jsonl (testdata/gen_numbers.py, CPython 3.11): JSON number texts as
// tool-call arguments; tojson must print json.dumps(json.loads(text)) and {{ }} str(value).
func TestPythonNumberFormatting(t *testing.T) {
	tmpl, err := chat.NewTemplate(`{% for m in messages %}{% for c in m.content %}{% endfor %}{% for tc in m.tool_calls %}{{ tc.function.arguments.v | tojson }}|{{ tc.function.arguments.v }}{% endfor %}{% endfor %}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := goldens.Lines(t, "testdata/pyjson_numbers.jsonl")
	matched := 0
	for _, line := range lines {
		var c struct{ Text, Dumps, Str string }
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		args, _ := json.Marshal(`{"v": ` + c.Text + `}`)
		body := `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":` + string(args) + `}}]}]}`
		req, err := chat.ParseRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Render(req)
		if err != nil {
			t.Errorf("%s: %v", c.Text, err)
			continue
		}
		if want := c.Dumps + "|" + c.Str; got != want {
			t.Errorf("%s: got %s want %s", c.Text, got, want)
			continue
		}
		matched++
	}
	t.Logf("pyjson_numbers.jsonl: %d/%d identical", matched, len(lines))
}
