package caddymodule

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestWarnIgnoredEmbedded: an embedded_nats block beside nats_url is logged as having no effect
// (once, at warn level); either one alone logs nothing.
func TestWarnIgnoredEmbedded(t *testing.T) {
	for name, tc := range map[string]struct {
		natsURL  string
		embedded *EmbeddedNATS
		want     int
	}{
		"both":          {"nats://n1:4222", &EmbeddedNATS{Port: 4222}, 1},
		"nats_url only": {"nats://n1:4222", nil, 0},
		"embedded only": {"", &EmbeddedNATS{Port: 4222}, 0},
	} {
		core, logs := observer.New(zapcore.WarnLevel)
		a := &App{NATSURL: tc.natsURL, EmbeddedNATS: tc.embedded}
		a.warnIgnoredEmbedded(zap.New(core))
		if got := logs.FilterMessageSnippet("embedded_nats has no effect").Len(); got != tc.want || logs.Len() != tc.want {
			t.Errorf("%s: %d warnings (%d logs), want %d", name, got, logs.Len(), tc.want)
		}
	}
}
