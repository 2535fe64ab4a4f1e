// Package caddybin runs Caddy with the kvroute plugin as a separate process, for integration
// tests that need a second router replica: one process holds one Caddy instance, and kvroute
// keeps process-wide state (the stored-response map, the template and tokenize caches) that an
// in-process reload keeps, so only a second process shows what a new replica knows.
package caddybin

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Build compiles ./cmd (Caddy, its standard modules and the kvroute plugin) into the test's
// temporary folder and returns the binary's path. With a warm build cache this is the link
// step (about half a minute on a busy 2-core machine).
func Build(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(t.TempDir(), "caddy")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd")
	cmd.Dir = filepath.Dir(file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the Caddy binary: %v\n%s", err, out)
	}
	return bin
}

// Proc is a running Caddy process.
type Proc struct {
	cmd  *exec.Cmd
	log  *LockedBuffer
	done chan struct{}
}

// Start runs the binary with caddyfile and waits until addr (host:port of a site) accepts
// connections. The process is stopped (SIGKILL to its own pid) and its log printed on failure at
// the test's end.
func Start(t testing.TB, bin, caddyfile, addr string) *Proc {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfg, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	p := &Proc{cmd: exec.CommandContext(ctx, bin, "run", "--config", cfg, "--adapter", "caddyfile"), log: &LockedBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir) // Caddy's own storage in the test's folder
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		cancel()
		if t.Failed() {
			t.Logf("second Caddy's log:\n%s", p.log.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("the second Caddy exited: %s", p.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second Caddy does not listen on %s after 60 s: %s", addr, p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the process (if it still runs) and waits for it.
func (p *Proc) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Log is what the process wrote so far.
func (p *Proc) Log() string { return p.log.String() }

// LockedBuffer collects a child process's output (an io.Writer safe for the process's
// two output pipes and a concurrent reader).
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
