package layout_test

import (
	"testing"

	"github.com/kvroute/kvroute/routing/layout"
)

// FuzzParseContract checks that parsing never panics, and that a valid contract's canonical form
// parses back to a contract with the same digest.
func FuzzParseContract(f *testing.F) {
	f.Add([]byte(exampleContract))
	f.Add([]byte(`{"schema": "kvroute.video_contract/v1", "sampler": {"kind": "sglang"}}`))
	f.Add([]byte(`{"resize": {"min_pixels": 1e400}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := layout.ParseContract(doc)
		if err != nil || c.Validate() != nil {
			return
		}
		d, err := c.Digest()
		if err != nil {
			t.Fatalf("digest of a valid contract: %v", err)
		}
		canon, err := c.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		c2, err := layout.ParseContract(canon)
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", err, canon)
		}
		if err := c2.Validate(); err != nil {
			t.Fatalf("canonical form does not validate: %v", err)
		}
		if d2, _ := c2.Digest(); d2 != d {
			t.Fatalf("digest changed through the canonical form: %s vs %s", d, d2)
		}
	})
}
