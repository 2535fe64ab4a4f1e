package mediaresolver

import (
	"testing"

	"github.com/kvroute/kvroute/routing/layout"
)

// TestContractDigestRemembered: the resolver's digest of a contract is the contract's own
// Digest, computed once for the pointer the router passes again with every request, and
// computed anew for another contract (a reload's, another model's).
func TestContractDigestRemembered(t *testing.T) {
	r := &Resolver{}
	c1, err := layout.ParseContract([]byte(layout.HubContractJSON))
	if err != nil {
		t.Fatal(err)
	}
	want1, err := c1.Digest()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if d, err := r.contractDigest(c1); err != nil || d != want1 {
			t.Fatalf("digest %q, %v; want %q", d, err, want1)
		}
	}
	if last := r.lastDigest.Load(); last == nil || last.c != c1 {
		t.Fatal("the digest was not remembered for the contract")
	}
	c2, err := layout.ParseContract([]byte(layout.HubContractJSON))
	if err != nil {
		t.Fatal(err)
	}
	fps := 1.0
	c2.Sampler.FPS = &fps // another contract (parsed anew, then changed before first use)
	want2, err := c2.Digest()
	if err != nil || want2 == want1 {
		t.Fatalf("second contract digest %q (%v) should differ from %q", want2, err, want1)
	}
	if d, _ := r.contractDigest(c2); d != want2 {
		t.Fatalf("second contract: %q, want %q", d, want2)
	}
	if d, _ := r.contractDigest(c1); d != want1 {
		t.Fatalf("first contract again: %q, want %q", d, want1)
	}
}
