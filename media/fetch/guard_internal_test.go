package fetch

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/reason"
)

func TestClassify(t *testing.T) {
	cases := map[string]addrClass{
		"8.8.8.8":                  classPublic,
		"93.184.216.34":            classPublic,
		"172.32.0.1":               classPublic,
		"100.128.0.1":              classPublic,
		"2606:4700:4700::1111":     classPublic,
		"64:ff9b::808:808":         classPublic, // NAT64 of 8.8.8.8
		"2002:808:808::1":          classPublic, // 6to4 of 8.8.8.8
		"127.0.0.1":                classLoopback,
		"127.255.255.254":          classLoopback,
		"::1":                      classLoopback,
		"::ffff:127.0.0.1":         classLoopback,
		"::ffff:7f00:1":            classLoopback,
		"64:ff9b::7f00:1":          classLoopback,
		"2002:7f00:1::":            classLoopback,
		"10.0.0.5":                 classPrivate,
		"172.16.0.1":               classPrivate,
		"172.31.255.255":           classPrivate,
		"192.168.1.1":              classPrivate,
		"100.64.0.1":               classPrivate,
		"100.127.255.255":          classPrivate,
		"fc00::1":                  classPrivate,
		"fd12:3456::1":             classPrivate,
		"::ffff:10.0.0.5":          classPrivate,
		"169.254.169.254":          classReserved,
		"::ffff:169.254.169.254":   classReserved,
		"64:ff9b::a9fe:a9fe":       classReserved,
		"2002:a9fe:a9fe::":         classReserved,
		"fe80::1":                  classReserved,
		"fe80::1%eth0":             classReserved,
		"192.0.0.8":                classReserved,
		"192.0.2.1":                classReserved,
		"198.18.0.1":               classReserved,
		"198.51.100.7":             classReserved,
		"203.0.113.9":              classReserved,
		"240.0.0.1":                classReserved,
		"::7f00:1":                 classReserved, // deprecated IPv4-compatible
		"fec0::1":                  classReserved,
		"2001:db8::1":              classReserved,
		"100::1":                   classReserved,
		"0.0.0.0":                  classNeverDialed,
		"0.1.2.3":                  classNeverDialed,
		"::":                       classNeverDialed,
		"::ffff:0.0.0.0":           classNeverDialed,
		"224.0.0.1":                classNeverDialed,
		"239.255.255.250":          classNeverDialed,
		"255.255.255.255":          classNeverDialed,
		"ff02::1":                  classNeverDialed,
		"::ffff:224.0.0.1":         classNeverDialed,
		"64:ff9b::ffff:ffff":       classNeverDialed,
		"2002:e000:1::":            classNeverDialed,
		"fd00:ec2::254":            classPrivate, // AWS IMDS over IPv6
		"::ffff:100.64.0.1":        classPrivate,
		"::ffff:192.168.0.1":       classPrivate,
		"64:ff9b::c0a8:1":          classPrivate,
		"::ffff:198.18.0.1":        classReserved,
		"::ffff:8.8.8.8":           classPublic,
		"2001:4860:4860::8888":     classPublic,
		"2a00:1450:4001:80b::200e": classPublic,
	}
	for s, want := range cases {
		if got := classify(netip.MustParseAddr(s)); got != want {
			t.Errorf("classify(%s) = %s, want %s", s, got, want)
		}
	}
}

func mustPolicy(t *testing.T, cfg *Config) *policy {
	t.Helper()
	p, err := compile(cfg)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return p
}

