package caddymodule

import (
	"errors"
	"io"
	"math/bits"
	"sync"
)

// Request bodies are read into buffers recycled by size class (powers of two from 64 KiB to
// 8 MiB): a 700 kB conversation read into a fresh buffer on every request cost a page fault per
// 4 KiB page and the zeroing of the whole buffer, most of what the router added to such a
// request besides routing itself (bench/proxy, faults per request). A buffer returns to its
// pool only when the request is over and every reader the proxy got over it is closed
// (replayBody.done); sync.Pool drops idle buffers over two garbage collections, so the pools
// hold no memory a quiet server does not use.
const (
	minPooledBody = 16 // log2 of the smallest pooled buffer (64 KiB)
	maxPooledBody = 23 // log2 of the largest (8 MiB)
)

var bodyPools [maxPooledBody - minPooledBody + 1]sync.Pool

// pooledBuf is a body buffer from a pool: b has the class's length.
type pooledBuf struct {
	b     []byte
	class int
}

// getBodyBuf returns a buffer of at least n bytes from its class's pool, or nil when n is
// outside the pooled classes.
func getBodyBuf(n int64) *pooledBuf {
	if n <= 0 || n > 1<<maxPooledBody {
		return nil
	}
	c := max(minPooledBody, bits.Len64(uint64(n-1)))
	if v := bodyPools[c-minPooledBody].Get(); v != nil {
		return v.(*pooledBuf)
	}
	return &pooledBuf{b: make([]byte, 1<<c), class: c}
}

// put returns the buffer to its pool; it must not be used after.
func (p *pooledBuf) put() {
	if p != nil {
		bodyPools[p.class-minPooledBody].Put(p)
	}
}

// errBodyDone is what a proxy attempt still reading the body gets once the request is over.
var errBodyDone = errors.New("kvroute: the request is over; its body is no longer readable")

// bodyReader is one proxy attempt's reader over a pooled body. Read and Close are serialized, so
// once Close returns no Read touches the bytes again (a transport may close a body from another
// goroutine while it writes it).
type bodyReader struct {
	mu     sync.Mutex
	data   []byte
	off    int
	closed bool
}

func (r *bodyReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, errBodyDone
	}
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.off:])
	r.off += n
	return n, nil
}

func (r *bodyReader) Close() error {
	r.mu.Lock()
	r.closed, r.data = true, nil
	r.mu.Unlock()
	return nil
}
