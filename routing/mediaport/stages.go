package mediaport

import (
	"context"
	"time"
)

// StageObserver receives one routing stage of one request (DESIGN.md §10 stage names: parse,
// template, tokenize, fetch, decode, layout, hash, index, score): when it began and how long it
// took. It may be called from several goroutines of the request at once.
type StageObserver func(stage string, start time.Time, d time.Duration)

type stageObserverKey struct{}

// WithStageObserver returns ctx carrying f: Route (and the Media implementation, through
// ObserveStage) reports every stage of the request routed under ctx to f, besides the router-wide
// Hooks.Stage. Caddy's tracing glue uses it to turn stages into child spans of the request.
func WithStageObserver(ctx context.Context, f StageObserver) context.Context {
	return context.WithValue(ctx, stageObserverKey{}, f)
}

// ObserveStage reports a stage to ctx's StageObserver, if any. Media implementations call it for
// their fetch and decode stages; the router for all the others.
func ObserveStage(ctx context.Context, stage string, start time.Time, d time.Duration) {
	if f, ok := ctx.Value(stageObserverKey{}).(StageObserver); ok && f != nil {
		f(stage, start, d)
	}
}
