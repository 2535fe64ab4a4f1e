package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/asticode/go-astiav"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/mediaport"
)

// maxIdentityFile bounds the clip read by `kvroute identity` (DESIGN.md §6 fetched-size cap).
const maxIdentityFile = 256 << 20

func init() {
	register("identity", "identity FILE_OR_URL (--indices 0,5,9 | --contract FILE) [--allow-loopback] [--codecs vp8,vp9]", runIdentity)
}

// identityOutput is the output of `kvroute identity`, keys in DESIGN.md §10a order.
type identityOutput struct {
	Codec             string          `json:"codec"`
	Width             int             `json:"width"`
	Height            int             `json:"height"`
	SourceFPS         json.RawMessage `json:"source_fps"`      // Python repr, as in metadata_json
	SourceDuration    json.RawMessage `json:"source_duration"` // Python repr, as in metadata_json
	SourceTotalFrames int             `json:"source_total_frames"`
	FramesIndices     []int           `json:"frames_indices"`
	MetadataJSON      string          `json:"metadata_json"`
	RGBBytes          int64           `json:"rgb_bytes"`
	Identity          string          `json:"identity"`
}

// runIdentity implements `kvroute identity` (DESIGN.md §10a): read a local clip of a --codecs codec or fetch a
// URL (http, https, data:) under the router's fetch policy, decode it with the router's decoder and
// limits, select frames by an explicit index list or by a contract's sampler (with its
// frame_count_source rule), and print the identity and what it was computed from.
func runIdentity(args []string) (any, error) {
	fs := newFlags("identity")
	indices := fs.String("indices", "", "comma-separated frame indices, e.g. 0,5,9")
	contractPath := fs.String("contract", "", "video contract JSON file (DESIGN.md §2.3)")
	allowLoopback := fs.Bool("allow-loopback", false, "let a URL reach loopback addresses (a local media server)")
	codecList := fs.String("codecs", mediaport.DefaultCodecs.String(), "comma-separated video codec allow-list (vp8, vp9, av1, h264, hevc): another codec is unsupported_codec")
	// The file may come before or after the flags.
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := parseOnly(fs, args); err != nil {
		return nil, err
	}
	if file == "" && fs.NArg() > 0 {
		file = fs.Arg(0)
		if err := parseOnly(fs, fs.Args()[1:]); err != nil {
			return nil, err
		}
	}
	if err := noArgs(fs); err != nil {
		return nil, err
	}
	if file == "" {
		return nil, errors.New("identity: a FILE or URL is required")
	}
	if (*indices == "") == (*contractPath == "") {
		return nil, errors.New("identity: exactly one of --indices and --contract is required")
	}
	codecs, err := mediaport.ParseCodecs(strings.Split(*codecList, ","))
	if err != nil {
		return nil, fmt.Errorf("identity: --codecs: %w", err)
	}
	var sampler media.Sampler
	if *indices != "" {
		idx, err := parseIndices(*indices)
		if err != nil {
			return nil, err
		}
		sampler = media.IndexSampler(idx)
	} else {
		c, err := readContract(*contractPath)
		if err != nil {
			return nil, err
		}
		sampler = ContractSampler(c)
	}
	data, err := readClip(file, *allowLoopback)
	if err != nil {
		return nil, err
	}
	astiav.SetLogLevel(astiav.LogLevelError)
	d, err := media.NewDecoder(&media.DecoderConfig{CacheEntries: -1, Codecs: codecs})
	if err != nil {
		return nil, err
	}
	r, err := d.Decode(context.Background(), data, sampler, media.DecodeOptions{})
	if err != nil {
		return nil, err
	}
	if !codecs.Allows(r.Stats.Codec) {
		return nil, reason.New(reason.UnsupportedCodec, "decoding video: codec %s is not in --codecs (%s)", r.Stats.Codec, codecs)
	}
	fps, err := media.PyFloat(r.Stats.FPS)
	if err != nil {
		return nil, err
	}
	dur, err := media.PyFloat(r.Stats.Duration)
	if err != nil {
		return nil, err
	}
	return &identityOutput{
		Codec:             r.Stats.Codec,
		Width:             r.Stats.Width,
		Height:            r.Stats.Height,
		SourceFPS:         json.RawMessage(fps),
		SourceDuration:    json.RawMessage(dur),
		SourceTotalFrames: r.Stats.DecodedFrames,
		FramesIndices:     r.Indices,
		MetadataJSON:      string(r.Metadata),
		RGBBytes:          r.RGBBytes,
		Identity:          r.IdentityHex(),
	}, nil
}

// readClip reads a local file, or fetches an http(s) or data: URL under the router's fetch policy
// (media/fetch defaults: public addresses only, 256 MiB, 30 s; --allow-loopback opens loopback).
func readClip(fileOrURL string, allowLoopback bool) ([]byte, error) {
	if !isURL(fileOrURL) {
		return readFileLimited(fileOrURL, maxIdentityFile, "clip")
	}
	cfg := fetch.DefaultConfig()
	cfg.AllowLoopback = allowLoopback
	f, err := fetch.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating fetcher: %w", err)
	}
	defer f.Close()
	return f.Fetch(context.Background(), fileOrURL)
}

func isURL(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "data:")
}

// parseIndices parses "0,5,9" into frame indices (non-negative integers, at least one).
func parseIndices(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("parsing --indices: %q is not a frame index", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// readContract reads (at most maxContractFile bytes), parses and validates the contract file at path.
func readContract(path string) (*layout.Contract, error) {
	doc, err := readFileLimited(path, maxContractFile, "contract")
	if err != nil {
		return nil, err
	}
	c, err := layout.ParseContract(doc)
	if err != nil {
		return nil, fmt.Errorf("reading contract: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("validating contract: %w", err)
	}
	return c, nil
}

// ContractSampler selects frames as a worker with contract c does: the contract's sampler over the
// clip's frame count, per frame_count_source (a container count that differs from the decoded
// count is frame_count_mismatch).
func ContractSampler(c *layout.Contract) media.Sampler {
	return func(total int, s media.Stats) ([]int, error) {
		if s.DecodedFrames > 0 {
			n, err := c.FrameCount(s.DecodedFrames, s.ContainerFrames())
			if err != nil {
				return nil, err
			}
			total = n
		}
		in := layout.VideoInput{TotalFrames: total, SourceFPS: s.FPS, Width: s.Width, Height: s.Height}
		if c.Adapter == layout.AdapterNemotronOmni {
			l, err := layout.LayoutNemotronVideoFor(c, in)
			if err != nil {
				return nil, err
			}
			return l.Indices, nil
		}
		l, err := layout.LayoutVideo(c, in)
		if err != nil {
			return nil, err
		}
		return l.Indices, nil
	}
}
