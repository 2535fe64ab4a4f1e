package jinja_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/jinja"
)

// TestCorpusMemoMatchesRender runs README changes 4 and 5 over upstream's corpus (every chat
// template in testdata/templates against every request in testdata/requests, with upstream's
// render data, buildRenderData): a conversation grows one message per render, its messages are
// the same keyed shared values in every render (as routing/chat passes them), and each render,
// as RenderValues and as RenderPieces, must equal a plain Render of fresh values, error for
// error. Upstream's own tests call only Render, which never records or replays.
func TestCorpusMemoMatchesRender(t *testing.T) {
	requests := loadRequests(t)
	var replayedPieces, renders int
	replaysBefore, _ := jinja.MemoCounts()
	for _, templateName := range sortedTemplateNames() {
		tmpl, err := jinja.Compile(chatTemplates[templateName])
		if err != nil {
			t.Fatalf("%s: compile: %v", templateName, err)
		}
		for _, reqName := range sortedKeys(requests) {
			req := requests[reqName]
			msgs, _ := req["messages"].([]any)
			keyed := make([]jinja.Value, len(msgs))
			for i, m := range msgs {
				keyed[i] = jinja.ShareKeyed(jinja.FromGoValue(m), 1<<20, false)
			}
			for n := 1; n <= len(msgs); n++ {
				data := buildRenderData(req)
				if byTemplate, ok := req["chat_template_kwargs"].(map[string]any); ok {
					if kwargs, ok := byTemplate[templateName].(map[string]any); ok {
						maps.Copy(data, kwargs)
					}
				}
				data["messages"] = msgs[:n]
				want, wantErr := tmpl.Render(data)

				values := make(map[string]jinja.Value, len(data))
				for k, v := range data {
					values[k] = jinja.FromGoValue(v)
				}
				values["messages"] = jinja.NewList(append([]jinja.Value(nil), keyed[:n]...))
				got, gotErr := tmpl.RenderValues(values)
				pieces, piecesErr := tmpl.RenderPieces(values, 0)
				var joined strings.Builder
				for _, p := range pieces {
					joined.WriteString(p.Text)
					if p.Replayed {
						replayedPieces++
					}
				}
				renders++
				where := templateName + "/" + reqName
				if errString(gotErr) != errString(wantErr) || errString(piecesErr) != errString(wantErr) {
					t.Fatalf("%s, %d messages: errors: memo %v, pieces %v, fresh %v", where, n, gotErr, piecesErr, wantErr)
				}
				if wantErr == nil && (got != want || joined.String() != want) {
					t.Fatalf("%s, %d messages: memo render or pieces differ from a fresh render\n%s", where, n, diffSummary(got+"|"+joined.String(), want+"|"+want))
				}
			}
		}
	}
	replaysAfter, _ := jinja.MemoCounts()
	t.Logf("%d renders, %d iterations replayed, %d replayed pieces", renders, replaysAfter-replaysBefore, replayedPieces)
	// The corpus's conversations are 1-14 messages long and most templates loop over them once:
	// without replays this test would check nothing of change 4.
	if replayedPieces == 0 || replaysAfter == replaysBefore {
		t.Fatalf("no iteration was replayed in %d renders", renders)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
