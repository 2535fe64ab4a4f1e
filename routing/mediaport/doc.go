// Package mediaport is the port between the router and a media implementation (routing/mediaresolver):
// the Media interface the router calls, what it returns (VideoInfo, ImageInfo), the frame Sampler
// of a layout contract that an implementation calls once it knows a clip's frame count, and the
// per-request stage observer both sides report their stages to.
//
// It sits next to routing/layout and imports only it, so routing/mediaresolver implements the port without
// importing routing/router (issue 17: no back-edges into the router). routing/router re-exports
// these names as aliases.
package mediaport
