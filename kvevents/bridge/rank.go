package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	zmq "github.com/pebbe/zmq4"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// pollInterval bounds how long a rank goroutine waits in zmq_poll before it looks at its context and
// its replay requests again.
const pollInterval = 25 * time.Millisecond

// maxDrain bounds the messages read per poll, so replay requests are served under a flood too.
const maxDrain = 256

// subHWM is the SUB socket's receive high-water mark, vLLM's publisher hwm.
const subHWM = 100_000

// replayReq is a router's replay request handed to the rank goroutine.
type replayReq struct {
	from  uint64
	reply chan replayResp // buffered, capacity 1
}

type replayResp struct {
	n   int
	err error
}

// rank forwards the KV events of one worker's data-parallel rank.
type rank struct {
	b        *Bridge
	workerID string
	dpRank   int
	subEP    string // ZMQ PUB endpoint of this rank
	replayEP string // ZMQ ROUTER replay endpoint of this rank, or ""
	topic    string
	encoding string
	subject  string // kvroute.events.<worker_id>
	resetSub string // kvroute.ctl.<worker_id>.reset
	log      *zap.Logger
	reqs     chan replayReq
	snaps    chan snapReq
	c        rankCounters

	// The fields below are owned by the run goroutine.
	watch *rankWatch // learns the worker's main-attention block size from forwarded batches
	ring  *ring
	// set is the engine's block set from the forwarded batches (answers snapshot requests); dec
	// decodes the forwarded batches for it.
	set      *snapshot.Set
	dec      *codec.Decoder
	started  bool   // a live message was received
	liveLast uint64 // seq of the newest live message
	haveFwd  bool
	fwdLast  uint64 // seq of the newest forwarded batch
}

// run serves the rank until ctx is done: it (re)creates the SUB socket with backoff when it fails.
func (rk *rank) run(ctx context.Context) {
	wait := rk.b.cfg.ReconnectInterval
	for ctx.Err() == nil {
		err := rk.serve(ctx)
		if ctx.Err() != nil {
			return
		}
		rk.log.Error("kv event subscription failed; retrying", zap.Error(err), zap.Duration("wait", wait))
		t := time.NewTimer(wait)
	sleep:
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case req := <-rk.reqs:
				rk.answer(ctx, req)
			case req := <-rk.snaps:
				rk.answerSnapshot(req)
			case <-t.C:
				break sleep
			}
		}
		wait = min(2*wait, rk.b.cfg.ReconnectIntervalMax)
	}
}

// serve owns one SUB socket until ctx is done or the socket fails. A panic while handling a message
// is logged and returned as an error (the socket is then recreated).
func (rk *rank) serve(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			rk.log.Error("kv event bridge panicked", zap.Any("panic", r), zap.Stack("stack"))
			err = fmt.Errorf("handling kv event message: panic: %v", r)
		}
	}()
	sock, err := rk.b.zctx.NewSocket(zmq.SUB)
	if err != nil {
		return fmt.Errorf("creating sub socket: %w", err)
	}
	defer sock.Close()
	cfg := &rk.b.cfg
	for _, set := range []func() error{
		func() error { return sock.SetLinger(0) },
		func() error { return sock.SetRcvhwm(subHWM) },
		func() error { return sock.SetReconnectIvl(cfg.ReconnectInterval) },
		func() error { return sock.SetReconnectIvlMax(cfg.ReconnectIntervalMax) },
		func() error { return sock.SetSubscribe(rk.topic) },
		func() error { return sock.Connect(rk.subEP) },
	} {
		if err := set(); err != nil {
			return fmt.Errorf("setting up sub socket for %s: %w", rk.subEP, err)
		}
	}
	rk.log.Info("subscribed to engine kv events", zap.String("zmq_endpoint", rk.subEP))
	poller := zmq.NewPoller()
	poller.Add(sock, zmq.POLLIN)
	for {
		select {
		case <-ctx.Done():
			return nil
		case req := <-rk.reqs:
			rk.answer(ctx, req)
		case req := <-rk.snaps:
			rk.answerSnapshot(req)
		default:
		}
		polled, err := poller.Poll(pollInterval)
		if err != nil {
			return fmt.Errorf("polling %s: %w", rk.subEP, err)
		}
		if len(polled) == 0 {
			continue
		}
		for range maxDrain {
			parts, err := sock.RecvMessageBytes(zmq.DONTWAIT)
			if err != nil {
				if zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN) {
					break
				}
				return fmt.Errorf("receiving from %s: %w", rk.subEP, err)
			}
			rk.handle(ctx, parts)
		}
	}
}

