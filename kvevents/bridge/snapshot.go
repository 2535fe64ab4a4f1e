package bridge

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/snapshot"
)

// snapReq is a router's snapshot request handed to the rank goroutine, which answers with the set's
// blocks and position.
type snapReq struct {
	reply chan snapResp // buffered, capacity 1
}

type snapResp struct {
	a   snapshot.Answer
	err error
}

// errNothingForwarded answers a snapshot request before the rank forwarded a batch: there is no
// sequence number to continue from.
var errNothingForwarded = errors.New("no batch forwarded yet")

// track applies a batch about to be forwarded to the rank's block set. Seq 0 is the engine's first
// batch: the set is complete from there.
func (rk *rank) track(m Message) {
	if m.Seq == 0 {
		rk.set.Reset(true)
	}
	b, err := rk.dec.Decode(codec.Encoding(rk.encoding), m.Payload)
	if err != nil {
		// The routers drop it too (decode_error): the set stays what they can rebuild.
		rk.c.setUndecodable.Add(1)
	} else {
		rk.set.Apply(b)
	}
	rk.c.setBlocks.Store(int64(rk.set.Len()))
	rk.c.setEvicted.Store(rk.set.Evicted)
}

// answerSnapshot takes the set's blocks in snapshot order and its position: every forwarded batch is
// in it, so live batches continue at the seq after the newest forwarded one.
func (rk *rank) answerSnapshot(req snapReq) {
	if !rk.haveFwd {
		req.reply <- snapResp{err: errNothingForwarded}
		return
	}
	req.reply <- snapResp{a: snapshot.Answer{
		View: rk.set.Order(), Seq: rk.fwdLast + 1, Complete: rk.set.Complete(),
		Encoding: codec.Encoding(rk.encoding), DPRank: rk.dpRank,
	}}
}

// onSnapshot answers one snapshot request of a router (kvroute.ctl.<worker_id>.snapshot): the rank
// goroutine takes the blocks between two batches, this goroutine writes the chunks, so forwarding
// goes on meanwhile (the routers buffer those batches and apply them after the snapshot).
func (b *Bridge) onSnapshot(ctx context.Context, workerID string, ranks []*rank, msg *nats.Msg) {
	if msg.Reply == "" {
		return
	}
	log := b.log.With(zap.String("worker_id", workerID))
	fail := func(rk *rank, err error) {
		if rk != nil {
			rk.c.snapshotErrors.Add(1)
		}
		log.Warn("answering snapshot request", zap.Error(err))
		if err := snapshot.RespondError(b.nc, msg.Reply, err); err != nil {
			log.Warn("answering snapshot request", zap.Error(err))
		}
	}
	req, err := snapshot.ParseRequest(msg.Data, len(ranks))
	if err != nil {
		fail(nil, err)
		return
	}
	rk := ranks[req.DPRank]
	r := snapReq{reply: make(chan snapResp, 1)}
	select {
	case rk.snaps <- r:
	case <-ctx.Done():
		fail(rk, errors.New("snapshot request: bridge stopping"))
		return
	}
	var resp snapResp
	select {
	case resp = <-r.reply:
	case <-ctx.Done():
		fail(rk, errors.New("snapshot request: bridge stopping"))
		return
	}
	if resp.err != nil {
		fail(rk, resp.err)
		return
	}
	if err := snapshot.Respond(b.nc, msg.Reply, &resp.a); err != nil {
		fail(rk, err)
		return
	}
	rk.c.snapshots.Add(1)
	log.Info("answered snapshot request", zap.Int("dp_rank", req.DPRank), zap.Int("blocks", len(resp.a.View.Blocks)),
		zap.Uint64("seq", resp.a.Seq), zap.Bool("complete", resp.a.Complete))
}
