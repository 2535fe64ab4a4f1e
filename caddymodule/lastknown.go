package caddymodule

import (
	"sync"

	"github.com/caddyserver/caddy/v2"

	"github.com/kvroute/kvroute/kvevents/registry"
)

// lastKnownKey is the sharedPool entry of the last worker records read from a registry.
const lastKnownKey = "registry_last_known"

// lastKnown is the last registry snapshot any config read (sharedPool, so it outlives a reload).
// A reload that changes nats_url or embedded_nats opens a new connection and registry; until that
// registry has been read once, the new config routes to these records rather than to its static
// workers alone (an operator test saw a reload to an unreachable nats_url answer every request
// 503 until it was reverted). The records are what the registry said when last read: a worker
// gone since is found by its health checks, as during any registry outage (DESIGN.md §2.1).
type lastKnown struct {
	mu      sync.Mutex
	url     string // the NATS URL the records were read from
	workers []registry.Worker
}

func (*lastKnown) Destruct() error { return nil }

// set records a snapshot read from the registry at url.
func (l *lastKnown) set(url string, ws []registry.Worker) {
	l.mu.Lock()
	l.url, l.workers = url, ws
	l.mu.Unlock()
}

// from returns the records last read from a registry at another URL than url (nil: none, or the
// last ones came from url itself, which the watcher then holds).
func (l *lastKnown) from(url string) (string, []registry.Worker) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.url == url {
		return "", nil
	}
	return l.url, l.workers
}

// acquireLastKnown takes this config's reference to the last-known records.
func (a *App) acquireLastKnown() error {
	v, err := a.acquireShared(lastKnownKey, func() (caddy.Destructor, error) { return &lastKnown{}, nil })
	if err != nil {
		return err
	}
	a.shared.lastKnown = v.(*lastKnown)
	return nil
}
