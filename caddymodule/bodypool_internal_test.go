package caddymodule

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
)

// TestPooledBodyNotReadAfterDone is the hazard of recycling body buffers: a proxy attempt still
// writing the request body (the upstream answered before reading it all) must not read the
// next request's bytes out of the same buffer. done closes every reader first; the attempt's
// next Read fails, and what it read before is the first request's bytes only.
func TestPooledBodyNotReadAfterDone(t *testing.T) {
	const n = 200 << 10
	first := bytes.Repeat([]byte("A"), n)
	data, pb, err := readChunks(onlyReader{bytes.NewReader(first)}, n)
	if err != nil || pb == nil || !bytes.Equal(data, first) {
		t.Fatalf("pooled read: %d bytes, buffer %v, err %v", len(data), pb != nil, err)
	}
	rb := newReplayBody(data, pb)
	slow := rb.reader() // an attempt that reads the body slowly
	got := make([]byte, 4<<10)
	if k, err := slow.Read(got); k != len(got) || err != nil || !bytes.Equal(got, first[:k]) {
		t.Fatalf("first read: %d bytes, err %v", k, err)
	}
	rb.done()

	// The next request takes buffers of the same class until it gets the recycled one (the
	// pool is per P; the test runs on one goroutine, so the first Get returns it) and fills it.
	second := bytes.Repeat([]byte("B"), n)
	data2, pb2, err := readChunks(onlyReader{bytes.NewReader(second)}, n)
	if err != nil || !bytes.Equal(data2, second) {
		t.Fatalf("second read: err %v", err)
	}
	if pb2 != pb {
		t.Logf("the pool gave another buffer (a GC ran in between); the reader must fail all the same")
	}
	if k, err := slow.Read(got); k != 0 || !errors.Is(err, errBodyDone) {
		t.Fatalf("read after done: %d bytes %q, err %v; want errBodyDone", k, got[:k], err)
	}
	if r := rb.reader(); r != nil {
		if k, err := r.Read(got); k != 0 || err == nil {
			t.Fatalf("a reader made after done read %d bytes, err %v", k, err)
		}
	}
	newReplayBody(data2, pb2).done()
}

// TestPooledBodyClasses: a body gets a buffer of its size class (64 KiB up to 8 MiB), bodies
// outside the classes none, and a given-back buffer is taken again.
func TestPooledBodyClasses(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		size int
	}{{1, 64 << 10}, {64 << 10, 64 << 10}, {64<<10 + 1, 128 << 10}, {700 << 10, 1 << 20}, {8 << 20, 8 << 20}, {8<<20 + 1, 0}, {0, 0}} {
		pb := getBodyBuf(tc.n)
		switch {
		case tc.size == 0 && pb != nil:
			t.Errorf("%d bytes: pooled buffer of %d", tc.n, len(pb.b))
		case tc.size != 0 && (pb == nil || len(pb.b) != tc.size):
			t.Errorf("%d bytes: buffer %v, want %d bytes", tc.n, pb, tc.size)
		}
		pb.put()
	}
	// Reading pooled bodies allocates far less than a buffer per read: the pool hands the same
	// buffer back (under -race sync.Pool drops a quarter of what is put back, so some reads
	// allocate one; without the pool every read would allocate its 512 KiB class).
	body := bytes.Repeat([]byte("x"), 300<<10)
	const reads = 40
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range reads {
		_, pb, err := readChunks(onlyReader{bytes.NewReader(body)}, int64(len(body)))
		if err != nil {
			t.Fatal(err)
		}
		pb.put()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / reads; per > 256<<10 {
		t.Errorf("%d bytes allocated per pooled read of %d bytes, want under half the 512 KiB class", per, len(body))
	}
}
