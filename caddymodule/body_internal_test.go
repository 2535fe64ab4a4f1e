package caddymodule

import (
	"bytes"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
)

// onlyReader hides bytes.Reader's WriterTo, as a network body does.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// TestReadChunksExact: the bytes come back unchanged around every chunk boundary, with and without
// a (right or wrong) Content-Length hint, and the slice kept has no spare capacity to speak of.
func TestReadChunksExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, firstBodyChunk - 1, firstBodyChunk, firstBodyChunk + 1, 3*firstBodyChunk + 7,
		maxBodyChunk - 1, maxBodyChunk, maxBodyChunk + 1, 2*maxBodyChunk + 12345} {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		for _, hint := range []int64{-1, int64(n), int64(n) / 2, int64(n) * 2} {
			got, pb, err := readChunks(onlyReader{bytes.NewReader(want)}, hint)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("n=%d hint=%d: %d bytes, err %v", n, hint, len(got), err)
			}
			if pb == nil && cap(got)-len(got) > 4<<10 {
				t.Fatalf("n=%d hint=%d: kept %d bytes of spare capacity", n, hint, cap(got)-len(got))
			}
			if pb != nil && (cap(got) != len(got) || len(pb.b) > 2*(int(hint)+1) && len(pb.b) > 64<<10) {
				t.Fatalf("n=%d hint=%d: pooled buffer of %d bytes for the body (cap %d)", n, hint, len(pb.b), cap(got))
			}
			pb.put()
		}
	}
}

// TestReadChunksAllocation: reading a 48 MiB body of unknown length allocates about the body
// twice (its chunks, then the one copy), not the 136 MiB of a doubling bytes.Buffer, and keeps
// the body alone.
func TestReadChunksAllocation(t *testing.T) {
	const size = 48 << 20
	body := bytes.Repeat([]byte("x"), size)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, _, err := readChunks(onlyReader{bytes.NewReader(body)}, -1)
	runtime.ReadMemStats(&after)
	if err != nil || len(got) != size {
		t.Fatalf("%d bytes, err %v", len(got), err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2*size+8<<20 {
		t.Fatalf("reading %d bytes allocated %d (%.2f×), want at most 2× + 8 MiB", size, alloc, float64(alloc)/size)
	}
	if cap(got) != size {
		t.Fatalf("kept capacity %d for a %d-byte body", cap(got), size)
	}
}