// handle applies one live ZMQ message.
func (rk *rank) handle(ctx context.Context, parts [][]byte) {
	m, err := ParseFrames(parts)
	if err != nil {
		if n := rk.c.badFrames.Add(1); n&(n-1) == 0 { // log the 1st, 2nd, 4th, 8th, …
			rk.log.Warn("skipping malformed zmq message", zap.Error(err), zap.Uint64("bad_frames", n))
		}
		return
	}
	rk.c.received.Add(1)
	switch {
	case !rk.started:
		rk.started, rk.liveLast = true, m.Seq
		rk.catchUp(ctx, m)
	case m.Seq <= rk.liveLast:
		// One publisher never reorders or repeats a message: the engine restarted and counts anew.
		rk.liveLast = m.Seq
		rk.c.restarts.Add(1)
		rk.resync(ctx, m, "engine sequence went back: publisher restarted")
	default:
		rk.liveLast = m.Seq
		switch next := rk.fwdLast + 1; {
		case rk.haveFwd && m.Seq < next:
			rk.c.duplicates.Add(1) // already forwarded from an engine replay
		case !rk.haveFwd || m.Seq == next:
			rk.forward(m)
		default:
			rk.gap(ctx, next, m)
		}
	}
}

// catchUp forwards the first live message, preceded by the batches the engine still buffers (those
// published before the bridge connected), so they are not lost.
func (rk *rank) catchUp(ctx context.Context, m Message) {
	if m.Seq > 0 && rk.replayEP != "" {
		if hist := rk.history(ctx, m.Seq); hist != nil {
			if hist[0].Seq != 0 {
				rk.log.Warn("engine replay buffer no longer starts at seq 0; forwarding what it holds", zap.Uint64("first_seq", hist[0].Seq))
			}
			rk.forwardRun(hist)
		}
	}
	rk.forwardLive(m)
}

// history returns the engine's buffered batches when they form one run that reaches the live seq
// (ends at upTo-1 or later, starts at upTo or earlier); nil otherwise or without a replay socket.
func (rk *rank) history(ctx context.Context, upTo uint64) []Message {
	if rk.replayEP == "" {
		return nil
	}
	h, err := rk.engine(ctx, 0)
	if err != nil {
		rk.log.Warn("reading the engine replay buffer", zap.Error(err))
		return nil
	}
	if len(h) == 0 || h[0].Seq > upTo || h[len(h)-1].Seq+1 < upTo {
		return nil
	}
	for i := 1; i < len(h); i++ {
		if h[i].Seq != h[i-1].Seq+1 {
			return nil
		}
	}
	return h
}

