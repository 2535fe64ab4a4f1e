package caddymodule

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/dustin/go-humanize"

	"github.com/kvroute/kvroute/internal/natsutil"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("kvroute", parseGlobalOption)
	httpcaddyfile.RegisterHandlerDirective("kvroute", parseHandlerDirective)
	httpcaddyfile.RegisterDirectiveOrder("kvroute", httpcaddyfile.Before, "reverse_proxy")
}

// parseGlobalOption parses the `kvroute` global option into the kvroute app:
//
//	kvroute {
//	    nats_url         <url>
//	    nats_credentials <file>
//	    embedded_nats {
//	        host      <loopback address>
//	        port      <port>|random
//	        store_dir <dir>
//	        token_file <file>
//	        no_auth
//	    }
//	    upstream_cidrs <cidr|address...>
//	    memory_limit <size>|off
//	    health_checks off | {
//	        uri      <path>
//	        interval <duration>
//	        timeout  <duration>
//	    }
//	    worker <id> {
//	        endpoint       <host:port>
//	        model          <name>
//	        engine         vllm|sglang
//	        engine_version <version>
//	        block_size     <tokens>
//	        dp_size        <n>
//	        features       <feature...>
//	        contract_file  <file>
//	        adapters       <name>[=<base_model>]...
//	    }
//	}
//
// Repeated `kvroute` blocks are merged.
func parseGlobalOption(d *caddyfile.Dispenser, existingVal any) (any, error) {
	app := new(App)
	if existingVal != nil {
		prev, ok := existingVal.(httpcaddyfile.App)
		if !ok {
			return nil, d.Errf("unexpected existing value for kvroute: %T", existingVal)
		}
		if err := json.Unmarshal(prev.Value, app); err != nil {
			return nil, d.Errf("merging kvroute blocks: %v", err)
		}
	}
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "kvroute", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile sets up the app from Caddyfile tokens; see parseGlobalOption for the syntax.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "nats_url":
			if a.NATSURL != "" {
				return d.Err("nats_url already specified")
			}
			if err := oneArg(d, stringInto(&a.NATSURL)); err != nil {
				return err
			}
		case "nats_credentials":
			if a.NATSCredentials != "" {
				return d.Err("nats_credentials already specified")
			}
			if err := oneArg(d, stringInto(&a.NATSCredentials)); err != nil {
				return err
			}
		case "embedded_nats":
			if a.EmbeddedNATS != nil {
				return d.Err("embedded_nats already specified")
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			a.EmbeddedNATS = new(EmbeddedNATS)
			if err := a.EmbeddedNATS.unmarshalCaddyfile(d); err != nil {
				return err
			}
		case "memory_limit":
			if a.MemoryLimit != nil {
				return d.Err("memory_limit already specified")
			}
			a.MemoryLimit = new(int64)
			size := sizeInto(d, a.MemoryLimit)
			if err := oneArg(d, func(s string) error {
				if s == "off" {
					*a.MemoryLimit = -1
					return nil
				}
				return size(s)
			}); err != nil {
				return err
			}
		case "upstream_cidrs":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			a.UpstreamCIDRs = append(a.UpstreamCIDRs, args...)
		case "health_checks":
			if a.HealthChecks != nil {
				return d.Err("health_checks already specified")
			}
			a.HealthChecks = new(HealthChecks)
			if err := a.HealthChecks.unmarshalCaddyfile(d); err != nil {
				return err
			}
		case "worker":
			var sw StaticWorker
			if err := sw.unmarshalCaddyfile(d); err != nil {
				return err
			}
			for _, w := range a.Workers {
				if w.WorkerID == sw.WorkerID {
					return d.Errf("worker '%s' already specified", sw.WorkerID)
				}
			}
			a.Workers = append(a.Workers, sw)
		default:
			ok, err := a.RoutingConfig.unmarshalRoutingOption(d)
			if err != nil {
				return err
			}
			if !ok {
				return d.Errf("unrecognized subdirective '%s'", d.Val())
			}
		}
	}
	return nil
}

func (e *EmbeddedNATS) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	seen := seenOptions{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := seen.once(d, "embedded_nats"); err != nil {
			return err
		}
		opt := d.Val()
		if opt == "no_auth" {
			if d.NextArg() {
				return d.ArgErr()
			}
			e.NoAuth = true
			continue
		}
		val, err := singleArg(d)
		if err != nil {
			return err
		}
		switch opt {
		case "token_file":
			e.TokenFile = val
		case "host":
			e.Host = val
		case "port":
			if val == "random" {
				e.Port = natsutil.RandomPort
				break
			}
			p, err := strconv.Atoi(val)
			if err != nil || p < 1 || p > 65535 {
				return d.Errf("invalid port '%s'", val)
			}
			e.Port = p
		case "store_dir":
			e.StoreDir = val
		default:
			return d.Errf("unrecognized subdirective '%s'", opt)
		}
	}
	return nil
}

