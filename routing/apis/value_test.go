package apis_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/kvroute/kvroute/routing/apis"
)

// TestParseMatchesEncodingJSON: the byte-level parser reads what encoding/json reads (strings with
// every escape, surrogate pairs, lone surrogates and invalid UTF-8 as U+FFFD, numbers, nesting),
// MarshalJSON writes it back to the same values, and malformed input is refused.
func TestParseMatchesEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"a":"x\"y\\z\/\b\f\n\r\t\u00e9\ud83d\ude00 \u2028 end","b":[1,-2.5e-3,0,1E+2,true,false,null],"c":{"d":[]}}`,
		`"lone \ud800 surrogate"`, "\"bad \xff utf8\"", `[{"k":"v"},{"k":"w","k":"last"}]`, `  42  `,
		`"ctl \u0001 \u001f"`,
	} {
		v, err := apis.Parse([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		var want, got any
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		out, _ := v.MarshalJSON()
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: our output %q: %v", in, out, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %#v, want %#v", in, got, want)
		}
	}
	for _, bad := range []string{`{"a":1,}`, `[1 2]`, `"\x"`, `01`, `1.`, `-`, `{"a"}`, `tru`, `"abc`, "\"a\x01\"", `[1]x`, ``} {
		if _, err := apis.Parse([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
