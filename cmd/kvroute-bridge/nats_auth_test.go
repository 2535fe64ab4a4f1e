package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	zmq "github.com/pebbe/zmq4"

	"github.com/kvroute/kvroute/internal/testkit/natstest"
)

// TestDocsNATSPermissions starts nats-server with the authorization block of docs/deploy-vllm.md §5
// and runs the command as the documented per-worker user: it registers, forwards batches, announces a
// reset and answers a replay request, and it cannot publish another worker's events.
func TestDocsNATSPermissions(t *testing.T) {
	doc, err := os.ReadFile("../../docs/deploy-vllm.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```hcl\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("no hcl block in docs/deploy-vllm.md")
	}
	dir := t.TempDir()
	conf := strings.Replace(string(m[1]), "store_dir: /var/lib/nats", "store_dir: "+strings.ReplaceAll(filepath.Join(dir, "js"), `\`, `/`), 1)
	conf = "listen: 127.0.0.1:-1\n" + conf
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ROUTER_PASSWORD", "router-secret")
	t.Setenv("BRIDGE_GPU_A_0_PASSWORD", "bridge-secret")
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("parsing the documented nats-server config: %v", err)
	}
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	url := srv.ClientURL()

	// The router creates the bucket and listens.
	rc, err := nats.Connect(url, nats.UserInfo("router", "router-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	kv := natstest.Bucket(t, rc)
	events := make(chan *nats.Msg, 64)
	for _, subj := range []string{"kvroute.events.*", "kvroute.ctl.*.reset"} {
		if _, err := rc.ChanSubscribe(subj, events); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.Flush(); err != nil {
		t.Fatal(err)
	}

	// A KV event publisher (XPUB, so the test can wait for the bridge's subscription).
	zctx, err := zmq.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	defer zctx.Term()
	pub, err := zctx.NewSocket(zmq.XPUB)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	_ = pub.SetLinger(0)
	if err := pub.Bind("tcp://127.0.0.1:*"); err != nil {
		t.Fatal(err)
	}
	ep, err := pub.GetLastEndpoint()
	if err != nil {
		t.Fatal(err)
	}

	t.Setenv("KVROUTE_NATS_PASSWORD", "bridge-secret")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--nats-url", url, "--nats-user", "bridge-gpu-a-0", "--nats-inbox-prefix", "_INBOX_gpu-a-0",
			"--worker-id", "gpu-a-0", "--endpoint", "127.0.0.1:8000", "--model", "m", "--block-size", "16",
			"--zmq-endpoint", ep, "--topic", "kv-events", "--log-level", "error"}, io.Discard)
	}()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	defer stop()

	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := kv.Get(context.Background(), "gpu-a-0"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the bridge user did not register")
		}
		time.Sleep(10 * time.Millisecond)
	}
	poller := zmq.NewPoller()
	poller.Add(pub, zmq.POLLIN)
	if polled, err := poller.Poll(30 * time.Second); err != nil || len(polled) == 0 {
		t.Fatalf("no subscriber: %v", err)
	}
	if _, err := pub.RecvBytes(0); err != nil {
		t.Fatal(err)
	}
	send := func(seq uint64) {
		s := make([]byte, 8)
		binary.BigEndian.PutUint64(s, seq)
		if _, err := pub.SendMessage("kv-events", s, []byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x90}); err != nil {
			t.Fatal(err)
		}
	}
	send(0)
	send(2) // gap without a replay socket: the bridge announces a reset
	var got []string
	for len(got) < 3 {
		select {
		case msg := <-events:
			got = append(got, fmt.Sprintf("%s seq=%s", msg.Subject, msg.Header.Get("Kvroute-Seq")))
		case <-time.After(30 * time.Second):
			t.Fatalf("router received %q, want 2 batches and a reset", got)
		}
	}
	want := []string{"kvroute.events.gpu-a-0 seq=0", "kvroute.ctl.gpu-a-0.reset seq=", "kvroute.events.gpu-a-0 seq=2"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("router received %q, want %q", got, want)
	}
	resp, err := rc.Request("kvroute.ctl.gpu-a-0.replay", []byte(`{"dp_rank":0,"from_seq":2}`), 10*time.Second)
	if err != nil {
		t.Fatalf("replay request: %v", err)
	}
	var r struct {
		Replayed *int `json:"replayed"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil || r.Replayed == nil || *r.Replayed != 1 {
		t.Errorf("replay answer %s", resp.Data)
	}

	// The bridge user cannot publish events of another worker.
	violations := make(chan error, 4)
	bc, err := nats.Connect(url, nats.UserInfo("bridge-gpu-a-0", "bridge-secret"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if err := bc.Publish("kvroute.events.gpu-b-0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = bc.Flush()
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Errorf("async error %v, want a permissions violation", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("publishing another worker's events was not refused")
	}

	if err := stop(); err != nil {
		t.Fatalf("run = %v", err)
	}
	if _, err := kv.Get(context.Background(), "gpu-a-0"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("record after shutdown: err = %v, want ErrKeyNotFound (deregistration with the bridge user)", err)
	}
}
