package main

import (
	"encoding/json"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestServesWhileWaitingForNATS: a simulator whose NATS is not up yet answers every request with
// a 503 JSON error saying it waits, instead of leaving clients hanging in its listen backlog (an
// operator's health check hung for as long as NATS was away).
func TestServesWhileWaitingForNATS(t *testing.T) {
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	addr, natsAddr := free(), free() // nothing listens on natsAddr
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"-listen", addr, "-worker-id", "sim-wait", "-nats", "nats://" + natsAddr,
			"-model", "../../testdata/golden/qwen3vl-test-model", "-served-model-name", "qwen"})
	}()
	cl := &http.Client{Timeout: 5 * time.Second}
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err = cl.Get("http://" + addr + "/health"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("GET /health while NATS is away: %v", err)
	}
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	derr := json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || derr != nil || body.Error.Code != "worker_starting" {
		t.Fatalf("GET /health while NATS is away: %d %+v (%v), want 503 worker_starting", resp.StatusCode, body, derr)
	}
	// run has installed its signal handler (it listens after it): SIGTERM stops it.
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the simulator did not stop on SIGTERM while waiting for NATS")
	}
}
