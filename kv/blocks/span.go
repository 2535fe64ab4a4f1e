// Package blocks computes kvroute's block hashes: Dynamo-compatible LocalBlockHash with media
// placeholder normalization (DESIGN.md §5).
package blocks

import "github.com/kvroute/kvroute/kv"

// MediaKind says which placeholder a media span is made of.
type MediaKind uint8

const (
	// Image spans are runs of image pad tokens.
	Image MediaKind = iota + 1
	// Video spans run from the first token of the first group's timestamp text to the last group's
	// vision_end.
	Video
)

func (k MediaKind) String() string {
	switch k {
	case Image:
		return "image"
	case Video:
		return "video"
	}
	return "unknown"
}

// Span is one media item's placeholder range in a worker-visible token sequence: token positions
// [Start, End), and the item's identity (mm_hash, the XXH3-64 of DESIGN.md §3).
type Span struct {
	Start, End int
	Identity   kv.Identity
	Kind       MediaKind
}
