package caddymodule

import (
	"context"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/router"
)

// tracerName is the instrumentation scope of kvroute's spans.
const tracerName = "github.com/kvroute/kvroute/caddymodule"

// stageSpans turns the routing stages of one request into child spans of the request's span
// (Caddy's `tracing` directive creates that span; without it the request carries a non-recording
// span and nothing is collected). The router reports each stage after it ran (start and
// duration), possibly from several goroutines; the spans are written once the decision is known,
// so each carries the decision's attributes, with the stage's own start and end times.
type stageSpans struct {
	parent trace.Span

	mu     sync.Mutex
	stages []stageTiming
}

type stageTiming struct {
	name  string
	start time.Time
	d     time.Duration
}

// traceStages returns ctx with a stage observer when the request's span is recording, and the
// collector to end with the decision; (ctx, nil) otherwise.
func traceStages(ctx context.Context) (context.Context, *stageSpans) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	ss := &stageSpans{parent: parent}
	return router.WithStageObserver(ctx, ss.observe), ss
}

func (ss *stageSpans) observe(stage string, start time.Time, d time.Duration) {
	ss.mu.Lock()
	ss.stages = append(ss.stages, stageTiming{name: stage, start: start, d: d})
	ss.mu.Unlock()
}

// end writes one child span per stage (name "kvroute.<stage>", in start order) under ctx's span
// with the decision's attributes, and sets the same attributes on the request's span. res is nil
// when routing failed with err (a client error: its code is the `kvroute.error` attribute and the
// span status is Error). nil-safe.
func (ss *stageSpans) end(ctx context.Context, res *router.Result, err error) {
	if ss == nil {
		return
	}
	var attrs []attribute.KeyValue
	if res != nil {
		attrs = []attribute.KeyValue{
			attribute.String("kvroute.model", res.Model),
			attribute.String("kvroute.worker", res.WorkerID()),
			attribute.Int("kvroute.overlap_blocks", res.OverlapBlocks),
			attribute.Int("kvroute.total_blocks", res.TotalBlocks),
			attribute.String("kvroute.fallback", string(res.Fallback)),
			attribute.Int("kvroute.media_count", res.MediaItems),
		}
	}
	if err != nil {
		attrs = append(attrs, attribute.String("kvroute.error", string(reason.CodeOf(err))))
	}
	ss.mu.Lock()
	stages := ss.stages
	ss.stages = nil
	ss.mu.Unlock()
	sort.SliceStable(stages, func(i, j int) bool { return stages[i].start.Before(stages[j].start) })
	tracer := ss.parent.TracerProvider().Tracer(tracerName)
	for _, st := range stages {
		_, span := tracer.Start(ctx, "kvroute."+st.name, trace.WithTimestamp(st.start),
			trace.WithAttributes(append([]attribute.KeyValue{attribute.String("kvroute.stage", st.name)}, attrs...)...))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End(trace.WithTimestamp(st.start.Add(st.d)))
	}
	ss.parent.SetAttributes(attrs...)
}
