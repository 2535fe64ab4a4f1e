package router

import (
	"github.com/kvroute/kvroute/kv"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/routing/chat"
)

// Forwarding the identities (DESIGN.md §1 step 6): when the media were routed exactly, each media
// part gets the uuid of its content identity, so the worker keys its cache as the router hashed
// it; the expansion is remembered for the run-time layout verification (verify.go).

// ForwardedUUID is the uuid kvroute forwards for an identity: 16 lowercase hex digits and 48 zeros
// (DESIGN.md §1 step 6); vLLM uses it verbatim as the item's multimodal hash.
func ForwardedUUID(identity kv.Identity) string { return identity.UUID() }

// forward splices each media part's forwarded uuid into the body to forward (res.Body, Forwarded)
// and records the expansion of tokens and spans for verification.
func (r *Router) forward(res *Result, in *Input, req *chat.Request, tokens []uint32, spans []blocks.Span) {
	uuids := make([]string, len(req.Media))
	for i, s := range spans {
		uuids[i] = ForwardedUUID(s.Identity)
	}
	res.Body = chat.SpliceUUIDs(in.Body, req.Media, uuids)
	res.Forwarded = true
	r.verify.expect(res.Model, tokens, spans)
}
