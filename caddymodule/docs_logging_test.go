package caddymodule_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestRoutingLogConfigDocumented adapts the `[ROUTING]` volume example of docs/operations.md: it
// must give a `routing` log that includes only the handler's logger, with the documented sampling,
// and a default log that excludes it.
func TestRoutingLogConfigDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i := strings.Index(text, "### `[ROUTING]` volume")
	if i < 0 {
		t.Fatal("section missing")
	}
	text = text[i:]
	start := strings.Index(text, "```caddyfile\n")
	end := strings.Index(text[start+1:], "```\n")
	if start < 0 || end < 0 {
		t.Fatal("no caddyfile block in the section")
	}
	block := text[start+len("```caddyfile\n") : start+1+end]
	cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(block+":0 {\n\trespond ok\n}\n"), nil)
	if err != nil {
		t.Fatalf("adapting the documented block: %v\n%s", err, block)
	}
	var cfg struct {
		Logging struct {
			Logs map[string]struct {
				Include  []string `json:"include"`
				Exclude  []string `json:"exclude"`
				Sampling *struct {
					Interval   int64 `json:"interval"`
					First      int   `json:"first"`
					Thereafter int   `json:"thereafter"`
				} `json:"sampling"`
			} `json:"logs"`
		} `json:"logging"`
	}
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatal(err)
	}
	r, d := cfg.Logging.Logs["routing"], cfg.Logging.Logs["default"]
	if !reflect.DeepEqual(r.Include, []string{"http.handlers.kvroute"}) || r.Sampling == nil ||
		r.Sampling.Interval != 1e9 || r.Sampling.First != 100 || r.Sampling.Thereafter != 100 {
		t.Errorf("routing log %+v (sampling %+v)", r, r.Sampling)
	}
	if !reflect.DeepEqual(d.Exclude, []string{"http.handlers.kvroute"}) {
		t.Errorf("default log %+v", d)
	}
}
