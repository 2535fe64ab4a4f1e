package bridge_test

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kv"

	zmq "github.com/pebbe/zmq4"

	"github.com/kvroute/kvroute/kvevents/codec"
)

// fakeEngine is the KV event side of a vLLM/SGLang engine as vllm/distributed/kv_events.py
// ZmqEventPublisher implements it: a PUB socket sending [topic, seq (8 bytes BE), payload], a buffer of
// the published batches, and a ROUTER replay socket answering [id, b"", start] with
// [id, b"", (topic,) seq, payload] per buffered batch with seq >= start and the sentinel
// [id, b"", (b"",) -1, b""]. It binds an XPUB socket (same wire behaviour as PUB) so the test can wait
// for the bridge's subscription instead of sleeping.
type fakeEngine struct {
	t            testing.TB
	zctx         *zmq.Context
	pubEP        string
	replayEP     string // "" for no replay socket
	topic        []byte
	topicInReply bool // newer vLLM: replay replies carry the topic frame

	pub    *zmq.Socket // used by the test goroutine only
	closed bool        // between closeSockets and reopen: publish only buffers

	// mu protects buf and next.
	mu   sync.Mutex
	buf  [][]byte // payload of seq i at i-first
	next uint64

	stop chan struct{}
	done chan struct{}
}

// startEngine binds the sockets (retrying while the port of a just-closed socket is still in use)
// and serves replay requests until close.
func startEngine(t testing.TB, zctx *zmq.Context, pubEP, replayEP string, topicInReply bool) *fakeEngine {
	t.Helper()
	e := &fakeEngine{t: t, zctx: zctx, pubEP: pubEP, replayEP: replayEP, topic: []byte("kv-events"), topicInReply: topicInReply}
	e.open()
	// Registered after the environment's cleanup, so it runs before the ZMQ context is terminated
	// (zmq_ctx_term waits for every socket), also when the test fails half-way.
	t.Cleanup(func() {
		if !e.closed {
			e.closeSockets()
		}
	})
	return e
}

func bindRetry(t testing.TB, s *zmq.Socket, ep string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Bind(ep)
		if err == nil {
			return
		}
		if zmq.AsErrno(err) != zmq.Errno(syscall.EADDRINUSE) || time.Now().After(deadline) {
			t.Fatalf("binding %s: %v", ep, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *fakeEngine) open() {
	t := e.t
	// A socket left open when open fails half-way (a port taken by another test process) would
	// make the environment's zmq_ctx_term wait forever: the run hung until the 10-minute test
	// timeout instead of failing. t.Fatal runs this on its way out.
	var made []*zmq.Socket
	opened := false
	defer func() {
		if !opened {
			for _, s := range made {
				_ = s.Close()
			}
		}
	}()
	pub, err := e.zctx.NewSocket(zmq.XPUB)
	if err != nil {
		t.Fatal(err)
	}
	made = append(made, pub)
	must(t, pub.SetLinger(0))
	must(t, pub.SetSndhwm(100_000))
	must(t, pub.SetXpubVerbose(1))
	bindRetry(t, pub, e.pubEP)
	if e.replayEP == "" {
		e.pub, e.closed = pub, false
		e.stop, e.done = make(chan struct{}), make(chan struct{})
		close(e.done)
		opened = true
		return
	}
	router, err := e.zctx.NewSocket(zmq.ROUTER)
	if err != nil {
		t.Fatal(err)
	}
	made = append(made, router)
	must(t, router.SetLinger(0))
	must(t, router.SetSndhwm(0))
	bindRetry(t, router, e.replayEP)
	e.pub, e.closed = pub, false
	e.stop, e.done = make(chan struct{}), make(chan struct{})
	opened = true
	go e.serveReplay(router)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// serveReplay is ZmqEventPublisher._service_replay.
func (e *fakeEngine) serveReplay(router *zmq.Socket) {
	defer close(e.done)
	defer router.Close()
	poller := zmq.NewPoller()
	poller.Add(router, zmq.POLLIN)
	end := make([]byte, 8)
	binary.BigEndian.PutUint64(end, ^uint64(0))
	for {
		select {
		case <-e.stop:
			return
		default:
		}
		polled, err := poller.Poll(10 * time.Millisecond)
		if err != nil || len(polled) == 0 {
			continue
		}
		frame, err := router.RecvMessageBytes(0)
		if err != nil || len(frame) != 3 {
			continue
		}
		id, start := frame[0], binary.BigEndian.Uint64(frame[2])
		e.mu.Lock()
		first := e.next - uint64(len(e.buf))
		for i, p := range e.buf {
			seq := first + uint64(i)
			if seq < start {
				continue
			}
			if e.topicInReply {
				_, _ = router.SendMessage(id, []byte{}, e.topic, seqFrame(seq), p)
			} else {
				_, _ = router.SendMessage(id, []byte{}, seqFrame(seq), p)
			}
		}
		e.mu.Unlock()
		// The end marker has no topic frame in either shape: ("", END_SEQ, "").
		_, _ = router.SendMessage(id, []byte{}, end, []byte{})
	}
}

func seqFrame(seq uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, seq)
	return b
}

// waitSubscribed waits for a subscription message on the XPUB socket: from then on the bridge gets
// every batch sent.
func (e *fakeEngine) waitSubscribed() {
	e.t.Helper()
	poller := zmq.NewPoller()
	poller.Add(e.pub, zmq.POLLIN)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		polled, err := poller.Poll(20 * time.Millisecond)
		if err != nil || len(polled) == 0 {
			continue
		}
		msg, err := e.pub.RecvBytes(0)
		if err == nil && len(msg) > 0 && msg[0] == 1 {
			return
		}
	}
	e.t.Fatalf("no subscriber on %s", e.pubEP)
}

// publish buffers the batch under the next seq and sends it unless drop is set (a batch lost on the
// wire); it returns the seq.
func (e *fakeEngine) publish(payload []byte, drop bool) uint64 {
	e.t.Helper()
	e.mu.Lock()
	seq := e.next
	e.next++
	e.buf = append(e.buf, payload)
	e.mu.Unlock()
	if !drop && !e.closed {
		if _, err := e.pub.SendMessage(e.topic, seqFrame(seq), payload); err != nil {
			e.t.Fatalf("publishing seq %d: %v", seq, err)
		}
	}
	return seq
}

// sendRaw sends a message of arbitrary frames (malformed input).
func (e *fakeEngine) sendRaw(parts ...[]byte) {
	e.t.Helper()
	if _, err := e.pub.SendMessage(toAny(parts)...); err != nil {
		e.t.Fatalf("sending raw message: %v", err)
	}
}

func toAny(parts [][]byte) []any {
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out
}

// startAt makes the next batch seq first (an engine that numbers from a wall-clock epoch); the buffer
// must be empty.
func (e *fakeEngine) startAt(first uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.buf) != 0 {
		e.t.Fatal("startAt on an engine that published already")
	}
	e.next = first
}

