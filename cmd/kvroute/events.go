package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
)

// maxBatchBytes bounds the batch read by `kvroute events` (NATS' largest configurable payload).
const maxBatchBytes = 64 << 20

func init() {
	register("events", "events --model DIR --encoding vllm|sglang|dynamo-json|dynamo-msgpack --block-size N < batch.bin\n"+
		"       events --batches --model DIR --encoding ENC [--block-size N] < batches.json (a JSON array of base64 batches of one worker)", runEvents)
}

type storedOut struct {
	EngineHash       string  `json:"engine_hash"`
	ParentEngineHash *string `json:"parent_engine_hash"`
	LocalHash        string  `json:"local_hash"`
	Kind             string  `json:"kind"`
}

// skippedOut is one block hash of an event kept out of the index, with the reason
// (normalize.SkipReason names: kind_not_admitted, group_kind_not_admitted, group_unlearned_nonzero,
// non_dense_block_span, block_size_mismatch).
type skippedOut struct {
	EngineHash string `json:"engine_hash"`
	Reason     string `json:"reason"`
}

type eventsOutput struct {
	Stored  []storedOut  `json:"stored"`
	Removed []string     `json:"removed"`
	Cleared bool         `json:"cleared"`
	Skipped []skippedOut `json:"skipped"`
}

func runEvents(args []string) (any, error) {
	return eventsCmd(args, os.Stdin, os.Stderr)
}

// eventsCmd implements `kvroute events`: one raw batch as published on kvroute.events.<id> (or, with
// --batches, a JSON array of base64 batches of one worker, applied in order so that a KV cache group's
// kind learned in one batch applies in the next), decoded and normalized as the router would
// (DESIGN.md §10a). Events that cannot be decoded or normalized are reported on stderr; events kept out
// by the KV cache group rule, the dense check or the block size check are listed in "skipped", one
// entry per block hash. With --batches, --block-size is optional: without it each event's own
// block_size is used (the group rule and the dense check alone decide).
func eventsCmd(args []string, stdin io.Reader, stderr io.Writer) (any, error) {
	fs := newFlags("events")
	dir := fs.String("model", "", "model directory (config.json gives image_token_id, video_token_id)")
	encName := fs.String("encoding", "", "batch encoding: vllm, sglang, dynamo-json or dynamo-msgpack")
	bs := fs.Int("block-size", 0, "the workers' KV block size in tokens")
	many := fs.Bool("batches", false, "read a JSON array of base64-encoded batches of one worker, applied in order")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if *dir == "" {
		return nil, errors.New("events: --model DIR is required")
	}
	if *bs < 0 || (*bs == 0 && !*many) {
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
	cfg := normalize.Config{
		Blocks:       blocks.Config{BlockSize: *bs, ImagePad: imagePad, VideoPad: videoPad},
		Encoding:     enc,
		AnyBlockSize: *bs == 0,
	}
	if _, err := normalize.New(cfg); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	var batches [][]byte
	if *many {
		if batches, err = readBatches(stdin); err != nil {
			return nil, err
		}
	} else {
		raw, err := readLimited(stdin, maxBatchBytes, "batch from stdin")
		if err != nil {
			return nil, err
		}
		batches = [][]byte{raw}
	}
	ev := eventsRun{cfg: cfg, norms: map[int64]*normalize.Normalizer{}, stderr: stderr,
		out: eventsOutput{Stored: []storedOut{}, Removed: []string{}, Skipped: []skippedOut{}}}
	dec := codec.NewDecoder()
	for i, raw := range batches {
		bt, err := dec.Decode(enc, raw)
		if err != nil {
			return nil, batchErr(*many, i, err)
		}
		if len(bt.Events) == 0 && bt.Malformed > 0 {
			// Nothing decoded and some events did not fit: most often the wrong --encoding; an empty
			// answer would hide that. (Events of unknown types alone are skipped: newer engines.)
			return nil, batchErr(*many, i, fmt.Errorf("events: no event of the batch decodes as %s (%d of unknown type, %d malformed; first: %v)",
				enc, bt.Unknown, bt.Malformed, bt.FirstErr))
		}
		if err := ev.apply(bt); err != nil {
			return nil, err
		}
	}
	return ev.out, nil
}

// batchErr names the batch of an error with --batches.
func batchErr(many bool, i int, err error) error {
	if !many {
		return err
	}
	return fmt.Errorf("events: batch %d: %w", i, err)
}

// readBatches reads --batches input: a JSON array of base64 (standard alphabet) batches.
func readBatches(stdin io.Reader) ([][]byte, error) {
	raw, err := readLimited(stdin, 2*maxBatchBytes, "batches from stdin")
	if err != nil {
		return nil, err
	}
	var batches [][]byte // encoding/json decodes base64 strings into []byte
	if err := json.Unmarshal(raw, &batches); err != nil {
		return nil, fmt.Errorf("events: decoding --batches input (a JSON array of base64 strings): %w", err)
	}
	return batches, nil
}

// eventsRun applies the batches of one worker: one Normalizer per data-parallel rank, as the router
// keeps one per stream (salted chains and learned KV cache group kinds are per rank).
type eventsRun struct {
	cfg    normalize.Config
	norms  map[int64]*normalize.Normalizer
	stderr io.Writer
	out    eventsOutput
}

func (r *eventsRun) apply(bt *codec.Batch) error {
	if bt.Unknown+bt.Malformed > 0 {
		fmt.Fprintf(r.stderr, "events: skipped %d events of unknown type and %d malformed events (first: %v)\n", bt.Unknown, bt.Malformed, bt.FirstErr)
	}
	n := r.norms[bt.DPRank]
	if n == nil {
		var err error
		if n, err = normalize.New(r.cfg); err != nil {
			return fmt.Errorf("events: %w", err)
		}
		r.norms[bt.DPRank] = n
	}
	res := n.Apply(bt)
	if res.Skipped > 0 {
		fmt.Fprintf(r.stderr, "events: skipped %d events that cannot be normalized (first: %v)\n", res.Skipped, res.FirstErr)
	}
	if res.Ignored > 0 {
		fmt.Fprintf(r.stderr, "events: ignored %d token-less stored events of a non-GPU tier\n", res.Ignored)
	}
	out := &r.out
	for _, f := range res.Filtered { // in event order, one entry per block hash
		for _, h := range bt.Events[f.Event].BlockHashes {
			out.Skipped = append(out.Skipped, skippedOut{EngineHash: strconv.FormatUint(uint64(h), 10), Reason: f.Reason.String()})
		}
	}
	for _, op := range res.Ops {
		for _, s := range op.Stored {
			so := storedOut{EngineHash: strconv.FormatUint(uint64(s.EngineHash), 10), LocalHash: hex16(uint64(s.LocalHash)), Kind: s.Kind.String()}
			if s.HasParent {
				p := strconv.FormatUint(uint64(s.ParentEngineHash), 10)
				so.ParentEngineHash = &p
			}
			out.Stored = append(out.Stored, so)
		}
		for _, h := range op.Removed {
			out.Removed = append(out.Removed, strconv.FormatUint(uint64(h), 10))
		}
		out.Cleared = out.Cleared || op.Type == codec.AllBlocksCleared
	}
	return nil
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
