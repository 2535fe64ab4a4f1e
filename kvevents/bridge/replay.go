package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// ErrReplay is wrapped by every error of a replay from the engine's replay socket.
var ErrReplay = errors.New("engine replay failed")

// replayLimits bounds one engine replay.
type replayLimits struct {
	// idle is the longest wait for the next reply frame.
	idle time.Duration
	// maxBatches and maxBytes bound what is read; more is an error.
	maxBatches int
	maxBytes   int64
}

// engineReplay asks the engine's ROUTER replay socket at endpoint for its buffered batches with
// seq >= from and returns them in the order sent (ascending). It uses a fresh DEALER socket, so a
// late reply to an abandoned request can never be taken for the answer to a later one. Malformed
// reply frames are skipped and counted in bad.
func engineReplay(ctx context.Context, zctx *zmq.Context, endpoint string, from uint64, lim replayLimits) (msgs []Message, bad int, err error) {
	sock, err := zctx.NewSocket(zmq.DEALER)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: creating dealer socket: %w", ErrReplay, err)
	}
	defer sock.Close()
	if err := sock.SetLinger(0); err != nil {
		return nil, 0, fmt.Errorf("%w: setting linger: %w", ErrReplay, err)
	}
	if err := sock.SetRcvhwm(0); err != nil { // no limit: the reply is bounded by the engine's buffer
		return nil, 0, fmt.Errorf("%w: setting receive hwm: %w", ErrReplay, err)
	}
	if err := sock.Connect(endpoint); err != nil {
		return nil, 0, fmt.Errorf("%w: connecting to %s: %w", ErrReplay, endpoint, err)
	}
	if _, err := sock.SendMessage([]byte{}, seqBytes(from)); err != nil {
		return nil, 0, fmt.Errorf("%w: sending request to %s: %w", ErrReplay, endpoint, err)
	}
	poller := zmq.NewPoller()
	poller.Add(sock, zmq.POLLIN)
	var size int64
	deadline := time.Now().Add(lim.idle)
	for {
		if ctx.Err() != nil {
			return nil, bad, fmt.Errorf("%w: %w", ErrReplay, ctx.Err())
		}
		wait := min(time.Until(deadline), pollInterval)
		if wait <= 0 {
			return nil, bad, fmt.Errorf("%w: no reply from %s within %s", ErrReplay, endpoint, lim.idle)
		}
		polled, err := poller.Poll(wait)
		if err != nil {
			return nil, bad, fmt.Errorf("%w: polling %s: %w", ErrReplay, endpoint, err)
		}
		if len(polled) == 0 {
			continue
		}
		parts, err := sock.RecvMessageBytes(0)
		if err != nil {
			return nil, bad, fmt.Errorf("%w: receiving from %s: %w", ErrReplay, endpoint, err)
		}
		deadline = time.Now().Add(lim.idle)
		m, end, err := parseReplayFrames(parts)
		if err != nil {
			bad++
			continue
		}
		if end {
			return msgs, bad, nil
		}
		if n := len(msgs); n > 0 && m.Seq <= msgs[n-1].Seq {
			bad++ // out of order: the engine sends ascending seqs
			continue
		}
		size += int64(len(m.Payload))
		if len(msgs) >= lim.maxBatches || size > lim.maxBytes {
			return nil, bad, fmt.Errorf("%w: reply from %s exceeds %d batches or %d bytes", ErrReplay, endpoint, lim.maxBatches, lim.maxBytes)
		}
		msgs = append(msgs, m)
	}
}
