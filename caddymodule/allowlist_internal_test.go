package caddymodule

import (
	"context"
	"net/netip"
	"testing"

	"github.com/kvroute/kvroute/kvevents/registry"
)

func TestUpstreamAllowList(t *testing.T) {
	static := []registry.Worker{{WorkerID: "s", Endpoint: "198.51.100.7:8000"}}
	al, err := newUpstreamAllowList(nil, static)
	if err != nil {
		t.Fatal(err)
	}
	al.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "gpu-0.internal":
			return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
		case "mixed.example":
			return []netip.Addr{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("203.0.113.9")}, nil
		}
		return nil, nil
	}
	for ep, want := range map[string]bool{
		"127.0.0.1:8000":      true,
		"[::1]:8000":          true,
		"10.9.9.9:8000":       true,
		"172.31.0.1:8000":     true,
		"192.168.1.1:8000":    true,
		"[fd00::1]:8000":      true,
		"198.51.100.7:9000":   true, // the static worker's address
		"198.51.100.8:8000":   false,
		"203.0.113.5:8000":    false,
		"169.254.169.254:80":  false, // cloud metadata: link-local is not private
		"[::ffff:8.8.8.8]:80": false,
		"gpu-0.internal:8000": true,
		"mixed.example:8000":  false, // every address must be inside
		"nowhere.example:80":  false,
	} {
		if err := al.allowed(context.Background(), ep); (err == nil) != want {
			t.Errorf("%s: allowed err %v, want allowed %v", ep, err, want)
		}
	}
	al, err = newUpstreamAllowList([]string{"10.0.0.0/8", "192.0.2.1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if al.allowed(context.Background(), "127.0.0.1:80") == nil || al.allowed(context.Background(), "192.0.2.1:80") != nil {
		t.Error("explicit upstream_cidrs replace the defaults")
	}
	if _, err := newUpstreamAllowList([]string{"10.0.0.0/33"}, nil); err == nil {
		t.Error("a bad CIDR is accepted")
	}
}
