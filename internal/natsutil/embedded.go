package natsutil

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/defaults"
)

// DefaultEmbeddedPort is the embedded server's default client port: the standard NATS port, so
// that kvroute-sim and kvroute-bridge on the same machine find it with their defaults
// (nats://127.0.0.1:4222). Use RandomPort to let the kernel pick one (tests).
const DefaultEmbeddedPort = 4222

// RandomPort asks the embedded server to listen on a kernel-chosen free port.
const RandomPort = -1

// EmbeddedConfig configures the embedded NATS server; nil means DefaultEmbeddedConfig.
type EmbeddedConfig struct {
	// Host is the listen address. It must be a loopback address: the embedded server has no
	// authentication. Default: 127.0.0.1.
	Host string
	// Port is the client port; RandomPort picks a free one. Default: DefaultEmbeddedPort.
	Port int
	// StoreDir is the JetStream store directory. Default: a new temporary directory, removed at
	// Shutdown.
	StoreDir string
	// ReadyTimeout bounds the wait for the listener. Default: 10 s.
	ReadyTimeout time.Duration
	// Logger receives the server's lifecycle messages. Default: a no-op logger.
	Logger *zap.Logger
	// Token, when set, is required from every client (NATS token authentication). Default:
	// none, any local process may connect.
	Token string
}

// DefaultEmbeddedConfig returns the defaults: 127.0.0.1:4222, temporary store.
func DefaultEmbeddedConfig() *EmbeddedConfig {
	return &EmbeddedConfig{Host: "127.0.0.1", Port: DefaultEmbeddedPort, ReadyTimeout: 10 * time.Second, Logger: zap.NewNop()}
}

// Embedded is a running in-process NATS server with JetStream.
type Embedded struct {
	srv     *server.Server
	tempDir string // removed at Shutdown; empty when the store dir was configured
	logger  *zap.Logger
}

// ErrNotLoopback is returned when the embedded server is asked to listen beyond loopback.
var ErrNotLoopback = errors.New("embedded NATS server must listen on a loopback address")

// StartEmbedded starts the server and waits until it accepts connections.
func StartEmbedded(cfg *EmbeddedConfig) (*Embedded, error) {
	d := DefaultEmbeddedConfig()
	c := *d
	if cfg != nil {
		c = *cfg
		c.Host = cmp.Or(c.Host, d.Host)
		c.Port = cmp.Or(c.Port, d.Port) // RandomPort is negative: only 0 means the default
		defaults.Positive(&c.ReadyTimeout, d.ReadyTimeout)
		c.Logger = cmp.Or(c.Logger, d.Logger)
	}
	if ip := net.ParseIP(c.Host); c.Host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("starting embedded NATS on %q: %w", c.Host, ErrNotLoopback)
	}
	e := &Embedded{logger: c.Logger}
	store := c.StoreDir
	if store == "" {
		dir, err := os.MkdirTemp("", "kvroute-nats-*")
		if err != nil {
			return nil, fmt.Errorf("creating JetStream store dir: %w", err)
		}
		e.tempDir, store = dir, dir
	}
	// A taken port would only show as "not ready" after ReadyTimeout: probe it first, so the
	// operator gets "address already in use" at once. (Another process can still take the port
	// between the probe and the server's own listen; the timeout covers that.)
	if c.Port != RandomPort {
		ln, err := net.Listen("tcp", net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))
		if err != nil {
			e.removeTemp()
			return nil, fmt.Errorf("starting embedded NATS server: %w", err)
		}
		_ = ln.Close()
	}
	// NewServer must get fresh options; it keeps a reference to them.
	opts := &server.Options{
		ServerName:            "kvroute-embedded",
		Host:                  c.Host,
		Port:                  c.Port,
		JetStream:             true,
		StoreDir:              store,
		NoSigs:                true,
		NoLog:                 true,
		DisableShortFirstPing: true,
		MaxPayload:            8 << 20,
		Authorization:         c.Token,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		e.removeTemp()
		return nil, fmt.Errorf("creating embedded NATS server: %w", err)
	}
	e.srv = srv
	srv.Start()
	if !srv.ReadyForConnections(c.ReadyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		e.removeTemp()
		return nil, fmt.Errorf("starting embedded NATS server on %s: not ready within %s", net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), c.ReadyTimeout)
	}
	c.Logger.Info("embedded NATS server started", zap.String("url", srv.ClientURL()), zap.String("store_dir", store))
	return e, nil
}

// Port returns the client port the server listens on.
func (e *Embedded) Port() int {
	if a, ok := e.srv.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// ClientURL returns the URL clients connect to, e.g. nats://127.0.0.1:4222.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Shutdown stops the server, waits for it and removes a temporary store directory. It is
// idempotent.
func (e *Embedded) Shutdown() {
	if e == nil || e.srv == nil {
		return
	}
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.removeTemp()
	e.logger.Info("embedded NATS server stopped")
}

func (e *Embedded) removeTemp() {
	if e.tempDir != "" {
		_ = os.RemoveAll(e.tempDir)
		e.tempDir = ""
	}
}
