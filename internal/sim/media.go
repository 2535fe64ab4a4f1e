package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/kvroute/kvroute/kv"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/layout"
)

// item is one resolved media part.
type item struct {
	// identity is the item's identity as a number: the forwarded uuid's value, the simulator's own
	// content identity, or (for an identifier of another form) an XXH3-64 of the identifier, used
	// only to tell items apart.
	identity kv.Identity
	// identifier is the item's multimodal identifier in extra_keys.
	identifier string
	// media is the item's layout (nil layouts when it was not needed).
	media layout.Media
}

// resolve computes a media part's identifier and, when needLayout is set or the part has no uuid,
// fetches and decodes it with the simulator's own contract. A uuid is used verbatim as the
// identifier unless mm_processor_kwargs are set (vLLM then hashes the uuid with the kwargs).
func (f *Frontend) resolve(ctx context.Context, p chat.MediaPart, kwargs []byte, needLayout bool) (item, error) {
	it := item{media: layout.Media{Kind: p.Kind}}
	if p.Embedded {
		return it, fmt.Errorf("embedded media parts are not supported by the simulator")
	}
	if p.HasUUID {
		it.identifier = p.UUID
		if len(kwargs) > 0 {
			it.identifier = mixIdentifier(p.UUID, kwargs)
		}
		it.identity = identityOf(it.identifier)
		if !needLayout {
			return it, nil
		}
		if p.URL == "" {
			m, ok := f.recall(it.identifier)
			if !ok || m.Kind != p.Kind {
				return it, fmt.Errorf("the part has only a uuid (%q) and the simulator has processed no such %s", p.UUID, p.Kind)
			}
			m.Identity = it.identity
			it.media = m
			return it, nil
		}
	} else if p.URL == "" {
		return it, fmt.Errorf("the part has neither a url nor a uuid")
	}
	own, m, err := f.decode(ctx, p)
	if err != nil {
		return it, err
	}
	if !p.HasUUID {
		it.identifier = kv.Identity(own).UUID()
		if len(kwargs) > 0 {
			it.identifier = mixIdentifier(it.identifier, kwargs)
		}
		it.identity = identityOf(it.identifier)
	}
	m.Identity = it.identity
	it.media = m
	return it, nil
}

// identityOf returns the number an identifier stands for: its value when it has kvroute's forwarded
// form, else XXH3-64 of the string.
func identityOf(identifier string) kv.Identity {
	if id, ok := kv.ParseUUID(identifier); ok {
		return id
	}
	return kv.Identity(xxh3.HashString(identifier))
}

// mixIdentifier is the identifier of an item whose processing kwargs are set: 64 hex digits of
// SHA-256 over the identifier and the kwargs JSON (never kvroute's forwarded form, so no router
// takes it for an identity it forwarded).
func mixIdentifier(identifier string, kwargs []byte) string {
	h := sha256.New()
	h.Write([]byte(identifier))
	h.Write([]byte{0})
	h.Write(kwargs)
	return hex.EncodeToString(h.Sum(nil))
}

// decode fetches and decodes a part with the simulator's contract and returns its own content
// identity (DESIGN.md §3 for video, the pixel hash for images) and its layout.
func (f *Frontend) decode(ctx context.Context, p chat.MediaPart) (kv.Identity, layout.Media, error) {
	if p.Kind == blocks.Image && f.nemotron != nil {
		return 0, layout.Media{}, fmt.Errorf("the simulator does not lay out images for adapter %s", layout.AdapterNemotronOmni)
	}
	if p.Kind == blocks.Image {
		info, err := f.media.Image(ctx, p.URL)
		if err != nil {
			return 0, layout.Media{}, fmt.Errorf("resolving image: %w", err)
		}
		il, err := f.adapter.ImageLayout(info.Width, info.Height)
		if err != nil {
			return 0, layout.Media{}, err
		}
		return info.Identity, layout.Media{Kind: blocks.Image, Image: il}, nil
	}
	info, err := f.media.Video(ctx, p.URL, f.contract)
	if err != nil {
		return 0, layout.Media{}, fmt.Errorf("resolving video: %w", err)
	}
	total := info.DecodedFrames
	if f.contract.FrameCountSource == layout.FrameCountContainer && info.ContainerFrames > 0 {
		total = info.ContainerFrames // what a loader that trusts the container samples from
	}
	in := layout.VideoInput{TotalFrames: total, SourceFPS: info.SourceFPS, Width: info.Width, Height: info.Height}
	if f.nemotron != nil {
		nl, err := f.nemotron.VideoLayout(in)
		if err != nil {
			return 0, layout.Media{}, err
		}
		if total == info.DecodedFrames && !slices.Equal(nl.Indices, info.Indices) {
			return 0, layout.Media{}, reason.New(reason.IdentityError, "the decoded frames differ from the layout's")
		}
		return info.Identity, layout.Media{Kind: blocks.Video, Nemotron: nl}, nil
	}
	vl, err := f.adapter.VideoLayout(in)
	if err != nil {
		return 0, layout.Media{}, err
	}
	if total == info.DecodedFrames && !slices.Equal(vl.Indices, info.Indices) {
		return 0, layout.Media{}, reason.New(reason.IdentityError, "the decoded frames differ from the layout's")
	}
	return info.Identity, layout.Media{Kind: blocks.Video, Video: vl}, nil
}
