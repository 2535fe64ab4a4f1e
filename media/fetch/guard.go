package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/kvroute/kvroute/reason"
)

// addrClass is the class of an address under the fetch policy.
type addrClass int

const (
	classPublic      addrClass = iota // global unicast: always allowed
	classLoopback                     // 127/8, ::1: AllowLoopback
	classPrivate                      // RFC 1918, 100.64/10, fc00::/7: AllowPrivate
	classReserved                     // link-local, documentation, benchmarking, 240/4, ...: AllowCIDRs/AllowAddrs only
	classNeverDialed                  // unspecified (0/8, ::), multicast, broadcast: never
)

var classNames = [...]string{"public", "loopback", "private", "link-local or reserved", "unspecified or multicast"}

func (c addrClass) String() string { return classNames[c] }

// Special-purpose prefixes beyond what netip.Addr's Is* methods cover (IANA special-purpose registries).
var (
	privateV4 = []netip.Prefix{
		netip.MustParsePrefix("100.64.0.0/10"), // RFC 6598 CGNAT shared space: often internal (k8s, VPNs)
	}
	reservedV4 = []netip.Prefix{
		netip.MustParsePrefix("192.0.0.0/24"),    // RFC 6890 IETF protocol assignments
		netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
		netip.MustParsePrefix("198.18.0.0/15"),   // RFC 2544 benchmarking
		netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
		netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
		netip.MustParsePrefix("240.0.0.0/4"),     // reserved (255.255.255.255 is classNeverDialed)
	}
	reservedV6 = []netip.Prefix{
		netip.MustParsePrefix("::/96"),         // deprecated IPv4-compatible (:: and ::1 are classified first)
		netip.MustParsePrefix("100::/64"),      // RFC 6666 discard
		netip.MustParsePrefix("2001:db8::/32"), // documentation
		netip.MustParsePrefix("fec0::/10"),     // deprecated site-local
	}
	// Prefixes that embed an IPv4 address: classified by the embedded address as well.
	nat64  = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052 well-known NAT64
	sixTo4 = netip.MustParsePrefix("2002::/16")    // RFC 3056 6to4
	zeroV4 = netip.MustParsePrefix("0.0.0.0/8")    // "this network": Linux connects 0.0.0.0 to the local host
	bcast  = netip.AddrFrom4([4]byte{255, 255, 255, 255})
)

