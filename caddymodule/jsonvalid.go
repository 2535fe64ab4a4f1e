package caddymodule

import "encoding/json"

// jsonValid reports whether b is one parseable JSON value. encoding/json's scanner is iterative
// and caps nesting at 10000, so a body of millions of '[' is rejected without deep recursion.
// A value that parses but is not a chat request is not rejected here: it is forwarded and routed
// on load alone (DESIGN.md §1 step 1).
func jsonValid(b []byte) bool { return json.Valid(b) }
