package mediaresolver

import (
	"github.com/kvroute/kvroute/routing/layout"
)

// contractDigest is c.Digest() remembered for the last contract seen. The router passes the
// same *layout.Contract (its cohort's, cached per model) with every request, and a digest is a
// JSON encode, decode, canonical re-encode and SHA-256 (tens of µs) that the decode-cache and
// revalidation keys needed on every video. Contracts are not modified after they are parsed;
// a different pointer is digested anew.
func (r *Resolver) contractDigest(c *layout.Contract) (string, error) {
	if last := r.lastDigest.Load(); last != nil && last.c == c {
		return last.digest, nil
	}
	d, err := c.Digest()
	if err != nil {
		return "", err
	}
	r.lastDigest.Store(&digested{c: c, digest: d})
	return d, nil
}

type digested struct {
	c      *layout.Contract
	digest string
}
