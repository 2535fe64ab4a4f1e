// Package testkit holds helpers that several packages' tests share: a media resolver for loopback
// test servers. Only tests import it.
package testkit

import (
	"testing"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/media/resolver"
)

// LoopbackResolver returns a media resolver whose fetcher may reach loopback test servers, with
// the default decoder; its fetcher is closed when the test ends.
func LoopbackResolver(tb testing.TB) *resolver.Resolver {
	tb.Helper()
	fc := fetch.DefaultConfig()
	fc.AllowLoopback = true
	f, err := fetch.New(fc)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(f.Close)
	d, err := media.NewDecoder(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return resolver.New(f, d)
}