// gap fills the batches [next, m.Seq) from the engine, checking first that the engine still holds the
// newest forwarded batch with the same bytes (so a restarted engine is not taken for the same one).
func (rk *rank) gap(ctx context.Context, next uint64, m Message) {
	rk.c.gaps.Add(1)
	if rk.replayEP == "" {
		rk.c.lost.Add(m.Seq - next)
		rk.resync(ctx, m, fmt.Sprintf("sequence gap %d..%d and no engine replay endpoint", next, m.Seq-1))
		return
	}
	from := next
	prev, verify := rk.ring.get(next - 1)
	if verify {
		from = next - 1
	}
	msgs, err := rk.engine(ctx, from)
	if err != nil {
		if n := rk.resync(ctx, m, fmt.Sprintf("filling sequence gap %d..%d: %v", next, m.Seq-1, err)); n > next {
			rk.c.lost.Add(n - next)
		}
		return
	}
	if verify {
		if len(msgs) > 0 && msgs[0].Seq == from && !bytes.Equal(msgs[0].Payload, prev.Payload) {
			rk.c.restarts.Add(1)
			rk.resync(ctx, m, fmt.Sprintf("engine replay of seq %d differs from the forwarded batch: publisher restarted", from))
			return
		}
		if len(msgs) > 0 && msgs[0].Seq == from {
			msgs = msgs[1:]
		}
	}
	if len(msgs) == 0 || msgs[0].Seq != next {
		// The engine moved past its buffer or is a new process numbering on from a higher seq (an
		// epoch-based counter): which one cannot be told, so no batch is counted as lost.
		rk.resync(ctx, m, fmt.Sprintf("engine replay buffer no longer holds seq %d (engine restarted, or the bridge fell behind its buffer)", next))
		return
	}
	before := rk.fwdLast
	rk.forwardRun(msgs)
	rk.c.filled.Add(min(rk.fwdLast, m.Seq-1) - before)
	rk.forwardLive(m)
}

// resync announces that the rank's earlier batches are no longer valid (lost, or from an engine
// process that is gone) and continues with m: routers clear the worker rank and apply batches from
// next_seq on. When the engine's replay buffer still holds a run of batches reaching m, they are
// forwarded first (next_seq is the first of them): a restarted engine whose buffer starts at its
// first batch is rebuilt completely, otherwise as much as the engine still holds. It returns the
// announced next_seq.
func (rk *rank) resync(ctx context.Context, m Message, reason string) (nextSeq uint64) {
	rk.ring.clear()
	rk.haveFwd = false
	hist := rk.history(ctx, m.Seq)
	next := m.Seq
	if len(hist) > 0 {
		next = hist[0].Seq
	}
	rk.publishReset(next, reason)
	rk.forwardRun(hist)
	rk.forwardLive(m)
	return next
}

// forwardRun forwards a run of ascending batches, stopping at the first that does not follow the
// newest forwarded one; batches already forwarded are skipped.
func (rk *rank) forwardRun(msgs []Message) {
	for _, x := range msgs {
		switch {
		case rk.haveFwd && x.Seq <= rk.fwdLast:
		case !rk.haveFwd || x.Seq == rk.fwdLast+1:
			rk.forward(x)
		default:
			return
		}
	}
}

// forwardLive forwards the live message m after a catch-up, fill or resync; it may already have come
// with the engine's replay.
func (rk *rank) forwardLive(m Message) {
	switch {
	case rk.haveFwd && m.Seq <= rk.fwdLast:
	case !rk.haveFwd || m.Seq == rk.fwdLast+1:
		rk.forward(m)
	default: // the replay ended before m: what lies between is lost
		rk.c.lost.Add(m.Seq - rk.fwdLast - 1)
		rk.ring.clear()
		rk.haveFwd = false
		rk.publishReset(m.Seq, "engine replay ended before the live stream")
		rk.forward(m)
	}
}

// forward publishes a batch for the first time, keeps it for replay and applies it to the block set.
func (rk *rank) forward(m Message) {
	rk.track(m)
	rk.ring.push(m)
	rk.fwdLast, rk.haveFwd = m.Seq, true
	rk.c.lastSeq.Store(m.Seq)
	rk.c.haveSeq.Store(true)
	rk.c.forwarded.Add(1)
	_ = rk.publish(m)
	rk.watch.observe(m.Payload)
}

// publish sends one batch on the events subject with the DESIGN.md §2.2 headers.
func (rk *rank) publish(m Message) error {
	msg := &nats.Msg{Subject: rk.subject, Data: m.Payload, Header: nats.Header{
		wire.HeaderSeq:      []string{strconv.FormatUint(m.Seq, 10)},
		wire.HeaderEncoding: []string{rk.encoding},
		wire.HeaderDPRank:   []string{strconv.Itoa(rk.dpRank)},
	}}
	if err := rk.b.nc.PublishMsg(msg); err != nil {
		if n := rk.c.publishErrors.Add(1); n&(n-1) == 0 {
			rk.log.Error("publishing kv event batch", zap.Uint64("seq", m.Seq), zap.Error(err), zap.Uint64("publish_errors", n))
		}
		return fmt.Errorf("publishing batch %d on %s: %w", m.Seq, rk.subject, err)
	}
	return nil
}

