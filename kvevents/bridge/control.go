package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// maxControlBytes bounds a replay request body.
const maxControlBytes = 4 << 10

// ReplayRequest is the body of a request on kvroute.ctl.<worker_id>.replay.
type ReplayRequest struct {
	DPRank  int    `json:"dp_rank"`
	FromSeq uint64 `json:"from_seq"`
}

// ReplayReply is the answer: Replayed batches were published again, or Error says why not.
type ReplayReply struct {
	Replayed *int   `json:"replayed,omitempty"`
	Error    string `json:"error,omitempty"`
}

// onReplay answers one replay request of a router for a worker whose ranks are given.
func (b *Bridge) onReplay(ctx context.Context, workerID string, ranks []*rank, msg *nats.Msg) {
	reply := func(r ReplayReply) {
		if msg.Reply == "" {
			return
		}
		body, _ := json.Marshal(r)
		if err := msg.Respond(body); err != nil {
			b.log.Warn("answering replay request", zap.String("worker_id", workerID), zap.Error(err))
		}
	}
	fail := func(err error) { reply(ReplayReply{Error: err.Error()}) }
	if len(msg.Data) > maxControlBytes {
		fail(fmt.Errorf("decoding replay request: body of %d bytes exceeds %d", len(msg.Data), maxControlBytes))
		return
	}
	var req ReplayRequest
	if err := json.Unmarshal(msg.Data, &req); err != nil {
		fail(fmt.Errorf("decoding replay request: %w", err))
		return
	}
	if req.DPRank < 0 || req.DPRank >= len(ranks) {
		fail(fmt.Errorf("replay request: dp_rank %d out of range [0, %s)", req.DPRank, strconv.Itoa(len(ranks))))
		return
	}
	rk := ranks[req.DPRank]
	r := replayReq{from: req.FromSeq, reply: make(chan replayResp, 1)}
	select {
	case rk.reqs <- r:
	case <-ctx.Done():
		fail(fmt.Errorf("replay request: bridge stopping"))
		return
	}
	select {
	case resp := <-r.reply:
		if resp.err != nil {
			fail(resp.err)
			return
		}
		n := resp.n
		reply(ReplayReply{Replayed: &n})
	case <-ctx.Done():
		fail(fmt.Errorf("replay request: bridge stopping"))
	}
}
