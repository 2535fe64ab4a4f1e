package natsutil_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kvroute/kvroute/internal/natsutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEmbeddedRefusesNonLoopback(t *testing.T) {
	for _, host := range []string{"0.0.0.0", "10.0.0.1", "::", "example.com"} {
		if _, err := natsutil.StartEmbedded(&natsutil.EmbeddedConfig{Host: host, Port: natsutil.RandomPort}); !errors.Is(err, natsutil.ErrNotLoopback) {
			t.Errorf("host %q: err = %v, want ErrNotLoopback", host, err)
		}
	}
}

func TestEmbeddedJetStreamAndStateLogs(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	srv, err := natsutil.StartEmbedded(&natsutil.EmbeddedConfig{Port: natsutil.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.ClientURL(), "nats://127.0.0.1:") {
		t.Errorf("client URL %s", srv.ClientURL())
	}
	nc, err := natsutil.Connect(srv.ClientURL(), &natsutil.ConnectConfig{Name: "test", Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(t.Context()); err != nil {
		t.Fatalf("JetStream not enabled: %v", err)
	}
	// the temporary store directory exists while running and is removed at shutdown
	dirs, _ := os.ReadDir(os.TempDir())
	found := false
	for _, d := range dirs {
		if strings.HasPrefix(d.Name(), "kvroute-nats-") {
			found = true
		}
	}
	if !found {
		t.Error("no kvroute-nats-* store directory in the temp dir")
	}
	nc.Close()
	srv.Shutdown()
	srv.Shutdown() // idempotent
	// the closed handler runs asynchronously
	deadline := time.Now().Add(5 * time.Second)
	for logs.FilterMessage("nats connection closed").Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if logs.FilterMessage("nats connected").Len() != 1 || logs.FilterMessage("nats connection closed").Len() != 1 {
		t.Errorf("state logs: %v", logs.All())
	}
}
