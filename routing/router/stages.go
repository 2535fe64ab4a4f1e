package router

import (
	"context"
	"time"

	"github.com/kvroute/kvroute/routing/mediaport"
)

// StageObserver receives one routing stage of one request (routing/mediaport.StageObserver).
type StageObserver = mediaport.StageObserver

// WithStageObserver returns ctx carrying f (routing/mediaport.WithStageObserver): Route and the
// Media implementation report every stage of the request routed under ctx to f, besides the
// router-wide Hooks.Stage.
func WithStageObserver(ctx context.Context, f StageObserver) context.Context {
	return mediaport.WithStageObserver(ctx, f)
}

// ObserveStage reports a stage to ctx's StageObserver, if any (routing/mediaport.ObserveStage).
func ObserveStage(ctx context.Context, stage string, start time.Time, d time.Duration) {
	mediaport.ObserveStage(ctx, stage, start, d)
}

func observeStage(ctx context.Context, stage string, start time.Time, d time.Duration) {
	mediaport.ObserveStage(ctx, stage, start, d)
}

// stage reports one stage that began at start to the Stage hook and to the request's stage
// observer (WithStageObserver), if any.
func (r *Router) stage(ctx context.Context, name string, start time.Time) {
	d := time.Since(start)
	if r.hooks.Stage != nil {
		r.hooks.Stage(name, d)
	}
	observeStage(ctx, name, start, d)
}
