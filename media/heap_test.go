package media

import (
	"context"
	"encoding/binary"
	"runtime"
	"testing"
)

// liveHeap is the heap in use after two forced collections (the second one frees what the first
// one's finalizers released).
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

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
	serial := 0
	decodeN := func(n int) {
		for range n {
			clip := make([]byte, len(base)+pad)
			copy(clip, base)
			serial++
			binary.LittleEndian.PutUint64(clip[len(clip)-8:], uint64(serial))
			if _, err := d.Decode(context.Background(), clip, IndexSampler([]int{0}), DecodeOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 8
	decodeN(2) // warm-up: FFmpeg and runtime one-time allocations
	h0 := liveHeap()
	decodeN(n)
	h1 := liveHeap()
	decodeN(3 * n)
	h4 := liveHeap()
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
