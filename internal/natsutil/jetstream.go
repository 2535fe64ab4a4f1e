package natsutil

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrJetStreamDisabled is the error of a JetStream request to a NATS server that has no
// JetStream: kvroute keeps its worker registry (kvroute_workers) and the stored-response map
// (kvroute_responses) in JetStream KV buckets, so the router, the bridge and the simulator cannot
// register or find workers there. A stock `nats-server` runs without it unless started with `-js`
// or `jetstream {}` in its configuration.
var ErrJetStreamDisabled = errors.New("JetStream is not enabled on the NATS server: start nats-server with -js (or jetstream {} in its configuration); kvroute keeps its worker registry there")

// JetStreamHint returns err wrapped in ErrJetStreamDisabled when err says that no JetStream
// answered (nats.ErrNoResponders on a $JS.API request, jetstream.ErrJetStreamNotEnabled, or
// ErrJetStreamNotEnabledForAccount), else err unchanged. Without it an operator sees "no
// responders available for request", which names no cause.
func JetStreamHint(err error) error {
	if err == nil || errors.Is(err, ErrJetStreamDisabled) {
		return err
	}
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("%w (%w)", ErrJetStreamDisabled, err)
	}
	return err
}
