package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// maxReplayRequestBytes bounds a replay request body.
const maxReplayRequestBytes = 4 << 10

// Message is one published batch.
type Message struct {
	Seq     uint64
	Payload []byte
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// WorkerID names the subjects (kvroute.events.<worker_id>, kvroute.ctl.<worker_id>.replay).
	WorkerID string
	// Conn is the NATS connection; nil publishes nowhere (batches are still numbered, kept for
	// replay and handed to OnPublish).
	Conn *nats.Conn
	// EventForm is how events are encoded: codec.ArrayForm (vLLM before PR #42892) or
	// codec.MapForm (tagged maps). The batch itself is always positional, as vLLM v0.26 sends it.
	// Default: codec.MapForm.
	EventForm codec.Form
	// RingBatches and RingBytes bound the batches kept for replay (oldest dropped first).
	// Defaults: 10000 batches (vLLM's replay buffer_steps), 64 MiB.
	RingBatches int
	RingBytes   int64
	// Hybrid publishes like a hybrid vLLM worker (Qwen3.5: full attention beside Mamba layers): every
	// event carries its KV cache group, and each BlockStored is followed by the Mamba group's
	// non-dense one (see hybridEvents). The block cache's block size is the attention group's.
	Hybrid bool
	// MaxBlocks bounds the block set kept for snapshot requests: the cache capacity in blocks.
	// Default snapshot.DefaultMaxBlocks.
	MaxBlocks int
	// OnPublish, when set, receives every batch as it is published for the first time (not on
	// replay), in sequence order. It must not block.
	OnPublish func(Message)
	// Logger receives publish and replay errors. Default: no-op.
	Logger *zap.Logger
}

// Publisher numbers the simulator's KV event batches from 0, publishes them on
// kvroute.events.<worker_id> with the DESIGN.md §2.2 headers, keeps the most recent ones in a
// bounded ring and answers replay requests on kvroute.ctl.<worker_id>.replay
// (`{"dp_rank": 0, "from_seq": n}` → `{"replayed": k}` or `{"error": "..."}`) by publishing the
// held batches with seq >= n again. It is safe for concurrent use.
type Publisher struct {
	cfg  PublisherConfig
	log  *zap.Logger
	sub  *nats.Subscription
	snap *nats.Subscription

	// mu protects the fields below and orders publishes.
	mu    sync.Mutex
	next  uint64    // seq of the next new batch
	ring  []Message // ring[head:] are the held batches, oldest first, contiguous seqs
	head  int
	bytes int64         // payload bytes in ring
	set   *snapshot.Set // the blocks the published events leave the cache holding
}

// NewPublisher returns a publisher. With a connection it subscribes to the replay subject; call
// Close to unsubscribe.
func NewPublisher(cfg *PublisherConfig) (*Publisher, error) {
	if cfg == nil {
		return nil, errors.New("creating publisher: no config")
	}
	c := *cfg
	if c.EventForm == 0 {
		c.EventForm = codec.MapForm
	}
	if c.EventForm != codec.ArrayForm && c.EventForm != codec.MapForm {
		return nil, fmt.Errorf("creating publisher: unknown event form %d", c.EventForm)
	}
	if c.RingBatches <= 0 {
		c.RingBatches = 10000
	}
	if c.RingBytes <= 0 {
		c.RingBytes = 64 << 20
	}
	p := &Publisher{cfg: c, log: c.Logger, set: snapshot.NewSet(c.MaxBlocks)}
	p.set.Reset(true) // batches are numbered from 0: the set holds the whole history
	if p.log == nil {
		p.log = zap.NewNop()
	}
	if c.Conn != nil {
		if c.WorkerID == "" {
			return nil, errors.New("creating publisher: no worker id")
		}
		sub, err := c.Conn.Subscribe(wire.ReplaySubject(c.WorkerID), p.onReplay)
		if err != nil {
			return nil, fmt.Errorf("subscribing to %s: %w", wire.ReplaySubject(c.WorkerID), err)
		}
		p.sub = sub
		snap, err := c.Conn.Subscribe(wire.SnapshotSubject(c.WorkerID), p.onSnapshot)
		if err != nil {
			_ = sub.Unsubscribe()
			return nil, fmt.Errorf("subscribing to %s: %w", wire.SnapshotSubject(c.WorkerID), err)
		}
		p.snap = snap
		// A restarted simulator numbers its batches from 0 again and holds none of its old blocks:
		// routers that still know the worker clear it and continue at seq 0 (as a bridge announces
		// lost history).
		reset, _ := json.Marshal(resetMessage{DPRank: 0, NextSeq: 0, Reason: "simulator started"})
		if err := c.Conn.Publish(wire.ResetSubject(c.WorkerID), reset); err != nil {
			_ = sub.Unsubscribe()
			_ = snap.Unsubscribe()
			return nil, fmt.Errorf("publishing on %s: %w", wire.ResetSubject(c.WorkerID), err)
		}
	}
	return p, nil
}

