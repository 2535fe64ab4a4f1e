package natsutil

import (
	"github.com/dustin/go-humanize"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// RecommendedMaxPayload is the largest message the embedded server takes (EmbeddedConfig:
// MaxPayload) and the least an external server should: a KV-event batch of a prompt of thousands
// of blocks (a long video, many large images) is one message of several MiB, and a stock
// nats-server's max_payload is 1 MiB. A publisher whose batch is larger gets
// nats.ErrMaxPayload and the batch never reaches the routers, whose index then misses those
// blocks until the worker's next batch exposes the gap and a snapshot repairs it.
const RecommendedMaxPayload = 8 << 20

// warnSmallMaxPayload logs, once per (re)connect, that the server's max_payload is below
// RecommendedMaxPayload: the first sign of the dropped batches above, which otherwise show only
// in the publishers' logs.
func warnSmallMaxPayload(log *zap.Logger, nc *nats.Conn) {
	mp := nc.MaxPayload()
	if mp <= 0 || mp >= RecommendedMaxPayload {
		return
	}
	log.Warn("nats server max_payload is below what KV-event batches of long prompts need; set max_payload 8MB in the NATS server configuration",
		zap.String("url", nc.ConnectedUrlRedacted()),
		zap.String("max_payload", humanize.IBytes(uint64(mp))),
		zap.String("recommended", humanize.IBytes(RecommendedMaxPayload)))
}
