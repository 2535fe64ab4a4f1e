package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestProvisionRoutingLimits: negative request limits and a media budget that cannot hold one
// media of max_bytes (chunks plus the assembled copy) are refused at provision time.
func TestProvisionRoutingLimits(t *testing.T) {
	repl := caddy.NewReplacer()
	for _, c := range []struct {
		rc   RoutingConfig
		want string
	}{
		{RoutingConfig{MaxParts: -1}, "max_messages and max_parts must not be negative"},
		{RoutingConfig{Media: &MediaConfig{MaxInflightBytes: -1}}, "must not be negative"},
		{RoutingConfig{Media: &MediaConfig{MaxInflightBytes: 512 << 20}}, "must be more than twice max_bytes (268435456)"},
		{RoutingConfig{Media: &MediaConfig{MaxInflightBytes: 32 << 20, MaxBytes: 16 << 20}}, "more than twice"},
		{RoutingConfig{Media: &MediaConfig{MaxInflightBytes: 32<<20 + 1, MaxBytes: 16 << 20}}, ""},
		{RoutingConfig{Media: &MediaConfig{}}, ""},
	} {
		err := c.rc.provisionRouting(repl)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: err %v, want %q", c.rc.Media, err, c.want)
		}
	}
}