// resetMessage is the body of kvroute.ctl.<worker_id>.reset.
type resetMessage struct {
	DPRank  int    `json:"dp_rank"`
	NextSeq uint64 `json:"next_seq"`
	Reason  string `json:"reason"`
}

// Close stops answering replay and snapshot requests.
func (p *Publisher) Close() error {
	if p.sub == nil {
		return nil
	}
	var errs []error
	for _, s := range []*nats.Subscription{p.sub, p.snap} {
		if err := s.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, fmt.Errorf("unsubscribing from %s: %w", s.Subject, err))
		}
	}
	return errors.Join(errs...)
}

// Publish encodes events as one vLLM KVEventBatch (data_parallel_rank 0), numbers it and
// publishes it. It returns the batch's seq.
func (p *Publisher) Publish(events []codec.Event) (uint64, error) {
	if p.cfg.Hybrid {
		events = hybridEvents(events)
	}
	payload, err := codec.EncodeVLLM(&codec.Batch{TS: float64(time.Now().UnixNano()) / 1e9, Events: events, HasDPRank: true},
		codec.ArrayForm, p.cfg.EventForm)
	if err != nil {
		return 0, fmt.Errorf("encoding kv event batch: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m := Message{Seq: p.next, Payload: payload}
	p.next++
	p.pushLocked(m)
	p.set.Apply(&codec.Batch{Events: events})
	if p.cfg.OnPublish != nil {
		p.cfg.OnPublish(m)
	}
	return m.Seq, p.sendLocked(m)
}

// flushTimeout bounds Flush.
const flushTimeout = 2 * time.Second

// Flush waits until the NATS server has received every batch published so far (a no-op without a
// connection), so a request's events are out before its first response byte.
func (p *Publisher) Flush() error {
	if p.cfg.Conn == nil {
		return nil
	}
	if err := p.cfg.Conn.FlushTimeout(flushTimeout); err != nil {
		return fmt.Errorf("flushing kv event batches: %w", err)
	}
	return nil
}

// Next returns the seq the next new batch will get (the number of batches published).
func (p *Publisher) Next() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

// Held returns the batches held for replay, oldest first.
func (p *Publisher) Held() []Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Message(nil), p.ring[p.head:]...)
}

// errNotHeld is the cause of a replay request that reaches back before the ring.
var errNotHeld = errors.New("no longer held")

