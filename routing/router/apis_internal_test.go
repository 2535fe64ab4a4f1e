package router

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/apis"
)

// TestAPIGoldenHashes routes every golden Anthropic and Responses request (testdata/golden/apis)
// on its own path and the chat form vLLM builds from it on /v1/chat/completions, and asserts the
// same block hashes (block size 4 over the Qwen3-VL test model's template); an error vector is
// routed on load alone with api_request_invalid. Vectors with a server-dependent variant are
// routed under both settings. Each setting is routed three times: with the full conversion, then
// twice with a conversion cache shared by all vectors (cold, warm).
func TestAPIGoldenHashes(t *testing.T) {
	type vec struct {
		ID       string          `json:"id"`
		Input    json.RawMessage `json:"input"`
		Expected json.RawMessage `json:"expected"`
		Fold     json.RawMessage `json:"expected_fold"`
		Low      json.RawMessage `json:"expected_if_disabled_effort_low"`
	}
	ws := testWorkers()
	for i := range ws {
		ws[i].Model, ws[i].BlockSize = "test-model", 4
	}
	compared, errs, media, fellBack := 0, 0, 0, 0
	conv := apis.NewConverter(64 << 20) // one for all vectors: their items recur across vectors
	for _, c := range []struct {
		file, path string
	}{{"anthropic_to_chat.jsonl", "/v1/messages"}, {"responses_to_chat.jsonl", "/v1/responses"}} {
		for _, l := range goldens.Lines(t, "../../testdata/golden/apis/"+c.file) {
			var v vec
			if err := json.Unmarshal(l, &v); err != nil {
				t.Fatal(err)
			}
			exp, err := apis.Parse(v.Expected)
			if err != nil {
				t.Fatal(err)
			}
			settings := []struct {
				opt  apis.Options
				want json.RawMessage
			}{{apis.Options{}, v.Expected}}
			if v.Fold != nil {
				settings = append(settings, struct {
					opt  apis.Options
					want json.RawMessage
				}{apis.Options{Anthropic: apis.AnthropicOptions{InlineSystem: "fold"}}, v.Fold})
			}
			if v.Low != nil {
				settings = append(settings, struct {
					opt  apis.Options
					want json.RawMessage
				}{apis.Options{Anthropic: apis.AnthropicOptions{DisabledThinkingEffort: "low"}}, v.Low})
			}
			for pass, s := range passes(settings) {
				r := newTestRouter(t, &fakeMedia{})
				r.cfg.APIs = s.opt
				if pass >= len(settings) {
					// the conversion cache (apis.Converter) as Caddy runs it: cold, then warm
					r.convOnce.Do(func() { r.conv = conv })
				}
				var got [][]kv.BlockHash
				r.onHashes = func(h []kv.BlockHash) { got = append(got, slices.Clone(h)) }
				res, err := r.Route(context.Background(), &Input{Path: c.path, Body: v.Input, Workers: ws})
				if err != nil {
					t.Fatalf("%s: %v", v.ID, err)
				}
				if string(res.Body) != string(v.Input) {
					t.Fatalf("%s: the forwarded body differs from the client's", v.ID)
				}
				if exp.Get("error") != nil {
					if res.Fallback != reason.APIRequestInvalid || len(got) != 1 || len(got[0]) != 0 {
						t.Errorf("%s: fallback %q (%s), hashes %v; want api_request_invalid on load alone", v.ID, res.Fallback, res.Detail, got)
					}
					errs++
					continue
				}
				want, err := apis.Parse(s.want)
				if err != nil {
					t.Fatal(err)
				}
				chatBody := apis.FormFromExpected("test-model", want).Body()
				cres, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Body: chatBody, Workers: ws})
				if err != nil {
					t.Fatalf("%s chat form: %v", v.ID, err)
				}
				if len(got) != 2 {
					t.Fatalf("%s: %d hash lists (fallbacks %q %q: %s / %s)", v.ID, len(got), res.Fallback, cres.Fallback, res.Detail, cres.Detail)
				}
				if strings.Contains(string(chatBody), "image_url") || strings.Contains(string(chatBody), "input_image") {
					// media: the API request routes on its text prefix (api_media_unkeyed); the
					// prefix is the chat form's up to its first media item
					if res.Fallback != reason.APIMediaUnkeyed {
						t.Errorf("%s: fallback %q, want api_media_unkeyed", v.ID, res.Fallback)
					}
					if len(got[0]) > len(got[1]) || !slices.Equal(got[0], got[1][:len(got[0])]) {
						t.Errorf("%s: the text-prefix hashes are not a prefix of the chat form's", v.ID)
					}
					media++
					continue
				}
				if res.Fallback != cres.Fallback {
					t.Errorf("%s: fallbacks %q (%s), %q (%s)", v.ID, res.Fallback, res.Detail, cres.Fallback, cres.Detail)
				}
				if res.Fallback != "" {
					// the same refusal on both paths (resp-053: a reasoning-only final message
					// cannot be continued by the chat renderer)
					fellBack++
				} else if len(got[0]) == 0 && v.ID != "resp-005" { // resp-005: no messages at all
					t.Errorf("%s: no complete block", v.ID)
				}
				if !slices.Equal(got[0], got[1]) {
					t.Errorf("%s: %d hashes via the API, %d via the chat form; they differ", v.ID, len(got[0]), len(got[1]))
				}
				compared++
			}
		}
	}
	if st := conv.Stats(); st.Hits == 0 || st.Misses == 0 {
		t.Fatalf("the conversion cache was not used: %+v", st)
	}
	if compared < 3*170 || errs < 3*19 || media < 3*10 || fellBack > 3*3 {
		t.Fatalf("compared %d (%d of them fell back alike), %d errors, %d with media: fewer than the golden files hold", compared, fellBack, errs, media)
	}
}

// passes repeats the settings three times: the first for the full conversion, the others for
// the cached one.
func passes[S any](settings []S) []S {
	return append(append(append([]S{}, settings...), settings...), settings...)
}
