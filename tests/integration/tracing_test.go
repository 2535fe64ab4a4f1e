package integration

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kvroute/kvroute/internal/testkit/wait"
)

// spanExporter receives the spans of Caddy's tracing module: autoexport (which the module uses)
// picks it by name from OTEL_TRACES_EXPORTER.
var (
	spanExporter     = tracetest.NewInMemoryExporter()
	registerExporter sync.Once
)

const exporterName = "kvroute-test-memory"

// attrs returns a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// TestTracingStageSpans checks tracing through Caddy with the `tracing` directive (issue 15):
// every routing stage of a video request (parse, template, tokenize, fetch, decode, layout, hash,
// index, score) is a child span of the request's span, inside its time, with the decision's
// attributes; a text request has the text stages only.
func TestTracingStageSpans(t *testing.T) {
	registerExporter.Do(func() {
		autoexport.RegisterSpanExporter(exporterName, func(context.Context) (sdktrace.SpanExporter, error) { return spanExporter, nil })
	})
	t.Setenv("OTEL_TRACES_EXPORTER", exporterName)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // ms: the batcher exports quickly
	spanExporter.Reset()
	h := startHarness(t, []simSpec{{ID: "trace-a", Model: "qwen"}, {ID: "trace-b", Model: "qwen"}},
		harnessOpts{siteDirectives: "\ttracing {\n\t\tspan kvroute-test\n\t}"})

	check := func(t *testing.T, body []byte, wantStages []string, mediaCount int64) {
		t.Helper()
		a := h.chat(t, body).mustOK(t)
		reqID := a.header.Get("X-Request-Id")
		var req sdktrace.ReadOnlySpan
		var stages []sdktrace.ReadOnlySpan
		wait.For(t, "request and stage spans exported", func() bool {
			req, stages = nil, nil
			spans := spanExporter.GetSpans().Snapshots()
			for _, s := range spans {
				if s.Name() == "kvroute-test" && attrs(s)["kvroute.model"].AsString() != "" && attrs(s)["kvroute.total_blocks"].AsInt64() == int64(a.total) &&
					attrs(s)["kvroute.worker"].AsString() == a.worker {
					req = s
				}
			}
			if req == nil {
				return false
			}
			for _, s := range spans {
				if s.Parent().SpanID() == req.SpanContext().SpanID() && strings.HasPrefix(s.Name(), "kvroute.") {
					stages = append(stages, s)
				}
			}
			return len(stages) >= len(wantStages)
		})
		var names []string
		for _, s := range stages {
			at := attrs(s)
			names = append(names, at["kvroute.stage"].AsString())
			if s.Name() != "kvroute."+at["kvroute.stage"].AsString() || s.SpanContext().TraceID() != req.SpanContext().TraceID() {
				t.Errorf("span %s: stage %q, trace %s (request %s)", s.Name(), at["kvroute.stage"].AsString(), s.SpanContext().TraceID(), req.SpanContext().TraceID())
			}
			if s.StartTime().Before(req.StartTime()) || s.EndTime().After(req.EndTime()) || s.EndTime().Before(s.StartTime()) {
				t.Errorf("span %s [%s, %s] outside the request's [%s, %s]", s.Name(), s.StartTime(), s.EndTime(), req.StartTime(), req.EndTime())
			}
			if at["kvroute.model"].AsString() != "qwen" || at["kvroute.worker"].AsString() != a.worker ||
				at["kvroute.overlap_blocks"].AsInt64() != int64(a.overlap) || at["kvroute.total_blocks"].AsInt64() != int64(a.total) ||
				at["kvroute.fallback"].AsString() != a.fallback || at["kvroute.media_count"].AsInt64() != mediaCount {
				t.Errorf("span %s attributes %v; want model qwen, worker %s, overlap %d/%d, fallback %q, media %d (request %s)",
					s.Name(), s.Attributes(), a.worker, a.overlap, a.total, a.fallback, mediaCount, reqID)
			}
		}
		got := append([]string(nil), names...)
		sort.Strings(got)
		want := append([]string(nil), wantStages...)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("stage spans %v, want %v", names, wantStages)
		}
		t.Logf("%d stage spans under %s: %v (worker %s, %d/%d blocks)", len(stages), req.Name(), names, a.worker, a.overlap, a.total)
	}

	t.Run("video", func(t *testing.T) {
		body := mediaBody(t, "qwen", videoPart(h.media+"/a/vp9_640x360_30fps_10s.webm"), textPart("Describe this video in "+strconv.Itoa(3)+" words."))
		check(t, body, []string{"parse", "template", "tokenize", "fetch", "decode", "layout", "hash", "index", "score"}, 1)
	})
	t.Run("text", func(t *testing.T) {
		check(t, textBody(t, "qwen", longText("Traced text.", 100)), []string{"parse", "template", "tokenize", "hash", "index", "score"}, 0)
	})
	t.Run("non-routed path has no stage spans", func(t *testing.T) {
		n := len(spanExporter.GetSpans())
		res, err := h.client.Get(h.base + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/models: %d", res.StatusCode)
		}
		wait.For(t, "request span exported", func() bool { return len(spanExporter.GetSpans()) > n })
		for _, s := range spanExporter.GetSpans().Snapshots()[n:] {
			if strings.HasPrefix(s.Name(), "kvroute.") {
				t.Errorf("stage span %s for a non-routed path", s.Name())
			}
		}
	})
}
