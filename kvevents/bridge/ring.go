package bridge

// ring keeps the most recent forwarded batches of one rank, contiguous in sequence order, bounded
// by a batch count and a byte total (the oldest are dropped first). It is owned by the rank's
// goroutine and not safe for concurrent use.
type ring struct {
	maxBatches int
	maxBytes   int64

	buf   []Message // circular; len(buf) == maxBatches once grown
	head  int       // index of the oldest entry
	n     int       // entries held
	bytes int64     // payload bytes held
}

func newRing(maxBatches int, maxBytes int64) *ring {
	return &ring{maxBatches: maxBatches, maxBytes: maxBytes}
}

// push appends m; its Seq must be the newest held + 1 (the caller clears the ring otherwise). A
// payload larger than maxBytes is not kept and empties the ring (it could not be replayed).
func (r *ring) push(m Message) {
	if r.n > 0 && m.Seq != r.newest()+1 {
		r.clear()
	}
	if int64(len(m.Payload)) > r.maxBytes {
		r.clear()
		return
	}
	for r.n > 0 && (r.n >= r.maxBatches || r.bytes+int64(len(m.Payload)) > r.maxBytes) {
		r.dropOldest()
	}
	if r.n == len(r.buf) { // full below maxBatches: grow, oldest first
		grown := make([]Message, min(max(2*r.n, 16), r.maxBatches))
		for i := 0; i < r.n; i++ {
			grown[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		grown[r.n] = m
		r.buf, r.head = grown, 0
	} else {
		r.buf[(r.head+r.n)%len(r.buf)] = m
	}
	r.n++
	r.bytes += int64(len(m.Payload))
}

func (r *ring) dropOldest() {
	r.bytes -= int64(len(r.buf[r.head].Payload))
	r.buf[r.head] = Message{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	if r.n == 0 {
		r.head = 0
	}
}

func (r *ring) clear() {
	for r.n > 0 {
		r.dropOldest()
	}
	r.head = 0
}

func (r *ring) len() int { return r.n }

// oldest and newest return the sequence range held; only valid when len() > 0.
func (r *ring) oldest() uint64 { return r.buf[r.head].Seq }
func (r *ring) newest() uint64 { return r.buf[(r.head+r.n-1)%len(r.buf)].Seq }

// get returns the entry of seq, if held.
func (r *ring) get(seq uint64) (Message, bool) {
	if r.n == 0 || seq < r.oldest() || seq > r.newest() {
		return Message{}, false
	}
	return r.buf[(r.head+int(seq-r.oldest()))%len(r.buf)], true
}

// from returns the entries with Seq >= seq, oldest first (nil when seq is not held).
func (r *ring) from(seq uint64) []Message {
	if r.n == 0 || seq < r.oldest() || seq > r.newest() {
		return nil
	}
	start := int(seq - r.oldest())
	out := make([]Message, 0, r.n-start)
	for i := start; i < r.n; i++ {
		out = append(out, r.buf[(r.head+i)%len(r.buf)])
	}
	return out
}
