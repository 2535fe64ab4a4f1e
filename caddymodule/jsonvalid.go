package caddymodule

import "encoding/json"

// jsonValid reports whether b is one parseable JSON value. encoding/json's scanner is iterative
// and caps nesting at 10000, so a body of millions of '[' is rejected without deep recursion.
// A value that parses but is not a chat request is not rejected here: it is forwarded and routed
// on load alone (DESIGN.md §1 step 1).
func jsonValid(b []byte) bool { return json.Valid(b) }

// bodyParser is implemented by a Decider that parses every body it is given with a strict JSON
// decoder and answers 400 body_invalid for one that does not parse (the routing core does, in
// chat.ParseRequest). For such a Decider the handler skips jsonValid, so the body is read once.
type bodyParser interface{ ParsesBody() bool }

// parsesBody reports whether d validates the body itself.
func parsesBody(d Decider) bool {
	p, ok := d.(bodyParser)
	return ok && p.ParsesBody()
}

// ParsesBody reports that the routing core rejects a body that is not one JSON object
// (router.Route → chat.ParseRequest → 400 body_invalid), before any other work.
func (d *routerDecider) ParsesBody() bool { return true }
