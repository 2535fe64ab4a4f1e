// Package fetch loads the media bytes behind a client-supplied URL (DESIGN.md §6) without letting the
// client reach anything the router can reach.
//
// Accepted URLs:
//   - http and https, through a client that ignores proxy environment variables and checks the
//     resolved IP of every connection, on every redirect hop, at dial time;
//   - data: (base64 or percent-encoded), decoded in memory;
//   - file:, only when Config.FileRoot is set, and only for regular files that are still under the
//     root after symbolic links are resolved.
//
// Everything else is refused. Every error is a *reason.Error whose Message can be shown to the client
// (it names at most the URL's host); the wrapped Err, if any, carries details for the operator's log:
//
//	reason.MediaURLBlocked    scheme, host or address not allowed; malformed URL          (400)
//	reason.MediaFetchFailed   DNS or connect failure, non-2xx answer, bad data: URL,
//	                          missing or non-regular file                                 (400)
//	reason.MediaTooLarge      more than Config.MaxBytes (declared or read)                (413)
//	reason.MediaFetchTimeout  not complete within Config.Timeout                          (400)
//	reason.MediaBusy          no room in Config.Budget within its wait          (fallback, forwarded)
//
// Memory: a body is read into chunks that grow with the bytes received (32 KiB doubling to 4 MiB,
// never past MaxBytes+1) and copied once into an exact slice at EOF; a declared length of at most
// 8 MiB sizes the first chunk. With Config.Budget, every chunk and the decoded data: bytes are
// reserved before they are allocated; FetchHeld keeps the result reserved until the caller has
// decoded it, so the bytes all requests hold at once stay under the budget.
//
// The address policy (which IPs are refused by default) follows the IANA IPv4 and IPv6 special-purpose
// address registries (RFC 6890 and updates): only global unicast is allowed. Loopback, private
// (RFC 1918, fc00::/7, and the CGNAT shared space 100.64.0.0/10, which clusters and VPNs use for internal
// services), link-local (169.254/16 with the cloud metadata address, fe80::/10), documentation,
// benchmarking and reserved ranges are refused, as are their IPv4-mapped, NAT64 (64:ff9b::/96) and 6to4
// (2002::/16) spellings. Unspecified (0.0.0.0/8, ::) and multicast addresses are never dialed. A host
// whose last label is numeric ("2130706433", "0x7f000001", "127.1") must be a canonical dotted-quad
// literal and is otherwise refused before any DNS lookup. Config.AllowLoopback, AllowPrivate, AllowCIDRs
// and AllowAddrs open parts of the policy; AllowAddrs ("127.0.0.1:8081") is the narrow way to let a demo
// or test media server on loopback through without opening the rest of loopback.
package fetch
