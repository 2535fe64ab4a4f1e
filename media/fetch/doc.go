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
//
// The address policy (which IPs are refused by default) follows the IANA IPv4 and IPv6 special-purpose
// address registries (RFC 6890 and updates); see Config for the switches that open parts of it.
package fetch
