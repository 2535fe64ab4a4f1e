package caddymodule_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/kvroute/kvroute/caddymodule"
)

// TestCaddyfileAdapt adapts every testdata/caddyfile_adapt/*.caddytest file (a Caddyfile, a line
// of ten dashes, the expected JSON) and compares the JSON.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/caddyfile_adapt/*.caddytest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no adapt cases: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			parts := strings.SplitN(string(data), "----------", 2)
			if len(parts) != 2 {
				t.Fatalf("%s: missing ---------- separator", f)
			}
			if !caddytest.CompareAdapt(t, f, strings.TrimSpace(parts[0])+"\n", "caddyfile", strings.TrimSpace(parts[1])) {
				t.Errorf("%s: adapted JSON differs", f)
			}
		})
	}
}
