package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// Answer is what a publisher sends for one request: the blocks (Set.Order, taken by the goroutine
// that owns the Set) and the set's position.
type Answer struct {
	View     View
	Seq      uint64
	Complete bool
	Encoding codec.Encoding
	DPRank   int
	// MaxChunkBytes bounds a chunk's payload (DefaultMaxChunkBytes when <= 0).
	MaxChunkBytes int
}

// Respond publishes a on reply as chunks (see the package doc) and flushes. The blocks are read, not
// changed, so it can run outside the goroutine that owns the Set.
func Respond(nc *nats.Conn, reply string, a *Answer) error {
	var (
		held  []byte
		total int
		index int
	)
	send := func(payload []byte, last bool) error {
		msg := &nats.Msg{Subject: reply, Data: payload,
			Header: chunkHeaders(a.Seq, index, last, total, a.Complete, a.Encoding, a.DPRank)}
		index++
		if err := nc.PublishMsg(msg); err != nil {
			return fmt.Errorf("publishing snapshot chunk %d: %w", index-1, err)
		}
		return nil
	}
	err := Encode(a.View, a.MaxChunkBytes, func(p []byte, n int) error {
		if held != nil {
			if err := send(held, false); err != nil {
				return err
			}
		}
		held = p
		total += n
		return nil
	})
	if err == nil {
		err = send(held, true)
	}
	if err != nil {
		return err
	}
	return nc.Flush()
}

// RespondError tells the requester that no snapshot can be given, and why.
func RespondError(nc *nats.Conn, reply string, cause error) error {
	return nc.PublishMsg(&nats.Msg{Subject: reply, Header: nats.Header{wire.HeaderSnapshotError: []string{cause.Error()}}})
}

// ParseRequest reads a request body; dpSize is the number of ranks the publisher has.
func ParseRequest(data []byte, dpSize int) (Request, error) {
	var r Request
	if len(data) > MaxRequestBytes {
		return r, fmt.Errorf("decoding snapshot request: body of %d bytes exceeds %d", len(data), MaxRequestBytes)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("decoding snapshot request: %w", err)
	}
	if r.DPRank < 0 || r.DPRank >= dpSize {
		return r, fmt.Errorf("snapshot request: dp_rank %d out of range [0, %d)", r.DPRank, dpSize)
	}
	return r, nil
}

// FetchConfig bounds one Fetch.
type FetchConfig struct {
	// Idle is the longest wait for the first chunk and between chunks. Required.
	Idle time.Duration
	// MaxBytes bounds the payload bytes of the whole snapshot (the pending limit of the reply
	// subscription). Default 1 GiB.
	MaxBytes int64
}

// Fetch requests the snapshot of rank dpRank on subject (kvroute.ctl.<worker_id>.snapshot) and hands
// its chunks to each in order. It returns nil after the last chunk; an error wrapping ErrSnapshot
// when the publisher answers with an error, nobody answers (nats.ErrNoResponders), a chunk is missing
// or malformed, the bound is passed, or a wait exceeds Idle; each's error as is. ctx ends it early.
func Fetch(ctx context.Context, nc *nats.Conn, subject string, dpRank int, cfg FetchConfig, each func(Chunk) error) error {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1 << 30
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("%w: subscribing to the reply inbox: %w", ErrSnapshot, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// Chunks come faster than a router applies them: the subscription holds them (bounded by bytes).
	if err := sub.SetPendingLimits(-1, int(min(cfg.MaxBytes, 1<<31-1))); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	body, _ := json.Marshal(Request{DPRank: dpRank})
	if err := nc.PublishRequest(subject, inbox, body); err != nil {
		return fmt.Errorf("%w: requesting %s: %w", ErrSnapshot, subject, err)
	}
	var (
		seq   uint64
		bytes int64
	)
	for i := 0; ; i++ {
		wctx, cancel := context.WithTimeout(ctx, cfg.Idle)
		msg, err := sub.NextMsgWithContext(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, nats.ErrSlowConsumer) {
				return fmt.Errorf("%w: chunk %d dropped (more than %d bytes pending)", ErrSnapshot, i, cfg.MaxBytes)
			}
			return fmt.Errorf("%w: waiting for chunk %d: %w", ErrSnapshot, i, err)
		}
		if msg.Header.Get("Status") == "503" {
			return fmt.Errorf("%w: %w", ErrSnapshot, nats.ErrNoResponders)
		}
		c, err := parseChunk(msg.Header.Get, msg.Data)
		if err != nil {
			return err
		}
		switch {
		case c.Index != i:
			return fmt.Errorf("%w: chunk %d arrived where chunk %d was due", ErrSnapshot, c.Index, i)
		case i > 0 && c.Seq != seq:
			return fmt.Errorf("%w: chunk %d has seq %d, chunk 0 had %d", ErrSnapshot, i, c.Seq, seq)
		case c.DPRank != dpRank:
			return fmt.Errorf("%w: chunk for dp_rank %d, asked for %d", ErrSnapshot, c.DPRank, dpRank)
		}
		seq = c.Seq
		if bytes += int64(len(c.Payload)); bytes > cfg.MaxBytes {
			return fmt.Errorf("%w: more than %d bytes", ErrSnapshot, cfg.MaxBytes)
		}
		if err := each(c); err != nil {
			return err
		}
		if c.Last {
			return nil
		}
	}
}
