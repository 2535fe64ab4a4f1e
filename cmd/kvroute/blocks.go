package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/blocks"
)

// maxBlocksInput bounds the JSON read by `kvroute blocks` from stdin.
const maxBlocksInput = 64 << 20

func init() {
	register("blocks", "blocks < input.json", runBlocks)
}

// blocksInput is the stdin document of `kvroute blocks` (DESIGN.md §10a); identities are 16 hex digits.
type blocksInput struct {
	BlockSize int      `json:"block_size"`
	Tokens    []uint32 `json:"tokens"`
	Spans     []struct {
		Start    int    `json:"start"`
		End      int    `json:"end"`
		Identity string `json:"identity"`
		Kind     string `json:"kind"`
	} `json:"spans"`
	ImagePad  *uint32 `json:"image_pad"`
	VideoPad  *uint32 `json:"video_pad"`
	LoRAName  *string `json:"lora_name"`
	CacheSalt *string `json:"cache_salt"`
}

type blockOut struct {
	Index     int    `json:"index"`
	Kind      string `json:"kind"`
	LocalHash string `json:"local_hash"`
}

type blocksOutput struct {
	Blocks        []blockOut `json:"blocks"`
	RoutingTokens []uint32   `json:"routing_tokens"`
}

func runBlocks(args []string) (any, error) {
	return blocksCmd(args, os.Stdin)
}

// blocksCmd implements `kvroute blocks`: the request-side block hashes (DESIGN.md §5) of a
// worker-visible token sequence and its media spans; complete blocks only.
func blocksCmd(args []string, stdin io.Reader) (any, error) {
	if len(args) > 0 {
		if isHelpFlag(args[0]) {
			return nil, &helpError{}
		}
		return nil, fmt.Errorf("blocks: unexpected argument %q", args[0])
	}
	body, err := readLimited(stdin, maxBlocksInput, "blocks input")
	if err != nil {
		return nil, err
	}
	var in blocksInput
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decoding blocks input: %w", err)
	}
	if in.ImagePad == nil || in.VideoPad == nil {
		return nil, errors.New("decoding blocks input: image_pad and video_pad are required")
	}
	spans := make([]blocks.Span, len(in.Spans))
	for i, s := range in.Spans {
		id, err := kv.ParseHex(s.Identity)
		if err != nil {
			return nil, fmt.Errorf("decoding span %d: %w", i, err)
		}
		var kind blocks.MediaKind
		switch s.Kind {
		case "image":
			kind = blocks.Image
		case "video":
			kind = blocks.Video
		default:
			return nil, fmt.Errorf("decoding span %d: kind %q is not image or video", i, s.Kind)
		}
		spans[i] = blocks.Span{Start: s.Start, End: s.End, Identity: id, Kind: kind}
	}
	seed := blocks.SeedFor(deref(in.LoRAName), deref(in.CacheSalt))
	cfg := blocks.Config{BlockSize: in.BlockSize, ImagePad: *in.ImagePad, VideoPad: *in.VideoPad}
	p, err := blocks.HashPrompt(cfg, seed, in.Tokens, spans)
	if err != nil {
		return nil, fmt.Errorf("hashing blocks: %w", err)
	}
	out := blocksOutput{Blocks: make([]blockOut, len(p.Blocks)), RoutingTokens: p.RoutingTokens}
	for i, b := range p.Blocks {
		out.Blocks[i] = blockOut{Index: b.Index, Kind: b.Kind.String(), LocalHash: hex16(uint64(b.Hash))}
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// hex16 prints a u64 as 16 lowercase hex digits.
func hex16(v uint64) string { return fmt.Sprintf("%016x", v) }
