package integration

import (
	"fmt"
	"net"
	"testing"
)

// TestReloadToUnreachableNATS: a reload that points nats_url at a server that does not answer
// opens a new connection and registry that cannot be read; until they can, the router routes to
// the workers last read from the previous registry instead of answering 503 (operator test: every
// request got 503 upstream_unavailable and registry_workers fell to 0 until the reload was
// reverted).
func TestReloadToUnreachableNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: reloads Caddy onto a NATS URL that refuses connections and waits out the simulators' deregistration, ~10 s")
	}
	h := startHarness(t, []simSpec{{ID: "rn-a", Model: "qwen"}, {ID: "rn-b", Model: "qwen"}})
	body := textBody(t, "qwen", longText("Reload onto a dead NATS.", 80))
	if a := h.chat(t, body); a.status != 200 || a.sim == nil {
		t.Fatalf("before the reload: status %d worker %q", a.status, a.worker)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there now: every connection attempt is refused
	h.reload(t, harnessOpts{nats: fmt.Sprintf("nats_url nats://%s", dead)})
	for i := range 6 {
		a := h.chat(t, textBody(t, "qwen", longText(fmt.Sprintf("After the reload %d.", i), 40)))
		if a.status != 200 || a.sim == nil {
			t.Fatalf("request %d after the reload: status %d worker %q body %s; want a registered simulator's answer", i, a.status, a.worker, a.body)
		}
	}
}
