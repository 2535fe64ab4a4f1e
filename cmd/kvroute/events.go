package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
	"github.com/kvroute/kvroute/routing/blocks"
)

// maxBatchBytes bounds the batch read by `kvroute events` (NATS' largest configurable payload).
const maxBatchBytes = 64 << 20

func init() {
	register("events", "events --model DIR --encoding vllm|sglang|dynamo-json|dynamo-msgpack --block-size N < batch.bin", runEvents)
}

type storedOut struct {
	EngineHash       string  `json:"engine_hash"`
	ParentEngineHash *string `json:"parent_engine_hash"`
	LocalHash        string  `json:"local_hash"`
	Kind             string  `json:"kind"`
}

type eventsOutput struct {
	Stored  []storedOut `json:"stored"`
	Removed []string    `json:"removed"`
	Cleared bool        `json:"cleared"`
}

func runEvents(args []string) (any, error) {
	return eventsCmd(args, os.Stdin, os.Stderr)
}

// eventsCmd implements `kvroute events`: one raw batch as published on kvroute.events.<id>, decoded and
// normalized as the router would (DESIGN.md §10a). Skipped events are reported on stderr.
func eventsCmd(args []string, stdin io.Reader, stderr io.Writer) (any, error) {
	fs := newFlags("events")
	dir := fs.String("model", "", "model directory (config.json gives image_token_id, video_token_id)")
	encName := fs.String("encoding", "", "batch encoding: vllm, sglang, dynamo-json or dynamo-msgpack")
	bs := fs.Int("block-size", 0, "the workers' KV block size in tokens")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if *dir == "" {
		return nil, errors.New("events: --model DIR is required")
	}
	if *bs <= 0 {
		return nil, errors.New("events: --block-size N (the workers' KV block size, > 0) is required")
	}
	enc, err := codec.ParseEncoding(*encName)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	imagePad, videoPad, err := padIDs(filepath.Join(*dir, "config.json"))
	if err != nil {
		return nil, err
	}
	n, err := normalize.New(normalize.Config{
		Blocks:   blocks.Config{BlockSize: *bs, ImagePad: imagePad, VideoPad: videoPad},
		Encoding: enc,
	})
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	raw, err := readLimited(stdin, maxBatchBytes, "batch from stdin")
	if err != nil {
		return nil, err
	}
	bt, err := codec.Decode(enc, raw)
	if err != nil {
		return nil, err
	}
	if len(bt.Events) == 0 && bt.Malformed > 0 {
		// Nothing decoded and some events did not fit: most often the wrong --encoding; an empty
		// answer would hide that. (Events of unknown types alone are skipped: newer engines.)
		return nil, fmt.Errorf("events: no event of the batch decodes as %s (%d of unknown type, %d malformed; first: %v)",
			enc, bt.Unknown, bt.Malformed, bt.FirstErr)
	}
	if bt.Unknown+bt.Malformed > 0 {
		fmt.Fprintf(stderr, "events: skipped %d events of unknown type and %d malformed events (first: %v)\n", bt.Unknown, bt.Malformed, bt.FirstErr)
	}
	res := n.Apply(bt)
	if res.Skipped > 0 {
		fmt.Fprintf(stderr, "events: skipped %d events that cannot be normalized (first: %v)\n", res.Skipped, res.FirstErr)
	}
	if res.Ignored > 0 {
		fmt.Fprintf(stderr, "events: ignored %d token-less stored events of a non-GPU tier\n", res.Ignored)
	}
	out := eventsOutput{Stored: []storedOut{}, Removed: []string{}}
	for _, op := range res.Ops {
		for _, s := range op.Stored {
			so := storedOut{EngineHash: strconv.FormatUint(s.EngineHash, 10), LocalHash: hex16(s.LocalHash), Kind: s.Kind.String()}
			if s.HasParent {
				p := strconv.FormatUint(s.ParentEngineHash, 10)
				so.ParentEngineHash = &p
			}
			out.Stored = append(out.Stored, so)
		}
		for _, h := range op.Removed {
			out.Removed = append(out.Removed, strconv.FormatUint(h, 10))
		}
		out.Cleared = out.Cleared || op.Type == codec.AllBlocksCleared
	}
	return out, nil
}

// padIDs reads image_token_id and video_token_id from a model's config.json.
func padIDs(path string) (image, video uint32, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, fmt.Errorf("reading model config: %w", err)
	}
	var cfg struct {
		Image *uint32 `json:"image_token_id"`
		Video *uint32 `json:"video_token_id"`
		// ImgContext is Nemotron 3 Nano Omni's <image> id, which images and video share.
		ImgContext *uint32 `json:"img_context_token_id"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return 0, 0, fmt.Errorf("decoding model config %s: %w", path, err)
	}
	if cfg.Image == nil && cfg.Video == nil && cfg.ImgContext != nil {
		return *cfg.ImgContext, *cfg.ImgContext, nil
	}
	if cfg.Image == nil || cfg.Video == nil {
		return 0, 0, fmt.Errorf("decoding model config %s: image_token_id and video_token_id are required", path)
	}
	return *cfg.Image, *cfg.Video, nil
}
