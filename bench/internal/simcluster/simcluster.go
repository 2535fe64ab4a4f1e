// Package simcluster runs one benchmark run's cluster: fresh kvroute-sim simulators behind a fresh
// in-process Caddy, with kvroute's handler and selection policy over the registered workers or
// Caddy's own policy over static upstreams. bench/quality and bench/trace share it.
package simcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/caddymodule"
	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit/caddytest"
)

// Config is one run's cluster: fresh simulators and a fresh Caddy.
type Config struct {
	Policy    string // kvroute, round_robin or least_conn
	Scheduler string // the kvroute scheduler block's options (one per line), "" for the defaults
	Media     string // extra lines of the kvroute media block (e.g. "codecs vp8 vp9 h264"); loopback clips are always allowed
	RunID     string // prefix of the worker ids, unique per run
	Workers   int
	ModelDir  string
	Frontend  *sim.Frontend
	BlockSize int
	Capacity  int // blocks per worker
	Sim       sim.Config
}

// Cluster is a running Caddy in front of its simulators.
type Cluster struct {
	// Base is Caddy's URL (http://127.0.0.1:port).
	Base string
	// IDs are the simulators' worker ids, in start order.
	IDs     []string
	sims    []*sim.Server
	eps     []string
	servers []*http.Server
	ncs     []*nats.Conn
	pubs    []*sim.Publisher
	regs    []*sim.Registration
}

// caddyfile renders the run's configuration: kvroute's handler and selection policy over the
// registered workers, or Caddy's own policy over the static upstreams.
func (c Config) caddyfile(port int, upstreams []string) string {
	if c.Policy != "kvroute" {
		return fmt.Sprintf(`{
	admin off
	%s
}

http://127.0.0.1:%d {
	reverse_proxy %s {
		lb_policy %s
	}
}
`, caddytest.QuietGlobals, port, strings.Join(upstreams, " "), c.Policy)
	}
	sched := ""
	if strings.TrimSpace(c.Scheduler) != "" {
		sched = "\t\tscheduler {\n\t\t\t" + strings.ReplaceAll(strings.TrimSpace(c.Scheduler), ";", "\n\t\t\t") + "\n\t\t}\n"
	}
	return fmt.Sprintf(`{
	admin off
	%s
	kvroute {
		embedded_nats {
			port random
		}
		model_dir %s
		media {
			allow_loopback
			%s
		}
%s	}
}

http://127.0.0.1:%d {
	kvroute
	reverse_proxy {
		dynamic kvroute
		lb_policy kvroute {
			fallback least_conn
		}
	}
}
`, caddytest.QuietGlobals, c.ModelDir, c.Media, sched, port)
}

// Start starts the simulators (each with a fresh block cache of Capacity blocks) and Caddy.
// With kvroute, Caddy starts first and the simulators publish KV events and register through its
// embedded NATS; the call returns once the app lists every worker. Otherwise the simulators start
// first and are Caddy's static upstreams.
func Start(ctx context.Context, c Config) (_ *Cluster, err error) {
	cl := &Cluster{}
	defer func() {
		if err != nil {
			cl.Stop() // cl, not the named result: a failed start returns nil
		}
	}()
	port, err := caddytest.FreePort()
	if err != nil {
		return nil, err
	}
	cl.Base = fmt.Sprintf("http://127.0.0.1:%d", port)
	load := func(upstreams []string) error { return caddytest.Load(c.caddyfile(port, upstreams)) }
	if c.Policy != "kvroute" {
		if err := cl.startSims(ctx, c, nil); err != nil {
			return nil, err
		}
		return cl, load(cl.endpoints())
	}
	if err := load(nil); err != nil {
		return nil, err
	}
	app, err := caddytest.App()
	if err != nil {
		return nil, err
	}
	if app.NATS() == nil {
		return nil, errors.New("kvroute app has no NATS")
	}
	if err := cl.startSims(ctx, c, app.NATS()); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(app.WorkerList()) != c.Workers {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kvroute lists %d workers, want %d", len(app.WorkerList()), c.Workers)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cl, nil
}

// startSims starts the simulators; with ns they publish KV events and register through it.
func (cl *Cluster) startSims(ctx context.Context, c Config, ns *caddymodule.SharedNATS) error {
	for i := range c.Workers {
		id := fmt.Sprintf("%s-w%d", c.RunID, i)
		bc, err := sim.NewBlockCache(&sim.BlockCacheConfig{BlockSize: c.BlockSize, Capacity: c.Capacity})
		if err != nil {
			return err
		}
		sc := c.Sim
		sc.WorkerID, sc.BlockSize, sc.Frontend, sc.Blocks = id, c.BlockSize, c.Frontend, bc
		var nc *nats.Conn
		if ns != nil {
			if nc, err = natsutil.Connect(ns.URL(), &natsutil.ConnectConfig{Name: "kvroute-sim " + id}); err != nil {
				return err
			}
			cl.ncs = append(cl.ncs, nc)
			pub, err := sim.NewPublisher(&sim.PublisherConfig{WorkerID: id, Conn: nc})
			if err != nil {
				return err
			}
			cl.pubs = append(cl.pubs, pub)
			sc.Events = pub
		}
		s := sim.New(&sc)
		srv, ep, err := caddytest.Serve(s.Handler())
		if err != nil {
			return err
		}
		cl.sims, cl.IDs, cl.servers = append(cl.sims, s), append(cl.IDs, id), append(cl.servers, srv)
		cl.eps = append(cl.eps, ep)
		if nc != nil {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			reg, err := sim.RegisterConn(rctx, nc, ep, s, nil)
			cancel()
			if err != nil {
				return fmt.Errorf("registering %s: %w", id, err)
			}
			cl.regs = append(cl.regs, reg)
		}
	}
	return nil
}

func (cl *Cluster) endpoints() []string { return cl.eps }

// Stop deregisters and stops the simulators and stops Caddy.
func (cl *Cluster) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, r := range cl.regs {
		_ = r.Close(ctx)
	}
	_ = caddy.Stop()
	for _, p := range cl.pubs {
		_ = p.Close()
	}
	for _, nc := range cl.ncs {
		nc.Close()
	}
	for _, s := range cl.servers {
		_ = s.Close()
	}
}
