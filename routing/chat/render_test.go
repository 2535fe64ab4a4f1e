package chat_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/routing/chat"
)

func mustTemplate(t *testing.T, src string) *chat.Template {
	t.Helper()
	tmpl, err := chat.NewTemplate(src, map[string]any{"eos_token": "<E>", "bos_token": "<B>"})
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func render(t *testing.T, tmpl *chat.Template, body string) (string, error) {
	t.Helper()
	r, err := chat.ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl.Render(r)
}

// Tool-call arguments go through json.loads and back through tojson: Python's json.dumps
// output (", " / ": " separators, float repr, raw U+2028/2029 and non-ASCII, exact big ints).
func TestRenderToJSONPythonSemantics(t *testing.T) {
	tmpl := mustTemplate(t, `{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.arguments | tojson }}|{{ c.function.arguments.big }}|{% endfor %}{% endfor %}`)
	for _, tc := range []struct{ args, want string }{
		{`{\"a\":1.50,\"b\":1e3,\"c\":-0.0,\"d\":[1,2.0,3e-7],\"e\":12345678901234567890}`,
			`{"a": 1.5, "b": 1000.0, "c": -0.0, "d": [1, 2.0, 3e-07], "e": 12345678901234567890}||`},
		{`{\"big\":-123456789012345678901234567890,\"f\":1e16,\"g\":0.0001,\"h\":1e-5,\"i\":1e400,\"j\":-0}`,
			`{"big": -123456789012345678901234567890, "f": 1e+16, "g": 0.0001, "h": 1e-05, "i": Infinity, "j": 0}|-123456789012345678901234567890|`},
		{`{\"s\":\"\u2028\u2029 é \\\"q\\\" \\\\ \\n <&>\",\"t\":true,\"n\":null}`,
			"{\"s\": \"\u2028\u2029 é \\\"q\\\" \\\\ \\n <&>\", \"t\": true, \"n\": null}||"},
		{`{\"k\":1,\"z\":2,\"k\":3}`, `{"k": 3, "z": 2}||`},
		{`{\"x\":NaN,\"y\":-Infinity}`, `{"x": NaN, "y": -Infinity}||`},
		{`not json`, `{}||`},
		{``, `{}||`},
	} {
		body := `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"` + tc.args + `"}}]}]}`
		got, err := render(t, tmpl, body)
		if err != nil {
			t.Errorf("%s: %v", tc.args, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.args, got, tc.want)
		}
	}
}

// A string that holds the big-integer marker is refused only when a big integer needs marking.
func TestRenderReservedRune(t *testing.T) {
	tmpl := mustTemplate(t, `{% for m in messages %}{% for c in m.content %}{{ c.text }}{% endfor %}{% endfor %}`)
	if got, err := render(t, tmpl, `{"messages":[{"role":"user","content":"a`+"\U0010FFFD"+`b"}]}`); err != nil || got != "a\U0010FFFDb" {
		t.Errorf("marker without big int: %q %v", got, err)
	}
	_, err := render(t, tmpl, `{"messages":[{"role":"user","content":"a`+"\U0010FFFD"+`b"}],"chat_template_kwargs":{"n":99999999999999999999}}`)
	if !errors.Is(err, chat.ErrRender) {
		t.Errorf("marker with big int: err %v, want ErrRender", err)
	}
}

func TestRenderErrors(t *testing.T) {
	tmpl := mustTemplate(t, `{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}{% endif %}{{ m.role }}{% endfor %}`)
	for _, tc := range []struct{ body, want string }{
		{`{"messages":[{"role":"tool","content":"x"}]}`, "no tools here"},
		{`{"messages":[{"role":"wizard","content":"x"}]}`, `unknown role "wizard"`},
		{`{"messages":[{"role":"user","content":{"a":1}}]}`, "content is object"},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "text part: text is number, not a string"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"x"}]}]}`, "function missing"},
	} {
		_, err := render(t, tmpl, tc.body)
		if err == nil || !errors.Is(err, chat.ErrRender) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want ErrRender containing %q", tc.body, err, tc.want)
		}
	}
}

// The Jinja features chat templates rely on, with Jinja2's output.
func TestRenderJinjaFeatures(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"chat_template_kwargs":{"enable_thinking":false,"n":2.0}}`
	for _, tc := range []struct{ src, want string }{
		// trim_blocks drops the newline after a block tag; lstrip_blocks strips the indent before it.
		{"{% for m in messages %}\n    {% if m.role == 'user' %}\n{{ m.content }}\n    {% endif %}\n{% endfor %}", "a\nc\n"},
		{"{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}", "uau"},
		{"{% for m in messages[1:] %}{{ loop.index }}{% endfor %}", "12"},
		{"{% set ns = namespace(last=-1) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.last = loop.index0 %}{% endif %}{% endfor %}{{ ns.last }}", "2"},
		{"{% for m in messages %}{% if loop.index0 == 1 %}{% continue %}{% endif %}{% if loop.last %}{% break %}{% endif %}{{ m.role }}{% endfor %}", "user"},
		{"{{ enable_thinking }} {{ n }} {{ add_generation_prompt }} {{ bos_token }}{{ eos_token }} {{ tools }}", "False 2.0 True <B><E> None"},
		{"{{ '  x\\n'.strip('\\n') }}|{{ 'a</think>b'.split('</think>')[-1] }}", "  x|b"},
	} {
		tmpl := mustTemplate(t, tc.src)
		got, err := render(t, tmpl, body)
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.src, got, tc.want)
		}
	}
	tmpl := mustTemplate(t, `{{ strftime_now('%Y') }}`)
	got, err := render(t, tmpl, body)
	if y := time.Now().Year(); err != nil || (got != strconv.Itoa(y) && got != strconv.Itoa(y+1)) {
		t.Errorf("strftime_now: %q %v", got, err)
	}
}