// resetMessage is the body of kvroute.ctl.<worker_id>.reset.
type resetMessage struct {
	DPRank  int    `json:"dp_rank"`
	NextSeq uint64 `json:"next_seq"`
	Reason  string `json:"reason"`
}

func (rk *rank) publishReset(next uint64, reason string) {
	rk.set.Reset(false) // what follows is all the set will know (complete again if next is seq 0)
	rk.c.resets.Add(1)
	rk.log.Warn("announcing kv event reset", zap.Uint64("next_seq", next), zap.String("reason", reason))
	body := fmt.Appendf(nil, `{"dp_rank":%d,"next_seq":%d,"reason":%s}`, rk.dpRank, next, strconv.Quote(reason))
	if err := rk.b.nc.Publish(rk.resetSub, body); err != nil {
		rk.log.Error("publishing kv event reset", zap.Error(err))
	}
}

// engine runs one engine replay from seq from.
func (rk *rank) engine(ctx context.Context, from uint64) ([]Message, error) {
	cfg := &rk.b.cfg
	msgs, bad, err := engineReplay(ctx, rk.b.zctx, rk.replayEP, from, replayLimits{
		idle: cfg.ReplayTimeout, maxBatches: cfg.MaxReplayBatches, maxBytes: cfg.MaxReplayBytes,
	})
	if bad > 0 {
		rk.c.badFrames.Add(uint64(bad))
	}
	return msgs, err
}

// answer serves a router's replay request and replies on req.reply.
func (rk *rank) answer(ctx context.Context, req replayReq) {
	rk.c.replayRequests.Add(1)
	n, err := rk.replayFor(ctx, req.from)
	rk.c.replayed.Add(uint64(n))
	if err != nil {
		rk.c.replayErrors.Add(1)
		rk.log.Warn("answering replay request", zap.Uint64("from_seq", req.from), zap.Error(err))
	}
	req.reply <- replayResp{n: n, err: err}
}

// errNotBuffered is the cause of a replay request for batches neither the ring nor the engine holds.
var errNotBuffered = errors.New("no longer buffered")

// replayFor republishes the forwarded batches with seq >= from: from the ring when it reaches back
// that far, else from the engine's replay socket.
func (rk *rank) replayFor(ctx context.Context, from uint64) (int, error) {
	if !rk.haveFwd || from > rk.fwdLast {
		return 0, nil
	}
	if rk.ring.len() > 0 && from >= rk.ring.oldest() {
		n := 0
		for _, m := range rk.ring.from(from) {
			if err := rk.publish(m); err != nil {
				return n, err
			}
			n++
		}
		return n, nil
	}
	if rk.replayEP == "" {
		oldest := rk.fwdLast + 1
		if rk.ring.len() > 0 {
			oldest = rk.ring.oldest()
		}
		return 0, fmt.Errorf("replaying from seq %d: %w (oldest held %d, no engine replay endpoint)", from, errNotBuffered, oldest)
	}
	msgs, err := rk.engine(ctx, from)
	if err != nil {
		return 0, fmt.Errorf("replaying from seq %d: %w", from, err)
	}
	if len(msgs) == 0 || msgs[0].Seq != from {
		return 0, fmt.Errorf("replaying from seq %d: %w by the engine", from, errNotBuffered)
	}
	n := 0
	for _, m := range msgs {
		switch {
		case m.Seq <= rk.fwdLast:
			if err := rk.publish(m); err != nil {
				return n, err
			}
		case m.Seq == rk.fwdLast+1:
			rk.forward(m)
		default:
			return n, nil
		}
		n++
	}
	return n, nil
}