// closeSockets closes both sockets, keeping the buffer and the sequence (a process that rebinds).
func (e *fakeEngine) closeSockets() {
	close(e.stop)
	<-e.done
	must(e.t, e.pub.Close())
	e.closed = true
}

// reopen binds the sockets again after closeSockets.
func (e *fakeEngine) reopen() { e.open() }

// freeTCPPair returns a loopback port p with p+1 free too (vLLM binds rank r on port + r). It
// picks below Linux's ephemeral range (32768–60999): a port the kernel handed out for port 0 was
// free when checked but could be handed to another test process's connection or listener before
// the engine bound it (go test runs packages in parallel), and the bind then failed.
func freeTCPPair(t testing.TB) int {
	t.Helper()
	for range 100 {
		p := 20000 + rand.IntN(12000)
		l1, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
		l1.Close()
		if err == nil {
			l2.Close()
			return p
		}
	}
	t.Fatal("no free pair of loopback ports")
	return 0
}

func tcpEP(port int) string { return "tcp://127.0.0.1:" + strconv.Itoa(port) }

// eventGen produces realistic vLLM batches: chains of complete blocks that grow and shrink.
type eventGen struct {
	rng       *rand.Rand
	blockSize int
	tails     []kv.EngineHash // engine hashes of chain ends that may be extended or removed
	ts        float64
}

func newEventGen(seed uint64, blockSize int) *eventGen {
	return &eventGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), blockSize: blockSize}
}

var forms = [][2]codec.Form{{codec.ArrayForm, codec.ArrayForm}, {codec.ArrayForm, codec.MapForm}, {codec.MapForm, codec.MapForm}, {codec.MapForm, codec.ArrayForm}}

// batch returns the next batch of dp rank dp, encoded in one of the two vLLM encodings (positional
// arrays before vLLM PR #42892, tagged maps after) chosen by i.
func (g *eventGen) batch(t testing.TB, i, dp int) []byte {
	t.Helper()
	g.ts += 0.25
	b := &codec.Batch{TS: g.ts, DPRank: int64(dp), HasDPRank: true}
	for range 1 + g.rng.IntN(3) {
		if len(g.tails) > 2 && g.rng.IntN(5) == 0 {
			k := g.rng.IntN(len(g.tails))
			b.Events = append(b.Events, codec.Event{Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{g.tails[k]}, Medium: "GPU", HasMedium: true})
			g.tails = append(g.tails[:k], g.tails[k+1:]...)
			continue
		}
		ev := codec.Event{Type: codec.BlockStored, BlockSize: g.blockSize, Medium: "GPU", HasMedium: true}
		if len(g.tails) > 0 && g.rng.IntN(3) > 0 {
			k := g.rng.IntN(len(g.tails))
			ev.Parent, ev.HasParent = g.tails[k], true
			g.tails = append(g.tails[:k], g.tails[k+1:]...)
		}
		n := 1 + g.rng.IntN(3)
		for range n {
			ev.BlockHashes = append(ev.BlockHashes, kv.EngineHash(g.rng.Uint64()))
			for range g.blockSize {
				ev.TokenIDs = append(ev.TokenIDs, uint32(g.rng.IntN(150000)))
			}
		}
		g.tails = append(g.tails, ev.BlockHashes[n-1])
		b.Events = append(b.Events, ev)
	}
	f := forms[i%len(forms)]
	payload, err := codec.EncodeVLLM(b, f[0], f[1])
	if err != nil {
		t.Fatalf("encoding batch %d: %v", i, err)
	}
	return payload
}