func (sw *StaticWorker) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	sw.WorkerID = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	set := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if set[opt] && opt != "adapters" {
			return d.Errf("%s already specified", opt)
		}
		set[opt] = true
		args := d.RemainingArgs()
		if len(args) == 0 || (opt != "features" && opt != "adapters" && len(args) != 1) {
			return d.ArgErr()
		}
		switch opt {
		case "adapters":
			sw.Adapters = append(sw.Adapters, parseAdapterArgs(args)...)
		case "endpoint":
			sw.Endpoint = args[0]
		case "model":
			sw.Model = args[0]
		case "engine":
			sw.Engine = args[0]
		case "engine_version":
			sw.EngineVersion = args[0]
		case "block_size", "dp_size":
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 {
				return d.Errf("invalid %s '%s'", opt, args[0])
			}
			if opt == "block_size" {
				sw.BlockSize = n
			} else {
				sw.DPSize = n
			}
		case "features":
			sw.Features = args
		case "contract_file":
			sw.ContractFile = args[0]
		default:
			return d.Errf("unrecognized subdirective '%s'", opt)
		}
	}
	return nil
}

func parseHandlerDirective(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return m, nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	kvroute [<matcher>] {
//	    max_body_size <size>
//	    read_timeout  <duration>
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "max_body_size":
			if h.MaxBodySize != 0 {
				return d.Err("max_body_size already specified")
			}
			err := oneArg(d, func(v string) error {
				size, err := humanize.ParseBytes(v)
				if err != nil || size == 0 || size > 1<<40 {
					return d.Errf("invalid max_body_size '%s'", v)
				}
				h.MaxBodySize = int64(size)
				return nil
			})
			if err != nil {
				return err
			}
		case "read_timeout":
			if h.ReadTimeout != 0 {
				return d.Err("read_timeout already specified")
			}
			err := oneArg(d, func(v string) error {
				dur, err := caddy.ParseDuration(v)
				if err != nil || dur <= 0 {
					return d.Errf("invalid read_timeout '%s'", v)
				}
				h.ReadTimeout = caddy.Duration(dur)
				return nil
			})
			if err != nil {
				return err
			}
		default:
			return d.Errf("unrecognized subdirective '%s'", d.Val())
		}
	}
	return nil
}

// UnmarshalCaddyfile sets up the selection policy from Caddyfile tokens:
//
//	lb_policy kvroute {
//	    fallback <policy> [<policy args...>]
//	}
func (s *Selection) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume policy name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "fallback":
			if !d.NextArg() {
				return d.ArgErr()
			}
			if s.FallbackRaw != nil {
				return d.Err("fallback selection policy already specified")
			}
			name := d.Val()
			modID := "http.reverse_proxy.selection_policies." + name
			unm, err := caddyfile.UnmarshalModule(d, modID)
			if err != nil {
				return err
			}
			sel, ok := unm.(reverseproxy.Selector)
			if !ok {
				return d.Errf("module %s (%T) is not a reverseproxy.Selector", modID, unm)
			}
			s.FallbackRaw = caddyconfig.JSONModuleObject(sel, "policy", name, nil)
		default:
			return d.Errf("unrecognized subdirective '%s'", d.Val())
		}
	}
	return nil
}

// UnmarshalCaddyfile sets up the upstream source from Caddyfile tokens:
//
//	dynamic kvroute [<model>]
func (u *Upstreams) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume upstream source name
	args := d.RemainingArgs()
	if len(args) > 1 {
		return d.ArgErr()
	}
	if len(args) == 1 {
		u.Model = args[0]
	}
	if d.NextBlock(d.Nesting()) {
		return d.Errf("unrecognized subdirective '%s'", d.Val())
	}
	return nil
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*App)(nil)
	_ caddyfile.Unmarshaler = (*Handler)(nil)
	_ caddyfile.Unmarshaler = (*Selection)(nil)
	_ caddyfile.Unmarshaler = (*Upstreams)(nil)
)

// unmarshalCaddyfile parses `health_checks off` (active probes off; passive detection stays on)
// or a block of uri, interval and timeout.
func (h *HealthChecks) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		if d.Val() != "off" || d.NextArg() {
			return d.ArgErr()
		}
		h.Interval = -1
		return nil
	}
	seen := seenOptions{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := seen.once(d, "health_checks"); err != nil {
			return err
		}
		opt := d.Val()
		val, err := singleArg(d)
		if err != nil {
			return err
		}
		switch opt {
		case "uri":
			if !strings.HasPrefix(val, "/") {
				return d.Errf("health_checks uri %q must start with /", val)
			}
			h.URI = val
		case "interval", "timeout":
			dur, err := caddy.ParseDuration(val)
			if err != nil || dur <= 0 {
				return d.Errf("health_checks %s %q: want a positive duration", opt, val)
			}
			if opt == "interval" {
				h.Interval = caddy.Duration(dur)
			} else {
				h.Timeout = caddy.Duration(dur)
			}
		default:
			return d.Errf("unrecognized health_checks option '%s'", opt)
		}
	}
	return nil
}