// Replay publishes the held batches with seq >= from again, with their seqs, and returns how many
// it published. A from beyond the newest batch replays nothing; a from before the oldest held batch
// is an error.
func (p *Publisher) Replay(from uint64) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if from >= p.next {
		return 0, nil
	}
	held := p.ring[p.head:]
	if len(held) == 0 || from < held[0].Seq {
		oldest := p.next
		if len(held) > 0 {
			oldest = held[0].Seq
		}
		return 0, fmt.Errorf("replaying from seq %d: %w (oldest held %d)", from, errNotHeld, oldest)
	}
	n := 0
	for _, m := range held[from-held[0].Seq:] {
		if err := p.sendLocked(m); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// pushLocked appends m to the ring and drops the oldest batches beyond the bounds (amortized
// O(1): the slice is compacted when more than half of it has been dropped).
func (p *Publisher) pushLocked(m Message) {
	p.ring = append(p.ring, m)
	p.bytes += int64(len(m.Payload))
	for len(p.ring)-p.head > p.cfg.RingBatches || (p.bytes > p.cfg.RingBytes && len(p.ring)-p.head > 0) {
		p.bytes -= int64(len(p.ring[p.head].Payload))
		p.ring[p.head] = Message{}
		p.head++
	}
	if p.head > len(p.ring)/2 {
		p.ring = append(p.ring[:0:0], p.ring[p.head:]...)
		p.head = 0
	}
}

func (p *Publisher) sendLocked(m Message) error {
	if p.cfg.Conn == nil {
		return nil
	}
	msg := &nats.Msg{Subject: wire.EventsSubject(p.cfg.WorkerID), Data: m.Payload, Header: nats.Header{
		wire.HeaderSeq:      []string{strconv.FormatUint(m.Seq, 10)},
		wire.HeaderEncoding: []string{string(codec.VLLM)},
		wire.HeaderDPRank:   []string{"0"},
	}}
	if err := p.cfg.Conn.PublishMsg(msg); err != nil {
		p.log.Error("publishing kv event batch", zap.Uint64("seq", m.Seq), zap.Error(err))
		return fmt.Errorf("publishing batch %d: %w", m.Seq, err)
	}
	return nil
}

type replayRequest struct {
	DPRank  int    `json:"dp_rank"`
	FromSeq uint64 `json:"from_seq"`
}

type replayReply struct {
	Replayed *int   `json:"replayed,omitempty"`
	Error    string `json:"error,omitempty"`
}

// onReplay answers one replay request.
func (p *Publisher) onReplay(msg *nats.Msg) {
	reply := func(r replayReply) {
		if msg.Reply == "" {
			return
		}
		b, _ := json.Marshal(r)
		if err := msg.Respond(b); err != nil {
			p.log.Warn("answering replay request", zap.Error(err))
		}
	}
	if len(msg.Data) > maxReplayRequestBytes {
		reply(replayReply{Error: fmt.Sprintf("decoding replay request: body of %d bytes exceeds %d", len(msg.Data), maxReplayRequestBytes)})
		return
	}
	var req replayRequest
	if err := json.Unmarshal(msg.Data, &req); err != nil {
		reply(replayReply{Error: "decoding replay request: " + err.Error()})
		return
	}
	if req.DPRank != 0 {
		reply(replayReply{Error: fmt.Sprintf("replay request: dp_rank %d out of range [0, 1)", req.DPRank)})
		return
	}
	n, err := p.Replay(req.FromSeq)
	if err != nil {
		p.log.Warn("answering replay request", zap.Uint64("from_seq", req.FromSeq), zap.Error(err))
		reply(replayReply{Error: err.Error()})
		return
	}
	reply(replayReply{Replayed: &n})
}

// Connected reports whether the publisher's NATS connection is up (false without one).
func (p *Publisher) Connected() bool { return p.cfg.Conn != nil && p.cfg.Conn.IsConnected() }

// SetLen returns the number of blocks in the publisher's block set.
func (p *Publisher) SetLen() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.set.Len()
}

// onSnapshot answers one snapshot request with the block set as of the next seq: the blocks are
// taken under the lock that orders publishes, and written out after it, so publishing goes on.
func (p *Publisher) onSnapshot(msg *nats.Msg) {
	if msg.Reply == "" {
		return
	}
	if _, err := snapshot.ParseRequest(msg.Data, 1); err != nil {
		if err := snapshot.RespondError(p.cfg.Conn, msg.Reply, err); err != nil {
			p.log.Warn("answering snapshot request", zap.Error(err))
		}
		return
	}
	p.mu.Lock()
	a := snapshot.Answer{View: p.set.Order(), Seq: p.next, Complete: p.set.Complete(), Encoding: codec.VLLM}
	p.mu.Unlock()
	if err := snapshot.Respond(p.cfg.Conn, msg.Reply, &a); err != nil {
		p.log.Warn("answering snapshot request", zap.Error(err))
	}
}
