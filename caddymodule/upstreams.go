package caddymodule

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

func init() {
	caddy.RegisterModule(Upstreams{})
}

// Upstreams is the `http.reverse_proxy.upstreams.kvroute` dynamic upstream source: the endpoints
// of the registered workers (static and live, DESIGN.md §2.1) of one model, sorted by worker id,
// so operators do not list workers twice. It serves the app's in-memory snapshot and never blocks
// on NATS.
type Upstreams struct {
	// Model restricts the upstreams to the workers serving this model, or listing it as a LoRA
	// adapter. Default: every worker.
	Model string `json:"model,omitempty"`

	app *App
}

// CaddyModule returns the Caddy module information.
func (Upstreams) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.upstreams.kvroute",
		New: func() caddy.Module { return new(Upstreams) },
	}
}

// Provision gets the kvroute app.
func (u *Upstreams) Provision(ctx caddy.Context) error {
	appIface, err := ctx.App("kvroute")
	if err != nil {
		return fmt.Errorf("getting kvroute app: %w", err)
	}
	u.app = appIface.(*App)
	return nil
}

// GetUpstreams returns the current workers' endpoints.
func (u *Upstreams) GetUpstreams(*http.Request) ([]*reverseproxy.Upstream, error) {
	ws := u.app.WorkerList()
	ups := make([]*reverseproxy.Upstream, 0, len(ws))
	for _, w := range ws {
		if u.Model != "" && !servesModel(&w, u.Model) {
			continue
		}
		ups = append(ups, &reverseproxy.Upstream{Dial: w.Endpoint})
	}
	return ups, nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Upstreams)(nil)
	_ reverseproxy.UpstreamSource = (*Upstreams)(nil)
)
