package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/reason"
)

const clipDir = "../../testdata/video/"

// identityContract is DESIGN.md §2.3's example contract with the sampler and frame_count_source open.
const identityContract = `{"schema": "kvroute.video_contract/v1", "adapter": "qwen3_vl", "engine": "vllm",
 "sampler": %SAMPLER%, "frame_count_source": "%SOURCE%",
 "resize": {"mode": "round_ties_even", "min_pixels": 4096, "max_pixels": 25165824, "patch_size": 16, "merge_size": 2, "temporal_patch_size": 2},
 "image_resize": {"min_pixels": 65536, "max_pixels": 16777216},
 "placeholder_target": "bare_video_token", "timestamp_tokenization": "spliced",
 "token_ids": {"vision_start": 151652, "vision_end": 151653, "image_pad": 151655, "video_pad": 151656},
 "video_pruning_rate": 0.0, "sglang_preprocess": null}`

const (
	hfFPSSampler   = `{"kind": "hf_fps", "fps": 2.0, "min_frames": 4, "max_frames": 768, "num_frames": null}`
	dynamoSampler  = `{"kind": "dynamo_max_frames", "fps": null, "min_frames": null, "max_frames": 32, "num_frames": null}`
	identityKeyOrd = `codec,width,height,source_fps,source_duration,source_total_frames,frames_indices,metadata_json,rgb_bytes,identity`
)

func writeContract(t *testing.T, sampler, source string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "contract.json")
	doc := strings.NewReplacer("%SAMPLER%", sampler, "%SOURCE%", source).Replace(identityContract)
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runIdentityJSON runs the subcommand and returns its JSON text as main prints it.
func runIdentityJSON(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := runIdentity(args)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(b.String()), nil
}

func keyOrder(t *testing.T, doc string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(doc))
	var keys []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 && dec.More() {
				keys = append(keys, v)
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return strings.Join(keys, ",")
}

// TestIdentityIndices: --indices reproduces golden video_identity.json (qB_320x240_4fps_10f.webm,
// hf_fps indices), with the exact key order and Python floats of DESIGN.md §10a.
func TestIdentityIndices(t *testing.T) {
	got, err := runIdentityJSON(t, clipDir+"field/qB_320x240_4fps_10f.webm", "--indices", "0,2,4,7,9")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"codec":"vp9","width":320,"height":240,"source_fps":4.0,"source_duration":2.5,"source_total_frames":10,` +
		`"frames_indices":[0,2,4,7,9],"metadata_json":"{\"source_fps\":4.0,\"source_duration\":2.5,\"sampled_timestamps\":[0.0,0.5,1.0,1.75,2.25],\"source_total_frames\":10,\"frames_indices\":[0,2,4,7,9]}",` +
		`"rgb_bytes":1152000,"identity":"631cced86d70ca4f"}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if k := keyOrder(t, got); k != identityKeyOrd {
		t.Fatalf("key order %s", k)
	}
	// Flags first, file last.
	got2, err := runIdentityJSON(t, "--indices", "0,2,4,7,9", clipDir+"field/qB_remux.mkv")
	if err != nil || got2 != want {
		t.Fatalf("remux with the file last: %v\n%s", err, got2)
	}
}

// TestIdentityContract: --contract samples as the worker does; golden identities for both samplers.
func TestIdentityContract(t *testing.T) {
	cases := []struct {
		sampler, clip, want string
	}{
		{hfFPSSampler, "vp9_640x360_30fps_10s.webm", "e3e7a3756ad9d625"},
		{dynamoSampler, "vp9_640x360_30fps_10s.mp4", "0a555750849fa9f6"},
		{hfFPSSampler, "field/vfr.webm", "815dc40b756de066"},
		{dynamoSampler, "truncated_vp9.webm", "473a5619fe4fc8a4"},
	}
	for _, c := range cases {
		out, err := runIdentity([]string{clipDir + c.clip, "--contract", writeContract(t, c.sampler, "decoded")})
		if err != nil {
			t.Fatalf("%s: %v", c.clip, err)
		}
		if got := out.(*identityOutput).Identity; got != c.want {
			t.Errorf("%s: identity %s, want %s", c.clip, got, c.want)
		}
	}
	// frame_count_source container: MP4's nb_frames (300) is right; VFR's 1.266 s × 30 is not.
	if _, err := runIdentity([]string{clipDir + "vp9_640x360_30fps_10s.mp4", "--contract", writeContract(t, hfFPSSampler, "container")}); err != nil {
		t.Fatalf("container count on mp4: %v", err)
	}
	_, err := runIdentity([]string{clipDir + "field/vfr.webm", "--contract", writeContract(t, hfFPSSampler, "container")})
	if reason.CodeOf(err) != reason.FrameCountMismatch {
		t.Fatalf("container count on vfr: err %v, want frame_count_mismatch", err)
	}
}

