package integration

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/internal/natsutil"
)

// TestEmbeddedNATSRequiresToken: the embedded NATS server refuses clients without its token; the
// token is written 0600 to the default file for its port, where local clients (natsutil.Connect,
// as kvroute-bridge and kvroute-sim use it) find it; the file goes when the server stops (issue 11
// item 4).
func TestEmbeddedNATSRequiresToken(t *testing.T) {
	startEdge(t, edgeConfig{})
	n := runningApp(t).NATS()
	file := n.TokenFile()
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file %q: %v mode %v, want 0600", file, err, st)
	}
	b, _ := os.ReadFile(file)
	tok := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(tok) {
		t.Fatalf("token %q", tok)
	}
	port := strings.TrimPrefix(n.URL(), "nats://127.0.0.1:")
	if want := natsutil.DefaultTokenFile(atoiOr(port, 0)); file != want {
		t.Errorf("token file %s, want the default %s", file, want)
	}

	if nc, err := nats.Connect(n.URL(), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client without the token connected")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("no-token connect: %v, want an authorization violation", err)
	}
	if nc, err := nats.Connect(n.URL(), nats.Token("0123456789abcdef0123456789abcdef"), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client with a wrong token connected")
	}
	nc, err := natsutil.Connect(n.URL(), nil) // finds the default token file
	if err != nil {
		t.Fatalf("local client with the token file: %v", err)
	}
	nc.Close()

	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("token file left after stop: %v", err)
	}
}
