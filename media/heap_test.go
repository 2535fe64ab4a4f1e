package media

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/memtest"
)

// TestDecodeHeapIndependentOfN decodes N and then 4N distinct clips (a fixture followed by 1 MiB of
// trailing bytes that differ per clip, as an attacker varies a clip to miss the decode cache) and
// checks that the heap in use after runtime.GC() does not grow with the number of decodes: every
// clip's bytes must be collectable once Decode returns (issue 12 defect 1: go-astiav v0.16.0 kept
// each custom IOContext's read callback, and through it the clip, in a global handler map).
func TestDecodeHeapIndependentOfN(t *testing.T) {
	base := readFile(t, "../testdata/video/field/qB_320x240_4fps_10f.webm")
	d, err := NewDecoder(&DecoderConfig{CacheEntries: -1})
	if err != nil {
		t.Fatal(err)
	}
	const pad = 1 << 20
	serial := uint64(0)
	decodeN := func(n int) {
		for range n {
			serial++
			clip := memtest.DistinctClip(base, pad, serial)
			if _, err := d.Decode(context.Background(), clip, IndexSampler([]int{0}), DecodeOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 8
	decodeN(2) // warm-up: FFmpeg and runtime one-time allocations
	h0 := memtest.LiveHeap()
	decodeN(n)
	h1 := memtest.LiveHeap()
	decodeN(3 * n)
	h4 := memtest.LiveHeap()
	t.Logf("live heap: start %d KiB, after %d decodes %d KiB, after %d decodes %d KiB", h0>>10, n, h1>>10, 4*n, h4>>10)
	// One clip is 1 MiB: growing by more than one clip between N and 4N decodes means clips are kept.
	if grow := h4 - h1; grow > pad {
		t.Fatalf("live heap grew %d KiB from %d to %d decodes (%d KiB per decode): clip bytes are retained",
			grow>>10, n, 4*n, grow/int64(3*n)>>10)
	}
	if grow := h1 - h0; grow > pad {
		t.Fatalf("live heap grew %d KiB over the first %d decodes: clip bytes are retained", grow>>10, n)
	}
}

// TestFailedOpenHeapIndependentOfN: clips FFmpeg cannot open (a failed avformat_open_input frees
// the format context, and go-astiav keeps a stale classer entry for its address) must not keep
// their bytes either: N and 4N undecodable 256 KiB inputs leave the same live heap.
func TestFailedOpenHeapIndependentOfN(t *testing.T) {
	d, err := NewDecoder(&DecoderConfig{CacheEntries: -1})
	if err != nil {
		t.Fatal(err)
	}
	const size = 256 << 10
	serial := uint64(0)
	decodeN := func(n int) {
		for range n {
			junk := make([]byte, size)
			serial++
			for i := 0; i+8 <= size; i += 8 {
				binary.LittleEndian.PutUint64(junk[i:], serial*0x9e3779b97f4a7c15+uint64(i))
			}
			if _, err := d.Decode(context.Background(), junk, IndexSampler([]int{0}), DecodeOptions{}); err == nil {
				t.Fatal("junk decoded")
			}
		}
	}
	const n = 16
	decodeN(2)
	h1 := func() int64 { decodeN(n); return memtest.LiveHeap() }()
	decodeN(3 * n)
	h4 := memtest.LiveHeap()
	t.Logf("live heap after %d failed opens %d KiB, after %d %d KiB", n+2, h1>>10, 4*n+2, h4>>10)
	if grow := h4 - h1; grow > size {
		t.Fatalf("live heap grew %d KiB over %d failed opens: inputs are retained", grow>>10, 3*n)
	}
}