// vLLM's content format: a template that never loops over message content gets strings, with
// text parts joined by "\n"; media parts are then an error.
func TestRenderStringContentFormat(t *testing.T) {
	tmpl := mustTemplate(t, `{% for m in messages %}[{{ m.content }}]{% endfor %}`)
	got, err := render(t, tmpl, `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":null}]}`)
	if err != nil || got != "[a\nb][]" {
		t.Errorf("string format: %q %v", got, err)
	}
	_, err = render(t, tmpl, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`)
	if !errors.Is(err, chat.ErrRender) {
		t.Errorf("media with string format: err %v", err)
	}
}

func TestLoadTemplateOrder(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := chat.LoadTemplate(dir); !errors.Is(err, chat.ErrNoTemplate) {
		t.Fatalf("empty dir: %v", err)
	}
	body := `{"messages":[{"role":"user","content":"x"}]}`
	check := func(want, file string) {
		t.Helper()
		tmpl, err := chat.LoadTemplate(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := render(t, tmpl, body); err != nil || got != want || filepath.Base(tmpl.File) != file {
			t.Errorf("got %q (%v) from %s, want %q from %s", got, err, tmpl.File, want, file)
		}
	}
	write("tokenizer_config.json", `{"eos_token":{"content":"<E>","special":true},"bos_token":null,"pad_token":"<P>",
		"additional_special_tokens":["<x>","<y>"],"chat_template":[{"name":"tool_use","template":"T"},{"name":"default","template":"cfg{{ eos_token }}{{ pad_token }}{{ bos_token is defined }}{{ additional_special_tokens|length }}"}]}`)
	check("cfg<E><P>False2", "tokenizer_config.json")
	write("chat_template.json", `{"chat_template":"json{{ eos_token }}"}`)
	check("json<E>", "chat_template.json")
	write("chat_template.jinja", "jinja{{ pad_token }}")
	check("jinja<P>", "chat_template.jinja")
	write("chat_template.jinja", "{% if %}")
	if _, err := chat.LoadTemplate(dir); err == nil {
		t.Errorf("bad template compiled")
	}
}

// The vLLM conversion of the less common message and part forms, seen through tojson.
func TestRenderConversionForms(t *testing.T) {
	tmpl := mustTemplate(t, `{% for m in messages %}{% for c in m.content %}{% endfor %}{{ m | tojson ~ '\n' }}{% endfor %}`)
	body := `{"messages":[
		{"role":"developer","content":"d","tools":[{"type":"function"}]},
		{"role":"user","content":["plain",{"type":"text","text":null},{"type":"input_text","text":null},{"type":"thinking","thinking":"t"},
			{"type":"tool_reference","name":"n"},{"type":"input_audio","input_audio":{"data":"AA","format":"wav"}},{"image_url":{"url":"u"},"uuid":"x"}],"name":"bob","task":"k"},
		{"role":"assistant","content":"a","reasoning":"r","tool_calls":[{"function":{"arguments":"[1,2]","name":"f"},"id":"i"},{"function":{"name":"g","arguments":7}}]},
		{"role":"tool","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}],"tool_call_id":"i"},
		{"role":"tool","content":[{"type":"tool_reference","name":"n"}]},
		{"role":"tool","content":null}]}`
	want := `{"role": "developer", "content": [{"type": "text", "text": "d"}], "tools": [{"type": "function"}]}
{"role": "user", "content": [{"type": "text", "text": "plain"}, {"type": "text", "text": null}, {"type": "text", "text": "t"}, {"type": "tool_reference", "name": "n"}, {"type": "audio"}, {"type": "image"}], "name": "bob", "task": "k"}
{"role": "assistant", "content": [{"type": "text", "text": "a"}], "tool_calls": [{"function": {"arguments": [1, 2], "name": "f"}, "id": "i"}, {"function": {"name": "g", "arguments": {}}}], "reasoning": "r", "reasoning_content": "r"}
{"role": "tool", "content": "x\ny", "tool_call_id": "i"}
{"role": "tool", "content": [{"type": "tool_reference", "name": "n"}]}
{"role": "tool", "content": ""}
`
	got, err := render(t, tmpl, body)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// continue_final_message: the prompt ends right after the final message's text (transformers'
// render_jinja_template), and add_generation_prompt must be off.
func TestRenderContinueFinalMessage(t *testing.T) {
	tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Once upon"}],"add_generation_prompt":false,"continue_final_message":true}`,
			"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nOnce upon"},
		{`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"A"},{"type":"text","text":" B "}]}],"add_generation_prompt":false,"continue_final_message":true}`,
			"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nA B"}, // the text is " B ": "B " at the match differs from it, so the cut is after "B"
	} {
		got, err := render(t, tmpl, tc.body)
		if err != nil || got != tc.want {
			t.Errorf("%s:\n got %q (%v)\nwant %q", tc.body, got, err, tc.want)
		}
	}
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"continue_final_message":true}`,
		`{"messages":[{"role":"assistant","content":null}],"add_generation_prompt":false,"continue_final_message":true}`,
	} {
		if _, err := render(t, tmpl, body); !errors.Is(err, chat.ErrRender) {
			t.Errorf("%s: err %v, want ErrRender", body, err)
		}
	}
	docs := mustTemplate(t, `{% for d in documents %}[{{ d.title }}]{% endfor %}{{ documents is none }}`)
	if got, err := render(t, docs, `{"messages":[],"documents":[{"title":"a"},{"title":"b"}]}`); err != nil || got != "[a][b]False" {
		t.Errorf("documents: %q %v", got, err)
	}
}

// Tools reach the template as vLLM's tool.model_dump(): declared fields first (type, then
// function name, description, parameters — null when absent), extra members after, in request
// order; parameters keep their own order.
func TestRenderToolsModelDump(t *testing.T) {
	tmpl := mustTemplate(t, `{% for t in tools %}{{ t | tojson }}
{% endfor %}`)
	body := `{"messages":[],"tools":[
		{"function":{"parameters":{"z":1,"a":{"type":"number","minimum":1.0}},"name":"f","x-extra":true},"type":"function"},
		{"type":"function","function":{"name":"g"},"meta":{"k":1}}]}`
	want := `{"type": "function", "function": {"name": "f", "description": null, "parameters": {"z": 1, "a": {"type": "number", "minimum": 1.0}}, "x-extra": true}}
{"type": "function", "function": {"name": "g", "description": null, "parameters": null}, "meta": {"k": 1}}
`
	got, err := render(t, tmpl, body)
	if err != nil || got != want {
		t.Errorf("got\n%s(%v)\nwant\n%s", got, err, want)
	}
	for _, bad := range []string{
		`{"messages":[],"tools":[{"type":"custom","function":{"name":"f"}}]}`,
		`{"messages":[],"tools":[{"type":"function"}]}`,
		`{"messages":[],"tools":[{"function":{"name":1}}]}`,
		`{"messages":[],"tools":[{"function":{"name":"f","parameters":[]}}]}`,
	} {
		r, err := chat.ParseRequest([]byte(bad))
		if err != nil || !errors.Is(r.SchemaErr, chat.ErrSchema) {
			t.Errorf("%s: SchemaErr %v", bad, r.SchemaErr)
		}
	}
}

// The request's own fields win over chat_template_kwargs (vLLM merge_kwargs); kwargs win over
// the special tokens; kwargs that collide with apply_chat_template's arguments are errors.
func TestRenderKwargsPrecedence(t *testing.T) {
	tmpl := mustTemplate(t, `{{ add_generation_prompt }} {{ documents }} {{ reasoning_effort }} {{ eos_token }} {{ x }}`)
	for _, tc := range []struct{ body, want string }{
		{`{"messages":[],"chat_template_kwargs":{"add_generation_prompt":false,"documents":[1],"reasoning_effort":"low","eos_token":"E","x":1}}`, "True [1] low E 1"},
		{`{"messages":[],"add_generation_prompt":false,"documents":[2],"reasoning_effort":"high","chat_template_kwargs":{"add_generation_prompt":true,"documents":[1],"reasoning_effort":"low"}}`, "False [2] high <E> "},
		{`{"messages":[],"reasoning_effort":"auto","chat_template_kwargs":{"reasoning_effort":"low"}}`, "True None low <E> "},
	} {
		got, err := render(t, tmpl, tc.body)
		if err != nil || got != tc.want {
			t.Errorf("%s:\n got %q (%v)\nwant %q", tc.body, got, err, tc.want)
		}
	}
	for _, k := range []string{"messages", "tools", "chat_template", "tokenize"} {
		if _, err := render(t, tmpl, `{"messages":[],"chat_template_kwargs":{"`+k+`":1}}`); !errors.Is(err, chat.ErrRender) {
			t.Errorf("kwarg %s: err %v", k, err)
		}
	}
}

// Rendering is safe for concurrent use (run with -race): one template, many goroutines.
func TestRenderConcurrent(t *testing.T) {
	tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"u"}},{"type":"text","text":"x"}]},
		{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"{\"n\":123456789012345678901}"}}]}],
		"tools":[{"type":"function","function":{"name":"f"}}]}`
	req, err := chat.ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want, err := tmpl.Render(req)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 20; i++ {
				got, err := tmpl.Render(req)
				if err == nil && got != want {
					err = errors.New("render differs under concurrency")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestRenderOutputAllocatedOnce checks that a long conversation's render allocates its output
// about once (the engine's buffer starts at the converted strings' size) instead of regrowing
// it: measured on the live allocation counter over several renders of a 41-message, 321 kB
// conversation. Before the size hint a render allocated 5.6 times the prompt's length, now 1.5.
func TestRenderOutputAllocatedOnce(t *testing.T) {
	tmpl, err := chat.LoadTemplate(filepath.Join("..", "..", "testdata", "golden", "qwen3vl-test-model"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []map[string]string{{"role": "system", "content": strings.Repeat("You answer from the documents.\n", 100)}}
	for i := 0; i < 40; i++ {
		msgs = append(msgs, map[string]string{"role": []string{"user", "assistant"}[i%2], "content": strings.Repeat(fmt.Sprintf("turn %d: the routing of long prompts at proxy speed.\n", i), 150)})
	}
	body, err := json.Marshal(map[string]any{"model": "m", "messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	req, err := chat.ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tmpl.Render(req)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		if again, err := tmpl.Render(req); err != nil || again != out {
			t.Fatalf("render %d differs or failed: %v", i, err)
		}
	}
	runtime.ReadMemStats(&after)
	perRender := float64(after.TotalAlloc-before.TotalAlloc) / n
	ratio := perRender / float64(len(out))
	t.Logf("prompt %d bytes, %.0f bytes allocated per render (%.2f×)", len(out), perRender, ratio)
	if ratio > 2 {
		t.Errorf("a render allocates %.2f× its prompt's length, want at most 2×", ratio)
	}
}

// TestRequestChatTemplateNotRendered: a request that brings its own chat_template is a render
// error (the handler routes it on load alone with template_error) instead of being rendered
// with the model's template, which is not the prompt a worker that accepts the request's
// template would build (found by the operator test: it was ignored without notice).
func TestRequestChatTemplateNotRendered(t *testing.T) {
	tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"chat_template":"{{ messages[0].content }}"}`,
		`{"messages":[{"role":"user","content":"hi"}],"chat_template":""}`,
	} {
		for _, lim := range []bool{false, true} {
			var req *chat.Request
			if lim {
				req, err = chat.ParseRequestLimited([]byte(body), chat.Limits{MaxMessages: 8, MaxParts: 8})
			} else {
				req, err = chat.ParseRequest([]byte(body))
			}
			if err != nil || !req.OwnChatTemplate {
				t.Fatalf("%s (limits %v): err %v, own template %v", body, lim, err, req != nil && req.OwnChatTemplate)
			}
			if _, err := tmpl.Render(req); !errors.Is(err, chat.ErrRender) || !strings.Contains(err.Error(), "chat_template") {
				t.Fatalf("%s: render err %v, want a render error naming chat_template", body, err)
			}
		}
	}
	// null is absent: rendered as usual.
	req, _ := chat.ParseRequest([]byte(`{"messages":[{"role":"user","content":"hi"}],"chat_template":null}`))
	if _, err := tmpl.Render(req); err != nil || req.OwnChatTemplate {
		t.Fatalf("chat_template null: %v, own %v", err, req.OwnChatTemplate)
	}
}
