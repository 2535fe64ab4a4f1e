package natsutil_test

import (
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/natsutil"
)

// TestCheckURLs: the lists nats.go connects to pass; an out-of-range or non-numeric port, an empty
// entry, a foreign scheme or a missing host fail with the entry's position, and a password in the
// URL is not echoed.
func TestCheckURLs(t *testing.T) {
	for _, ok := range []string{
		"nats://127.0.0.1:4222", "127.0.0.1:4222", "nats-0.nats:4222", "tls://n1:4222, tls://n2:4222",
		"nats://user:secret@n1:4222", "ws://n1:8080", "nats://n1", "nats://[::1]:4222",
	} {
		if err := natsutil.CheckURLs(ok); err != nil {
			t.Errorf("CheckURLs(%q) = %v, want nil", ok, err)
		}
	}
	for list, want := range map[string]string{
		"nats://127.0.0.1:99999":      "entry 1 (nats://127.0.0.1:99999): port 99999, want 1-65535",
		"nats://n1:4222,nats://n2:0":  "entry 2 (nats://n2:0): port 0, want 1-65535",
		"nats://n1:4222,":             "entry 2 is empty",
		"http://n1:4222":              `scheme "http", want nats, tls, ws or wss`,
		"nats://:4222":                "entry 1 (nats://:4222) has no host",
		"nats://user:secret@n1:4222x": "entry 1 is not a URL",
		"nats://user:secret@n1:70000": "entry 1 (nats://n1:70000): port 70000",
	} {
		err := natsutil.CheckURLs(list)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckURLs(%q) = %v, want an error with %q", list, err, want)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("CheckURLs(%q) echoed the password: %v", list, err)
		}
	}
}
