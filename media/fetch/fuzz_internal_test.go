package fetch

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/kvroute/kvroute/reason"
)

// FuzzCheckHost: no host spelling passes the pre-dial check unless it is a public IP literal or a
// name that cannot be read as an IPv4 number; nothing panics.
func FuzzCheckHost(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "0x7f000001", "2130706433", "127.1", "::ffff:127.0.0.1",
		"fe80::1%eth0", "media.example.com", "8.8.8.8", "0177.0.0.1", "1.2.3.4.", "a.0x", "[::1]", ""} {
		f.Add(s, uint16(80))
	}
	p, err := compile(DefaultConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host string, port uint16) {
		err := p.checkHost(host, port)
		if err != nil {
			if reason.CodeOf(err) != reason.MediaURLBlocked {
				t.Fatalf("checkHost(%q) = %v, want %s", host, err, reason.MediaURLBlocked)
			}
			return
		}
		if ip, perr := netip.ParseAddr(host); perr == nil {
			if c := classify(ip); c != classPublic {
				t.Fatalf("checkHost(%q) accepted a %s address", host, c)
			}
			return
		}
		if endsInNumber(normalizeHost(host)) {
			t.Fatalf("checkHost(%q) accepted a numeric host that is not a canonical literal", host)
		}
	})
}

// FuzzDataURL: any data: URL decodes or fails with a client error; never panics, never exceeds MaxBytes.
func FuzzDataURL(f *testing.F) {
	for _, s := range []string{"data:,x", "data:;base64,aGk=", "data:;base64,@@", "data:,%zz", "data:",
		"data:;base64,aGk=aGk=", "data:;base64, a G k"} {
		f.Add(s)
	}
	cfg := DefaultConfig()
	cfg.MaxBytes = 64
	fe, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := fe.fetchData(context.Background(), "data:"+s, &hold{})
		if err != nil {
			var re *reason.Error
			if !errors.As(err, &re) || !re.Code.IsClientError() {
				t.Fatalf("fetchData(%q) = %v, want a client-error *reason.Error", s, err)
			}
			return
		}
		if len(b) > 64 {
			t.Fatalf("fetchData(%q) returned %d bytes over the 64-byte cap", s, len(b))
		}
	})
}
