package media

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kvroute/kvroute/kv"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/reason"
)

// Metadata is the JSON object J hashed into a video identity (DESIGN.md §3), in its key order.
// It matches Dynamo's VideoMetadata (lib/llm/src/preprocessor/media/decoders/video.rs, newest
// version with source_total_frames and frames_indices).
type Metadata struct {
	SourceFPS         float64
	SourceDuration    float64
	SourceTotalFrames int
	FramesIndices     []int
}

// SampledTimestamps returns frames_indices[i] / source_fps in seconds (float64).
func (m Metadata) SampledTimestamps() []float64 {
	ts := make([]float64, len(m.FramesIndices))
	for i, idx := range m.FramesIndices {
		ts[i] = float64(idx) / m.SourceFPS
	}
	return ts
}

// JSON returns J: compact JSON {"source_fps","source_duration","sampled_timestamps",
// "source_total_frames","frames_indices"} with floats written as Python repr (and serde_json) does.
// A non-finite float is an error (reason.IdentityError): it has no JSON form.
func (m Metadata) JSON() ([]byte, error) {
	var b strings.Builder
	w := func(s string) { b.WriteString(s) }
	f := func(name string, v float64) error {
		s, err := PyFloat(v)
		if err != nil {
			return reason.Wrap(reason.IdentityError, err, "formatting %s", name)
		}
		w(s)
		return nil
	}
	w(`{"source_fps":`)
	if err := f("source_fps", m.SourceFPS); err != nil {
		return nil, err
	}
	w(`,"source_duration":`)
	if err := f("source_duration", m.SourceDuration); err != nil {
		return nil, err
	}
	w(`,"sampled_timestamps":[`)
	for i, ts := range m.SampledTimestamps() {
		if i > 0 {
			w(",")
		}
		if err := f("sampled_timestamps", ts); err != nil {
			return nil, err
		}
	}
	w(`],"source_total_frames":`)
	w(strconv.Itoa(m.SourceTotalFrames))
	w(`,"frames_indices":[`)
	for i, idx := range m.FramesIndices {
		if i > 0 {
			w(",")
		}
		w(strconv.Itoa(idx))
	}
	w("]}")
	return []byte(b.String()), nil
}

// PyFloat formats v as Python's repr(float) does: the shortest string that round-trips, integral
// values keep ".0", and scientific notation ("1e-05", "1.5e+16") when the decimal exponent is
// below -4 or at least 16. NaN and infinities are errors.
func PyFloat(v float64) (string, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "", fmt.Errorf("formatting float %v: not finite", v)
	}
	if v == 0 {
		if math.Signbit(v) {
			return "-0.0", nil
		}
		return "0.0", nil
	}
	e := strconv.FormatFloat(v, 'e', -1, 64)
	exp, err := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if err != nil {
		return "", fmt.Errorf("formatting float %v: %w", v, err)
	}
	if exp < -4 || exp >= 16 {
		return e, nil
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s, nil
}

// Identity is XXH3-64 (seed 0), streaming, over u64le(5) "video" u64le(4) u64le(T) u64le(H)
// u64le(W) u64le(3) u8(0) u64le(len(J)) J u64le(len(P)) P, where P is the frames (each w*h*3
// packed rgb24 bytes) concatenated frame-major (DESIGN.md §3; Dynamo's hash_video_content in
// lib/llm/src/preprocessor/media/rdma.rs). A shape that does not match the frames, an empty P or
// a zero hash is an error with reason.IdentityError: the identity never silently becomes 0.
func Identity(j []byte, t, h, w int, frames [][]byte) (kv.Identity, error) {
	if t <= 0 || h <= 0 || w <= 0 || len(frames) != t {
		return 0, reason.New(reason.IdentityError, "hashing video: shape %dx%dx%d with %d frames", t, h, w, len(frames))
	}
	frameLen := h * w * 3
	for i, f := range frames {
		if len(f) != frameLen {
			return 0, reason.New(reason.IdentityError, "hashing video: frame %d has %d bytes, want %d", i, len(f), frameLen)
		}
	}
	hs := xxh3.New()
	var u [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(u[:], v)
		_, _ = hs.Write(u[:])
	}
	put(5)
	_, _ = hs.WriteString("video")
	put(4)
	put(uint64(t))
	put(uint64(h))
	put(uint64(w))
	put(3)
	_, _ = hs.Write([]byte{0})
	put(uint64(len(j)))
	_, _ = hs.Write(j)
	put(uint64(t) * uint64(frameLen))
	for _, f := range frames {
		_, _ = hs.Write(f)
	}
	id := kv.Identity(hs.Sum64())
	if id == 0 {
		return 0, reason.New(reason.IdentityError, "hashing video: identity is zero")
	}
	return id, nil
}

// FormatIdentity is the wire form of an identity: 16 lowercase hex characters (kv.Identity.Hex).
func FormatIdentity(id kv.Identity) string { return id.Hex() }

// ParseIdentity parses the wire form (16 hex characters; kv.ParseHex).
func ParseIdentity(s string) (kv.Identity, error) { return kv.ParseHex(s) }
