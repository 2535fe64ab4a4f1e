package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Defaults of DESIGN.md §6.
const (
	// DefaultMaxBytes is the largest media object fetched, in bytes (256 MiB).
	DefaultMaxBytes int64 = 256 << 20
	// DefaultTimeout bounds one whole fetch: resolving, connecting, every redirect hop and the body.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxRedirects is the number of redirects followed before giving up.
	DefaultMaxRedirects = 5
)

// Resolver resolves host names. *net.Resolver implements it; tests inject a map.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Config is the fetch policy. The zero value of each field means "closed": no local files, no
// non-public addresses, no domain restriction beyond the address policy.
type Config struct {
	// MaxBytes is the largest object accepted, in bytes. A declared Content-Length above it fails at
	// once; otherwise reading stops at MaxBytes+1 bytes. Default: 256 MiB.
	MaxBytes int64
	// Timeout bounds the whole fetch (DNS, connect, TLS, redirects, body). Default: 30 s.
	Timeout time.Duration
	// MaxRedirects is the number of HTTP redirects followed. 0 means none. Default: 5.
	MaxRedirects int
	// AllowedDomains, when not empty, restricts http(s) hosts (on every redirect hop) to these entries:
	// an exact host name ("media.example.com") or "*.suffix" ("*.example.com"), which matches any
	// name below the suffix but not the suffix itself. An IP-literal host must be listed exactly.
	// Matching is case-insensitive and ignores one trailing dot. The address policy still applies.
	AllowedDomains []string
	// FileRoot is the local directory file: URLs may read from (file:///abs/path, the path must lie
	// under FileRoot after resolving symbolic links; regular files only). Empty: file: is refused.
	FileRoot string
	// AllowLoopback permits 127.0.0.0/8 and ::1. Default: false.
	AllowLoopback bool
	// AllowPrivate permits RFC 1918 (10/8, 172.16/12, 192.168/16), CGNAT shared space (100.64/10) and
	// IPv6 unique-local (fc00::/7) addresses. Default: false.
	AllowPrivate bool
	// AllowCIDRs permits the listed prefixes ("10.1.0.0/16", "fd00::/8", "169.254.169.254/32"),
	// whatever their class. Unspecified (0.0.0.0/8, ::) and multicast addresses stay refused.
	AllowCIDRs []string
	// AllowAddrs permits exact "ip:port" endpoints ("127.0.0.1:8081", "[::1]:9000"), whatever their
	// class: the narrowest opening, e.g. a demo media server on loopback without opening the Caddy
	// admin API on the same host. Unspecified and multicast addresses stay refused.
	AllowAddrs []string
	// Resolver resolves host names. Default: net.DefaultResolver.
	Resolver Resolver
	// TLS is the client TLS configuration for https (e.g. a private CA). Default: system roots.
	TLS *tls.Config
	// Budget, when set, bounds the media bytes all fetches hold at once (shared by every Fetcher
	// of the process that uses it); a fetch that cannot reserve gets reason.MediaBusy. Default:
	// none (each fetch is bounded by MaxBytes only).
	Budget *Budget
}

// DefaultConfig returns the DESIGN.md §6 defaults: 256 MiB, 30 s, 5 redirects, public addresses only,
// no file: root, no domain list.
func DefaultConfig() *Config {
	return &Config{
		MaxBytes:     DefaultMaxBytes,
		Timeout:      DefaultTimeout,
		MaxRedirects: DefaultMaxRedirects,
	}
}

// policy is the compiled, immutable form of a Config.
type policy struct {
	maxBytes      int64
	budget        *Budget
	timeout       time.Duration
	maxRedirects  int
	exactDomains  map[string]bool
	suffixDomains []string // each starts with "."
	domainList    bool
	fileRoot      string // absolute, symlinks resolved; "" = file: refused
	fileRootLex   string // absolute, as configured (cleaned)
	allowLoopback bool
	allowPrivate  bool
	allowCIDRs    []netip.Prefix
	allowAddrs    map[netip.AddrPort]bool
}

// compile validates cfg and returns its policy. Errors name the field and the bad value.
func compile(cfg *Config) (*policy, error) {
	p := &policy{
		maxBytes:      cfg.MaxBytes,
		budget:        cfg.Budget,
		timeout:       cfg.Timeout,
		maxRedirects:  cfg.MaxRedirects,
		allowLoopback: cfg.AllowLoopback,
		allowPrivate:  cfg.AllowPrivate,
	}
	if p.maxBytes <= 0 {
		return nil, fmt.Errorf("max_bytes must be greater than zero, got %d", cfg.MaxBytes)
	}
	if p.timeout <= 0 {
		return nil, fmt.Errorf("timeout must be greater than zero, got %s", cfg.Timeout)
	}
	if p.maxRedirects < 0 {
		return nil, fmt.Errorf("max_redirects must not be negative, got %d", cfg.MaxRedirects)
	}
	p.exactDomains = make(map[string]bool)
	p.domainList = len(cfg.AllowedDomains) > 0
	for _, d := range cfg.AllowedDomains {
		d = normalizeHost(d)
		if ip, err := netip.ParseAddr(strings.Trim(d, "[]")); err == nil {
			p.exactDomains[ip.WithZone("").String()] = true
			continue
		}
		name, wildcard := strings.CutPrefix(d, "*.")
		if name == "" || strings.ContainsAny(name, "*/:@[] ") {
			return nil, fmt.Errorf("allowed domain %q: want a host name, an IP or *.suffix", d)
		}
		if wildcard {
			p.suffixDomains = append(p.suffixDomains, "."+name)
		} else {
			p.exactDomains[name] = true
		}
	}
	for _, s := range cfg.AllowCIDRs {
		pfx, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("parsing allowed cidr %q: %w", s, err)
		}
		p.allowCIDRs = append(p.allowCIDRs, pfx.Masked())
	}
	p.allowAddrs = make(map[netip.AddrPort]bool)
	for _, s := range cfg.AllowAddrs {
		ap, err := netip.ParseAddrPort(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("parsing allowed address %q (want ip:port): %w", s, err)
		}
		p.allowAddrs[netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())] = true
	}
	if cfg.FileRoot != "" {
		abs, err := filepath.Abs(cfg.FileRoot)
		if err != nil {
			return nil, fmt.Errorf("resolving file root %q: %w", cfg.FileRoot, err)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("resolving file root %q: %w", cfg.FileRoot, err)
		}
		fi, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("checking file root %q: %w", cfg.FileRoot, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("checking file root %q: %w", cfg.FileRoot, errors.New("not a directory"))
		}
		p.fileRoot, p.fileRootLex = real, abs
	}
	return p, nil
}

// normalizeHost lowercases h and strips one trailing dot.
func normalizeHost(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	return strings.TrimSuffix(h, ".")
}

// domainAllowed reports whether host (normalized) passes the AllowedDomains list.
func (p *policy) domainAllowed(host string) bool {
	if !p.domainList {
		return true
	}
	if p.exactDomains[host] {
		return true
	}
	for _, s := range p.suffixDomains {
		if len(host) > len(s) && strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}
