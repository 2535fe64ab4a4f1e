package caddymodule

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/kvroute/kvroute/routing/mediaresolver"
)

// media { image_identity pixels|bytes } (DESIGN.md §6 "Images"; routing/mediaresolver/imagecache.go).
// The choice is the router's alone: the identity is forwarded to the worker as the part's uuid,
// which vLLM uses verbatim as the item's multimodal hash, so the worker never computes it and
// nothing about it enters the contract digest or the worker record. Replicas with different
// choices give one picture different identities (their requests then share no image blocks),
// never one identity to different pictures.

// unmarshalImageIdentity reads image_identity's one argument into m.ImageIdentity.
func (m *MediaConfig) unmarshalImageIdentity(d *caddyfile.Dispenser) error {
	return oneArg(d, func(s string) error {
		if _, err := mediaresolver.ParseImageIdentity(s); err != nil {
			return d.Errf("media %v", err)
		}
		m.ImageIdentity = s
		return nil
	})
}

// imageIdentity is the resolver's mode for m: ImagePixels unless image_identity is "bytes".
func (m *MediaConfig) imageIdentity() (mediaresolver.ImageIdentity, error) {
	if m == nil || m.ImageIdentity == "" {
		return mediaresolver.ImagePixels, nil
	}
	return mediaresolver.ParseImageIdentity(m.ImageIdentity)
}
