package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/reason"
)

// codecsGolden is the part of testdata/golden/video_identity_codecs.json this test reads.
type codecsGolden struct {
	Videos []struct {
		File   string `json:"file"`
		Stream struct {
			Codec         string `json:"codec"`
			DecodedFrames int    `json:"decoded_frames"`
		} `json:"stream"`
		Vectors []struct {
			Sampler       string `json:"sampler"`
			FramesIndices []int  `json:"frames_indices"`
			J             string `json:"J"`
			PLen          int64  `json:"P_len"`
			Identity      string `json:"identity"`
		} `json:"vectors"`
	} `json:"videos"`
}

// TestIdentityCodecsGolden runs `kvroute identity --codecs av1,h264,hevc,vp9` on every vector of
// video_identity_codecs.json, once with the contract's sampler (dynamo_max_frames 32 / hf_fps 2,
// decoded count) and once with the golden --indices: the identity, frame count, sampled indices,
// J and rgb_bytes are the golden ones. Without the clip's codec in --codecs it is unsupported_codec.
func TestIdentityCodecsGolden(t *testing.T) {
	b, err := os.ReadFile("../../testdata/golden/video_identity_codecs.json")
	if err != nil {
		t.Fatal(err)
	}
	var g codecsGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	contracts := map[string]string{
		"hf_fps":            writeContract(t, hfFPSSampler, "decoded"),
		"dynamo_max_frames": writeContract(t, dynamoSampler, "decoded"),
	}
	matched, total := 0, 0
	for _, v := range g.Videos {
		clip := "../../testdata/video-codecs/" + strings.TrimPrefix(v.File, "fixtures/video-codecs/")
		for _, vec := range v.Vectors {
			total++
			ok := true
			idx := make([]string, len(vec.FramesIndices))
			for i, k := range vec.FramesIndices {
				idx[i] = strconv.Itoa(k)
			}
			for _, args := range [][]string{
				{clip, "--contract", contracts[vec.Sampler], "--codecs", "av1,h264,hevc,vp9"},
				{clip, "--indices", strings.Join(idx, ","), "--codecs", "av1,h264,hevc,vp9"},
			} {
				out, err := runIdentity(args)
				if err != nil {
					t.Errorf("%s %s %s: %v", v.File, vec.Sampler, args[1], err)
					ok = false
					continue
				}
				o := out.(*identityOutput)
				if o.Identity != vec.Identity || o.SourceTotalFrames != v.Stream.DecodedFrames || o.MetadataJSON != vec.J ||
					o.RGBBytes != vec.PLen || o.Codec != v.Stream.Codec || !equalIdx(o.FramesIndices, vec.FramesIndices) {
					t.Errorf("%s %s %s: got %s %s frames %d indices %v rgb %d\nwant %s %s frames %d indices %v rgb %d",
						v.File, vec.Sampler, args[1], o.Codec, o.Identity, o.SourceTotalFrames, o.FramesIndices, o.RGBBytes,
						v.Stream.Codec, vec.Identity, v.Stream.DecodedFrames, vec.FramesIndices, vec.PLen)
					ok = false
				}
			}
			if ok {
				matched++
			}
		}
		if v.Stream.Codec != "vp9" {
			_, err := runIdentity([]string{clip, "--indices", "0"}) // default vp8,vp9
			if reason.CodeOf(err) != reason.UnsupportedCodec {
				t.Errorf("%s without --codecs: err %v, want unsupported_codec", v.File, err)
			}
		}
	}
	t.Logf("kvroute identity: codec vectors matched %d/%d", matched, total)
	if matched != 24 || total != 24 {
		t.Errorf("matched %d/%d, want 24/24", matched, total)
	}
}

func equalIdx(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
