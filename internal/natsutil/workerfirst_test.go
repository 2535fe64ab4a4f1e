package natsutil_test

import (
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/natsutil"
)

// TestWorkerBeforeRouterToken: a worker (kvroute-sim, kvroute-bridge) connecting in the
// background to the router's embedded NATS before the router has written its token file keeps
// retrying through the refusals and connects once the file appears at the default path of the
// URL's port. Found by an operator test: the client sent no token because the file did not exist
// when it started, and nats.go closed the connection for good after two refusals.
func TestWorkerBeforeRouterToken(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(natsutil.TokenFileEnv, "")
	tok, err := natsutil.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsutil.StartEmbedded(&natsutil.EmbeddedConfig{Port: natsutil.RandomPort, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()

	nc, err := natsutil.Connect(srv.ClientURL(), &natsutil.ConnectConfig{Background: true, ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("background connect: %v", err)
	}
	defer nc.Close()
	// Let the server refuse it several times (nats.go's abort comes after two).
	for i := 0; i < 40 && !nc.IsClosed(); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	if nc.IsClosed() {
		t.Fatal("the connection closed after the server refused the missing token")
	}
	if nc.IsConnected() {
		t.Fatal("connected without the token")
	}
	// The router starts: it writes its token to the default file of its port.
	if err := natsutil.WriteTokenFile(natsutil.DefaultTokenFile(srv.Port()), tok); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !nc.IsConnected() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !nc.IsConnected() {
		t.Fatalf("not connected 30 s after the token file appeared (closed: %v)", nc.IsClosed())
	}
}