// classify returns the class of ip. IPv4-mapped (::ffff:a.b.c.d), NAT64 and 6to4 forms are classified
// by their IPv4 address, so no IPv6 spelling reaches an IPv4 address the policy refuses.
func classify(ip netip.Addr) addrClass {
	ip = ip.Unmap().WithZone("")
	switch {
	case ip.Is4():
		if zeroV4.Contains(ip) || ip == bcast {
			return classNeverDialed
		}
		return classifyFamily(ip, privateV4, reservedV4)
	case nat64.Contains(ip):
		b := ip.As16()
		return classify(netip.AddrFrom4([4]byte(b[12:16])))
	case sixTo4.Contains(ip):
		b := ip.As16()
		return classify(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return classifyFamily(ip, nil, reservedV6)
}

// classifyFamily classifies ip by netip's predicates and then by the special-purpose prefixes of
// its address family (private and reserved).
func classifyFamily(ip netip.Addr, private, reserved []netip.Prefix) addrClass {
	switch {
	case ip.IsUnspecified() || ip.IsMulticast():
		return classNeverDialed
	case ip.IsLoopback():
		return classLoopback
	case ip.IsPrivate() || inAny(private, ip):
		return classPrivate
	case ip.IsLinkLocalUnicast() || inAny(reserved, ip):
		return classReserved
	}
	return classPublic
}

func inAny(prefixes []netip.Prefix, ip netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// checkAddr returns nil when the policy lets the fetcher connect to ip:port, else an error naming the
// address and its class (for the operator's log, never shown to the client).
func (p *policy) checkAddr(ip netip.Addr, port uint16) error {
	ip = ip.Unmap().WithZone("")
	c := classify(ip)
	switch c {
	case classPublic:
		return nil
	case classNeverDialed:
		return fmt.Errorf("address %s is %s", ip, c)
	case classLoopback:
		if p.allowLoopback {
			return nil
		}
	case classPrivate:
		if p.allowPrivate {
			return nil
		}
	}
	if p.allowAddrs[netip.AddrPortFrom(ip, port)] {
		return nil
	}
	for _, pfx := range p.allowCIDRs {
		if pfx.Contains(ip) {
			return nil
		}
	}
	return fmt.Errorf("address %s is %s", ip, c)
}

// endsInNumber reports whether host would be read as an IPv4 address by a WHATWG URL parser or by
// inet_aton: its last label is decimal digits or 0x-hex ("2130706433", "0x7f000001", "127.1").
// Such a host must be a canonical dotted-quad literal, else it is refused without any DNS lookup.
func endsInNumber(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if h, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		return strings.Trim(h, "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// checkHost applies the host rules that need no DNS: ASCII only, no odd IP spellings, the domain list,
// and the address policy for IP literals. host is the URL's host name (no port, no brackets); port is
// the effective port.
func (p *policy) checkHost(host string, port uint16) error {
	if host == "" {
		return reason.New(reason.MediaURLBlocked, "media URL has no host")
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c <= ' ' || c >= 0x7f {
			return reason.New(reason.MediaURLBlocked, "media URL host must be ASCII (use punycode)")
		}
	}
	h := normalizeHost(host)
	if ip, err := netip.ParseAddr(host); err == nil {
		h = ip.WithZone("").String()
		if !p.domainAllowed(h) {
			return reason.New(reason.MediaURLBlocked, "media host %q is not in the allowed domains", h)
		}
		if err := p.checkAddr(ip, port); err != nil {
			return reason.Wrap(reason.MediaURLBlocked, err, "media host %q is not a public address", h)
		}
		return nil
	}
	if endsInNumber(h) {
		return reason.New(reason.MediaURLBlocked, "media host %q is not a canonical IP address", h)
	}
	if !p.domainAllowed(h) {
		return reason.New(reason.MediaURLBlocked, "media host %q is not in the allowed domains", h)
	}
	return nil
}

// guardedDialer resolves a host once, checks every resolved address against the policy, and dials only
// checked addresses; the socket's Control hook checks the address again right before connect(2). A
// DNS answer that changes between the check and the connection (rebinding) is therefore never used.
type guardedDialer struct {
	p        *policy
	resolver Resolver
	dialer   net.Dialer
}

func newGuardedDialer(p *policy, r Resolver) *guardedDialer {
	d := &guardedDialer{p: p, resolver: r}
	d.dialer = net.Dialer{Timeout: p.timeout, Control: d.control}
	return d
}

// control runs after socket(2) and before connect(2) for every connection attempt.
func (d *guardedDialer) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial guard: parsing address %q: %w", address, err)
	}
	if err := d.p.checkAddr(ap.Addr(), ap.Port()); err != nil {
		return reason.Wrap(reason.MediaURLBlocked, err, "media host is not a public address")
	}
	return nil
}

// DialContext is the http.Transport dial function.
func (d *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, reason.Wrap(reason.MediaURLBlocked, err, "media URL has an invalid host")
	}
	port64, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, reason.Wrap(reason.MediaURLBlocked, err, "media URL has an invalid port")
	}
	port := uint16(port64)
	if err := d.p.checkHost(host, port); err != nil {
		return nil, err
	}
	h := normalizeHost(host)
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		answers, err := d.resolver.LookupIPAddr(ctx, h)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, reason.Wrap(reason.MediaFetchFailed, err, "resolving media host %q failed", h)
		}
		for _, a := range answers {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				continue
			}
			ips = append(ips, ip.Unmap().WithZone(a.Zone))
		}
		if len(ips) == 0 {
			return nil, reason.New(reason.MediaFetchFailed, "media host %q has no address", h)
		}
	}
	// Fail closed: one refused address refuses the name, so a mixed public/private answer cannot
	// be used to reach the private one on a retry or a later connection.
	for _, ip := range ips {
		if err := d.p.checkAddr(ip, port); err != nil {
			return nil, reason.Wrap(reason.MediaURLBlocked, err, "media host %q is not a public address", h)
		}
	}
	var errs []error
	for _, ip := range ips {
		conn, err := d.dialer.DialContext(ctx, network, netip.AddrPortFrom(ip, port).String())
		if err == nil {
			return conn, nil
		}
		if code := reason.CodeOf(err); code != "" || ctx.Err() != nil {
			return nil, err
		}
		errs = append(errs, err)
	}
	return nil, reason.Wrap(reason.MediaFetchFailed, errors.Join(errs...), "connecting to media host %q failed", h)
}
