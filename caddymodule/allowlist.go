package caddymodule

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/registry"
)

// DefaultUpstreamCIDRs are the address ranges registry endpoints may point to when the operator
// names none: loopback and the private ranges (RFC 1918, RFC 6598 shared space, IPv6 unique
// local). The static workers' own addresses are always added.
var DefaultUpstreamCIDRs = []string{
	"127.0.0.0/8", "::1/128",
	"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
	"fc00::/7",
}

// endpointResolveTimeout bounds the DNS lookup of one registry endpoint named by host name.
const endpointResolveTimeout = 2 * time.Second

// upstreamAllowList decides which registry endpoints the proxy may reach, so a process that can
// write the registry cannot make the edge proxy to arbitrary hosts (issue 11 item 4).
type upstreamAllowList struct {
	prefixes []netip.Prefix
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
}

// newUpstreamAllowList parses cidrs (DefaultUpstreamCIDRs when empty) and adds the address of
// every static worker whose endpoint is an IP literal (host names of static workers are trusted
// by name: see allowed).
func newUpstreamAllowList(cidrs []string, static []registry.Worker) (*upstreamAllowList, error) {
	if len(cidrs) == 0 {
		cidrs = DefaultUpstreamCIDRs
	}
	al := &upstreamAllowList{lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}}
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			a, aerr := netip.ParseAddr(c)
			if aerr != nil {
				return nil, fmt.Errorf("upstream_cidrs: %q is neither a CIDR nor an address", c)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		al.prefixes = append(al.prefixes, p.Masked())
	}
	for _, w := range static {
		if host, _, err := net.SplitHostPort(w.Endpoint); err == nil {
			if a, err := netip.ParseAddr(host); err == nil {
				al.prefixes = append(al.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			}
		}
	}
	return al, nil
}

// allowed reports whether endpoint (normalized host:port) is inside the allow-list: an IP literal
// in one of the ranges, or a host name whose every address is.
func (al *upstreamAllowList) allowed(ctx context.Context, endpoint string) error {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ctx, cancel := context.WithTimeout(ctx, endpointResolveTimeout)
		defer cancel()
		addrs, err = al.lookup(ctx, host)
		if err != nil {
			return fmt.Errorf("resolving %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return fmt.Errorf("%s has no address", host)
		}
	}
	for _, a := range addrs {
		if !al.contains(a.Unmap()) {
			return fmt.Errorf("address %s is outside upstream_cidrs", a)
		}
	}
	return nil
}

func (al *upstreamAllowList) contains(a netip.Addr) bool {
	for _, p := range al.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// recordAllowed reports whether registry record w's endpoint is inside upstream_cidrs.
func (a *App) recordAllowed(w registry.Worker) bool {
	return a.allow == nil || a.allow.allowed(context.Background(), w.Endpoint) == nil
}

// filterLive returns the live registry records whose endpoints are allowed, logging each refused
// one (worker id and endpoint, at most once per record content).
func (a *App) filterLive(live []registry.Worker) []registry.Worker {
	if a.allow == nil || len(live) == 0 {
		return live
	}
	out := make([]registry.Worker, 0, len(live))
	for _, w := range live {
		if err := a.allow.allowed(context.Background(), w.Endpoint); err != nil {
			key := w.WorkerID + "|" + w.Endpoint
			if _, logged := a.refused.LoadOrStore(key, true); !logged {
				a.logger.Warn("refusing worker record: endpoint outside upstream_cidrs",
					zap.String("worker_id", w.WorkerID), zap.String("endpoint", w.Endpoint), zap.Error(err))
			}
			continue
		}
		out = append(out, w)
	}
	return out
}