func TestIdentityErrors(t *testing.T) {
	clip := clipDir + "field/qB_320x240_4fps_10f.webm"
	for _, args := range [][]string{
		{},
		{clip},
		{clip, "--indices", "0", "--contract", "x.json"},
		{clip, "--indices", "a,1"},
		{clip, "--indices", "-1"},
		{"--indices", "0"},
		{"http://127.0.0.1:1/a.webm", "--indices", "0"}, // loopback refused without --allow-loopback
		{clipDir + "missing.webm", "--indices", "0"},
		{clip, "--indices", "0", "extra"},
	} {
		if _, err := runIdentity(args); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	if _, err := runIdentity([]string{clipDir + "h264_640x360_30fps_3s.mp4", "--indices", "0"}); reason.CodeOf(err) != reason.UnsupportedCodec {
		t.Errorf("h264: err %v", err)
	}
	if _, err := runIdentity([]string{clip, "--indices", "10"}); reason.CodeOf(err) != reason.LayoutError {
		t.Errorf("index past the end: err %v", err)
	}
}

// TestIdentityURL: the same clip as a data: URL and from a loopback HTTP server gives the file's identity.
func TestIdentityURL(t *testing.T) {
	clip, err := os.ReadFile(clipDir + "field/qB_320x240_4fps_10f.webm")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "video/webm")
		_, _ = w.Write(clip)
	}))
	defer srv.Close()
	for _, args := range [][]string{
		{"data:video/webm;base64," + base64.StdEncoding.EncodeToString(clip), "--indices", "0,2,4,7,9"},
		{srv.URL + "/a.webm?X-Amz-Signature=abc", "--indices", "0,2,4,7,9", "--allow-loopback"},
	} {
		out, err := runIdentity(args)
		if err != nil {
			t.Fatalf("%.40s: %v", args[0], err)
		}
		if got := out.(*identityOutput).Identity; got != "631cced86d70ca4f" {
			t.Errorf("%.40s: identity %s", args[0], got)
		}
	}
	_, err = runIdentity([]string{srv.URL + "/a.webm", "--indices", "0"})
	if reason.CodeOf(err) != reason.MediaURLBlocked {
		t.Errorf("loopback without the flag: err %v, want media_url_blocked", err)
	}
}

// TestIdentityCodecs: --codecs is the allow-list (default vp8,vp9): the VP9 clip's identity with
// vp9 listed, unsupported_codec without it; an unknown name is refused.
func TestIdentityCodecs(t *testing.T) {
	clip := clipDir + "field/qB_320x240_4fps_10f.webm"
	for _, list := range []string{"vp9", "vp8,vp9", "vp9,h264,hevc,av1"} {
		out, err := runIdentity([]string{clip, "--indices", "0,2,4,7,9", "--codecs", list})
		if err != nil || out.(*identityOutput).Identity != "631cced86d70ca4f" {
			t.Errorf("--codecs %s: %v %+v", list, err, out)
		}
	}
	if _, err := runIdentity([]string{clip, "--indices", "0", "--codecs", "vp8"}); reason.CodeOf(err) != reason.UnsupportedCodec ||
		!strings.Contains(err.Error(), "codec vp9 is not in the codec allow-list (vp8)") {
		t.Errorf("vp9 clip with --codecs vp8: err %v", err)
	}
	for _, list := range []string{"", "vp9,mpeg4", "VP9", "vp9,"} {
		if _, err := runIdentity([]string{clip, "--indices", "0", "--codecs", list}); err == nil || reason.CodeOf(err) != "" {
			t.Errorf("--codecs %q: err %v, want a usage error", list, err)
		}
	}
}
