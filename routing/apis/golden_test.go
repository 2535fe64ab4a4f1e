package apis_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/routing/apis"
)

// The golden vectors of testdata/golden/apis (copied from shared/golden/apis; README there): each
// request converts to the chat form vLLM builds, or to the same class of error.

type vector struct {
	ID       string          `json:"id"`
	Input    json.RawMessage `json:"input"`
	Expected json.RawMessage `json:"expected"`
	Fold     json.RawMessage `json:"expected_fold"`
	Low      json.RawMessage `json:"expected_if_disabled_effort_low"`
}

func vectors(t *testing.T, file string) []vector {
	var out []vector
	for _, l := range goldens.Lines(t, "../../testdata/golden/apis/"+file) {
		var v vector
		if err := json.Unmarshal(l, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if len(out) < 100 {
		t.Fatalf("%s: %d vectors, want the 102 of the golden file", file, len(out))
	}
	return out
}

func mustParse(t *testing.T, b []byte) *apis.Value {
	t.Helper()
	v, err := apis.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// expectedError returns the error class of an error vector ("" when it is not one).
func expectedError(t *testing.T, exp *apis.Value) string {
	e := exp.Get("error")
	if !e.IsStr() {
		return ""
	}
	for _, c := range []string{apis.ClassPydantic, apis.ClassVLLMValidation, apis.ClassInvalidRequest, apis.ClassValueError} {
		if strings.HasPrefix(e.Str, c+":") {
			return c
		}
	}
	t.Fatalf("unknown error class in %q", e.Str)
	return ""
}

func TestAnthropicGolden(t *testing.T) {
	n, fold, low, errs := 0, 0, 0, 0
	for _, v := range vectors(t, "anthropic_to_chat.jsonl") {
		exp := mustParse(t, v.Expected)
		if class := expectedError(t, exp); class != "" {
			_, err := apis.FromAnthropic(v.Input, apis.AnthropicOptions{})
			checkErr(t, v.ID, err, class)
			errs++
			continue
		}
		check := func(opt apis.AnthropicOptions, want []byte, what string) {
			f, err := apis.FromAnthropic(v.Input, opt)
			if err != nil {
				t.Errorf("%s (%s): %v", v.ID, what, err)
				return
			}
			if d := diff(f.Expected(), mustParse(t, want), "$"); d != "" {
				t.Errorf("%s (%s): %s\n got %s", v.ID, what, d, js(f.Expected()))
			}
		}
		check(apis.AnthropicOptions{}, v.Expected, "preserve")
		check(apis.AnthropicOptions{InlineSystem: "preserve", DisabledThinkingEffort: "none"}, v.Expected, "preserve, explicit")
		foldWant := v.Expected
		if v.Fold != nil {
			foldWant = v.Fold
			fold++
		}
		check(apis.AnthropicOptions{InlineSystem: "fold"}, foldWant, "fold")
		if v.Low != nil {
			check(apis.AnthropicOptions{DisabledThinkingEffort: "low"}, v.Low, "disabled effort low")
			low++
		}
		n++
	}
	if n < 90 || fold < 8 || low < 2 || errs < 8 {
		t.Fatalf("checked %d forms, %d fold variants, %d low variants, %d errors: fewer than the golden file has", n, fold, low, errs)
	}
}

func TestResponsesGolden(t *testing.T) {
	n, hist, errs := 0, 0, 0
	for _, v := range vectors(t, "responses_to_chat.jsonl") {
		exp := mustParse(t, v.Expected)
		r, err := apis.FromResponses(v.Input, apis.ResponsesOptions{})
		if class := expectedError(t, exp); class != "" {
			checkErr(t, v.ID, err, class)
			errs++
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", v.ID, err)
			continue
		}
		if h := exp.Get("history_from_store"); h != nil {
			// only the new items: the stored history lives on the worker (the previous id is kept)
			if r.PreviousResponseID != h.Get("previous_response_id").Str {
				t.Errorf("%s: previous_response_id %q, want %q", v.ID, r.PreviousResponseID, h.Get("previous_response_id").Str)
			}
			exp = without(exp, "history_from_store")
			hist++
		}
		if d := diff(r.Form.Expected(), exp, "$"); d != "" {
			t.Errorf("%s: %s\n got %s", v.ID, d, js(r.Form.Expected()))
		}
		n++
	}
	if n < 85 || hist < 2 || errs < 11 {
		t.Fatalf("checked %d forms, %d previous_response_id turns, %d errors: fewer than the golden file has", n, hist, errs)
	}
}

func checkErr(t *testing.T, id string, err error, class string) {
	t.Helper()
	ae, ok := err.(*apis.Error)
	if !ok {
		t.Errorf("%s: got %v, want a %s", id, err, class)
		return
	}
	if ae.Class != class {
		t.Errorf("%s: got %s, want class %s", id, ae, class)
	}
}

func without(v *apis.Value, key string) *apis.Value {
	out := apis.Obj()
	for _, m := range v.Obj {
		if m.Key != key {
			out.Set(m.Key, m.Val)
		}
	}
	return out
}

func js(v *apis.Value) string { b, _ := v.MarshalJSON(); return string(b) }

// diff compares JSON values: object keys in any order, except inside a tool's "function" object
// (templates that tojson a tool show its key order); numbers by value.
func diff(got, want *apis.Value, path string) string {
	if got.Kind != want.Kind {
		return path + ": got " + js(got) + ", want " + js(want)
	}
	switch got.Kind {
	case apis.KindNumber:
		a, _ := strconv.ParseFloat(got.Str, 64)
		b, _ := strconv.ParseFloat(want.Str, 64)
		if a != b {
			return path + ": got " + got.Str + ", want " + want.Str
		}
	case apis.KindString:
		if got.Str != want.Str {
			return path + ": got " + strconv.Quote(got.Str) + ", want " + strconv.Quote(want.Str)
		}
	case apis.KindBool:
		if got.Bool != want.Bool {
			return path + ": bool differs"
		}
	case apis.KindArray:
		if len(got.Arr) != len(want.Arr) {
			return path + ": got " + js(got) + ", want " + js(want)
		}
		for i := range got.Arr {
			if d := diff(got.Arr[i], want.Arr[i], path+"["+strconv.Itoa(i)+"]"); d != "" {
				return d
			}
		}
	case apis.KindObject:
		if len(got.Obj) != len(want.Obj) {
			return path + ": got " + js(got) + ", want " + js(want)
		}
		ordered := strings.HasSuffix(path, ".function") && strings.Contains(path, "$.tools[")
		for i, m := range want.Obj {
			g := got.Get(m.Key)
			if g == nil {
				return path + ": missing key " + m.Key
			}
			if ordered && got.Obj[i].Key != m.Key {
				return path + ": key order " + js(got) + ", want " + js(want)
			}
			if d := diff(g, m.Val, path+"."+m.Key); d != "" {
				return d
			}
		}
	}
	return ""
}
