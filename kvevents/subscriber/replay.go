package subscriber

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// errReplay is wrapped by every failed replay request.
var errReplay = errors.New("replay request failed")

// replayAnswer is the bridge's answer on kvroute.ctl.<worker_id>.replay.
type replayAnswer struct {
	Replayed *int   `json:"replayed"`
	Error    string `json:"error"`
}

// replay sends one replay request and posts the answer to the shard; after a positive answer it
// posts a deadline item one ReplayTimeout later, by which the replayed batches must have closed the
// gap. It runs in its own tracked goroutine.
func (s *Subscriber) replay(sh *shard, id string, rank int, gen, from uint64) {
	body := fmt.Appendf(nil, `{"dp_rank":%d,"from_seq":%d}`, rank, from)
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ReplayTimeout)
	msg, err := s.nc.RequestWithContext(ctx, wire.ReplaySubject(id), body)
	cancel()
	it := item{kind: itemReplayAnswer, id: id, rank: rank, gen: gen}
	if err != nil {
		it.err = fmt.Errorf("%w: requesting replay of %s from seq %d: %w", errReplay, id, from, err)
	} else {
		it.replayed, it.err = parseAnswer(msg.Data)
	}
	if !sh.post(s.ctx, it) || it.err != nil || it.replayed == 0 {
		return
	}
	t := time.NewTimer(s.cfg.ReplayTimeout)
	defer t.Stop()
	select {
	case <-t.C:
		sh.post(s.ctx, item{kind: itemReplayDeadline, id: id, rank: rank, gen: gen})
	case <-s.ctx.Done():
	}
}

// parseAnswer reads {"replayed": k} or {"error": "..."}.
func parseAnswer(b []byte) (int, error) {
	if len(b) > maxControlBytes {
		return 0, fmt.Errorf("%w: answer of %d bytes exceeds %d", errReplay, len(b), maxControlBytes)
	}
	var a replayAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return 0, fmt.Errorf("%w: decoding answer: %w", errReplay, err)
	}
	if a.Error != "" {
		return 0, fmt.Errorf("%w: bridge: %s", errReplay, a.Error)
	}
	if a.Replayed == nil || *a.Replayed < 0 {
		return 0, fmt.Errorf("%w: answer without a replayed count", errReplay)
	}
	return *a.Replayed, nil
}