func TestCheckAddr(t *testing.T) {
	type probe struct {
		addr string
		ok   bool
	}
	cases := []struct {
		name   string
		cfg    func(*Config)
		probes []probe
	}{
		{"default", func(*Config) {}, []probe{
			{"8.8.8.8:80", true}, {"127.0.0.1:80", false}, {"[::1]:80", false}, {"10.0.0.5:80", false},
			{"169.254.169.254:80", false}, {"[::ffff:127.0.0.1]:80", false}, {"0.0.0.0:80", false},
		}},
		{"allow_loopback", func(c *Config) { c.AllowLoopback = true }, []probe{
			{"127.0.0.1:2019", true}, {"[::1]:4222", true}, {"[::ffff:127.0.0.1]:80", true},
			{"0.0.0.0:80", false}, {"[::]:80", false}, {"10.0.0.5:80", false}, {"169.254.169.254:80", false},
		}},
		{"allow_private", func(c *Config) { c.AllowPrivate = true }, []probe{
			{"10.0.0.5:80", true}, {"100.64.1.1:80", true}, {"[fd00::1]:80", true},
			{"127.0.0.1:80", false}, {"169.254.169.254:80", false},
		}},
		{"allow_addrs", func(c *Config) { c.AllowAddrs = []string{"127.0.0.1:8081", "[::1]:9000"} }, []probe{
			{"127.0.0.1:8081", true}, {"[::ffff:127.0.0.1]:8081", true}, {"[::1]:9000", true},
			{"127.0.0.1:2019", false}, {"[::1]:8081", false}, {"127.0.0.2:8081", false},
		}},
		{"allow_cidrs", func(c *Config) {
			c.AllowCIDRs = []string{"169.254.169.254/32", "10.1.0.0/16", "0.0.0.0/0", "::/0"}
		}, []probe{
			{"169.254.169.254:80", true}, {"10.1.2.3:80", true}, {"127.0.0.1:80", true},
			{"0.0.0.0:80", false}, {"224.0.0.1:80", false}, {"[::]:80", false}, {"[ff02::1]:80", false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.cfg(cfg)
			p := mustPolicy(t, cfg)
			for _, pr := range tc.probes {
				ap := netip.MustParseAddrPort(pr.addr)
				if err := p.checkAddr(ap.Addr(), ap.Port()); (err == nil) != pr.ok {
					t.Errorf("checkAddr(%s) = %v, want ok=%v", pr.addr, err, pr.ok)
				}
			}
		})
	}
}

func TestEndsInNumber(t *testing.T) {
	cases := map[string]bool{
		"2130706433": true, "0x7f000001": true, "0X7F000001": true, "127.1": true, "127.0.0.1": true,
		"0177.0.0.1": true, "foo.123": true, "foo.123.": true, "a.0x": true,
		"example.com": false, "1.2.3.4.example": false, "0xg": false, "host.": false, "123abc": false,
		"media.test": false,
	}
	for h, want := range cases {
		if got := endsInNumber(h); got != want {
			t.Errorf("endsInNumber(%q) = %v, want %v", h, got, want)
		}
	}
}

func TestCheckHost(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AllowLoopback = true // odd spellings must be refused even when their value would be allowed
	p := mustPolicy(t, cfg)
	for _, h := range []string{"2130706433", "0x7f000001", "127.1", "0177.0.0.1", "127.0.0.1.", "0x7f.1",
		"", "médià.test", "a b"} {
		if err := p.checkHost(h, 80); reason.CodeOf(err) != reason.MediaURLBlocked {
			t.Errorf("checkHost(%q) = %v, want %s", h, err, reason.MediaURLBlocked)
		}
	}
	for _, h := range []string{"127.0.0.1", "::1", "media.test", "MEDIA.TEST."} {
		if err := p.checkHost(h, 80); err != nil {
			t.Errorf("checkHost(%q) = %v, want nil", h, err)
		}
	}
}

func TestDomainAllowed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AllowedDomains = []string{"Media.Example.com.", "*.cdn.test", "127.0.0.1", "[::1]"}
	p := mustPolicy(t, cfg)
	cases := map[string]bool{
		"media.example.com": true, "a.cdn.test": true, "x.y.cdn.test": true, "127.0.0.1": true, "::1": true,
		"cdn.test": false, "evilcdn.test": false, "example.com": false, "a.media.example.com": false,
		"127.0.0.2": false,
	}
	for h, want := range cases {
		if got := p.domainAllowed(h); got != want {
			t.Errorf("domainAllowed(%q) = %v, want %v", h, got, want)
		}
	}
	if !mustPolicy(t, DefaultConfig()).domainAllowed("anything.test") {
		t.Error("empty domain list must allow every host")
	}
}

func TestCompileErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*Config){
		"max_bytes":     func(c *Config) { c.MaxBytes = 0 },
		"timeout":       func(c *Config) { c.Timeout = -1 },
		"max_redirects": func(c *Config) { c.MaxRedirects = -1 },
		"domain_star":   func(c *Config) { c.AllowedDomains = []string{"*"} },
		"domain_mid":    func(c *Config) { c.AllowedDomains = []string{"a.*.test"} },
		"domain_port":   func(c *Config) { c.AllowedDomains = []string{"a.test:80"} },
		"domain_empty":  func(c *Config) { c.AllowedDomains = []string{""} },
		"cidr":          func(c *Config) { c.AllowCIDRs = []string{"10.0.0.0/33"} },
		"addr_no_port":  func(c *Config) { c.AllowAddrs = []string{"127.0.0.1"} },
		"root_missing":  func(c *Config) { c.FileRoot = filepath.Join(dir, "missing") },
		"root_file":     func(c *Config) { c.FileRoot = file },
	}
	for name, mut := range cases {
		cfg := DefaultConfig()
		mut(cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted an invalid config", name)
		}
	}
}

// countingReader yields an endless stream of 'x' and counts the bytes handed out.
type countingReader struct{ n int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	r.n += int64(len(p))
	return len(p), nil
}

func TestReadCapped(t *testing.T) {
	const limit = 100_000
	r := &countingReader{}
	_, err := readCapped(context.Background(), r, limit, -1, &hold{})
	if reason.CodeOf(err) != reason.MediaTooLarge {
		t.Fatalf("endless source: err = %v, want %s", err, reason.MediaTooLarge)
	}
	if r.n > limit+1 {
		t.Errorf("endless source: read %d bytes, want at most limit+1 = %d", r.n, limit+1)
	}

	exact := bytes.Repeat([]byte("ab"), limit/2)
	got, err := readCapped(context.Background(), bytes.NewReader(exact), limit, int64(len(exact)), &hold{})
	if err != nil || !bytes.Equal(got, exact) {
		t.Fatalf("exactly limit bytes: err = %v, equal = %v", err, bytes.Equal(got, exact))
	}
	if cap(got) > limit+1 {
		t.Errorf("exactly limit bytes: cap %d > limit+1", cap(got))
	}
	if _, err := readCapped(context.Background(), bytes.NewReader(append(exact, 'z')), limit, -1, &hold{}); reason.CodeOf(err) != reason.MediaTooLarge {
		t.Errorf("limit+1 bytes: err = %v, want %s", err, reason.MediaTooLarge)
	}

	// A false size hint must not size the buffer.
	got, err = readCapped(context.Background(), strings.NewReader("tiny"), 1<<30, 1<<40, &hold{})
	if err != nil || string(got) != "tiny" {
		t.Fatalf("lying hint: got %q, %v", got, err)
	}
	if cap(got) > maxHintAlloc {
		t.Errorf("lying hint: cap %d, want at most %d", cap(got), maxHintAlloc)
	}
	// Errors other than EOF pass through.
	if _, err := readCapped(context.Background(), io.MultiReader(strings.NewReader("ab"), errReader{}), 10, -1, &hold{}); err != io.ErrUnexpectedEOF {
		t.Errorf("reader error: got %v, want io.ErrUnexpectedEOF", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
