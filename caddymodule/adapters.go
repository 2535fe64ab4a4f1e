package caddymodule

import (
	"sort"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/routing/router"
)

// LoRA adapters in the Caddy glue (DESIGN.md §1.1): the static worker option, the conversion to
// the router's view, the upstreams an adapter request may go to, and its metric label.

// parseAdapterArgs reads the arguments of a static worker's `adapters` option: each is
// `<name>` (an adapter of the worker's model) or `<name>=<base_model>` (split at the first `=`).
// Validation (count, lengths) is the record's (registry.Worker.Normalize at provision).
func parseAdapterArgs(args []string) []registry.Adapter {
	out := make([]registry.Adapter, 0, len(args))
	for _, a := range args {
		name, base, _ := strings.Cut(a, "=")
		out = append(out, registry.Adapter{Name: name, BaseModel: base})
	}
	return out
}

// routerAdapters converts a record's adapters to the router's view (nil for none), sorted by name
// as the router's lookup needs (a normalized record's already are; a test's may not be).
func routerAdapters(as []registry.Adapter) []router.Adapter {
	if len(as) == 0 {
		return nil
	}
	out := make([]router.Adapter, len(as))
	for i, a := range as {
		out[i] = router.Adapter{Name: a.Name, BaseModel: a.BaseModel}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// endpointPool returns the upstreams of pool whose normalized dial address is in eps.
func endpointPool(pool reverseproxy.UpstreamPool, eps map[string]bool) reverseproxy.UpstreamPool {
	out := make(reverseproxy.UpstreamPool, 0, len(pool))
	for _, up := range pool {
		if ep, err := registry.NormalizeEndpoint(up.Dial); err == nil && eps[ep] {
			out = append(out, up)
		}
	}
	return out
}

// servesModel reports whether w serves model: as its model, or as one of its adapters (the
// `dynamic kvroute <model>` upstream source accepts either name).
func servesModel(w *registry.Worker, model string) bool {
	if w.Model == model {
		return true
	}
	_, ok := w.Adapter(model)
	return ok
}
