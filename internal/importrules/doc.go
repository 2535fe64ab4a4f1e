// Package importrules holds the test that keeps kvroute's layering true (issue 17): the Caddy-free
// event and media layers do not import the router, the production codec does not import the block
// hasher, and the wire vocabulary imports nothing of kvroute. It has no code of its own.
package importrules
