package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/ssrftrap"
	"github.com/kvroute/kvroute/reason"
)

// TestIdentityNoNestedOpens runs `kvroute identity` on every ssrftrap input, as a FILE under its
// own name and as a data: URL: the trap counts no connection, manifests fail as
// media_undecodable naming what they are (issue 24).
func TestIdentityNoNestedOpens(t *testing.T) {
	trap := ssrftrap.Start(t)
	cases, err := ssrftrap.Cases(trap.Port)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range cases {
		file := filepath.Join(dir, c.Name+c.Ext)
		if err := os.WriteFile(file, c.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, arg := range []string{file, "data:" + c.MIME + ";base64," + base64.StdEncoding.EncodeToString(c.Data)} {
			out, err := runIdentity([]string{arg, "--indices", "0"})
			trap.Settle(t)
			if n := trap.Count(); n != 0 {
				t.Fatalf("%s: reached the trap: %q", c.Name, trap.Log())
			}
			if strings.Contains(c.Name, "chapters") {
				if err != nil || len(out.(*identityOutput).Identity) != 16 {
					t.Errorf("%s: %v", c.Name, err)
				}
				continue
			}
			if reason.CodeOf(err) != reason.MediaUndecodable {
				t.Errorf("%s (%.30s): err %v, want media_undecodable", c.Name, arg, err)
			}
		}
	}
}
