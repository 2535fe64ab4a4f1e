// Package testkit holds helpers that several packages' tests share: a media resolver for loopback
// test servers, the loaded test model and a request's prompt tokens. Only tests import it.
package testkit

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/mediaresolver"
	"github.com/kvroute/kvroute/routing/model"
)

// LoopbackResolver returns a media resolver whose fetcher may reach loopback test servers, with
// the default decoder; its fetcher is closed when the test ends.
func LoopbackResolver(tb testing.TB) *mediaresolver.Resolver {
	tb.Helper()
	return Resolver(tb, true)
}

// Resolver returns a media resolver with the default fetch policy (loopback servers allowed when
// allowLoopback) and the default decoder; its fetcher is closed when the test ends.
func Resolver(tb testing.TB, allowLoopback bool) *mediaresolver.Resolver {
	tb.Helper()
	return ResolverCodecs(tb, allowLoopback, nil)
}

// ResolverCodecs is Resolver whose decoder (and allow-list) takes the video codecs listed (nil:
// vp8 and vp9).
func ResolverCodecs(tb testing.TB, allowLoopback bool, codecs []string) *mediaresolver.Resolver {
	tb.Helper()
	fc := fetch.DefaultConfig()
	fc.AllowLoopback = allowLoopback
	f, err := fetch.New(fc)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(f.Close)
	d, err := media.NewDecoder(&media.DecoderConfig{Codecs: codecs})
	if err != nil {
		tb.Fatal(err)
	}
	r := mediaresolver.New(f, d)
	r.Codecs = codecs
	return r
}

// models caches Models per model folder: dir → func() (*loadedModels, error).
var models sync.Map

type loadedModels struct {
	model  *model.Model
	layout *layout.Model
}

// Models returns the model folder dir loaded as routing/model (tokenizer, template, token ids)
// and as routing/layout (processor configs), each folder loaded once per test binary; a load
// error fails the test. A text-only folder (no config.json) has no layout model (nil).
func Models(tb testing.TB, dir string) (*model.Model, *layout.Model) {
	tb.Helper()
	load, _ := models.LoadOrStore(dir, sync.OnceValues(func() (*loadedModels, error) {
		m, err := model.Load(dir)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(dir, "config.json")); errors.Is(err, os.ErrNotExist) {
			return &loadedModels{model: m}, nil
		}
		lm, err := layout.LoadModel(dir)
		if err != nil {
			return nil, err
		}
		return &loadedModels{model: m, layout: lm}, nil
	}))
	l, err := load.(func() (*loadedModels, error))()
	if err != nil {
		tb.Fatal(err)
	}
	return l.model, l.layout
}

// Prompt parses body as a chat request and renders and tokenizes its prompt with m (media
// placeholders unexpanded); an error fails the test.
func Prompt(tb testing.TB, m *model.Model, body []byte) (req *chat.Request, prompt string, ids []uint32) {
	tb.Helper()
	req, err := chat.ParseRequest(body)
	if err != nil {
		tb.Fatal(err)
	}
	prompt, ids, err = m.PromptTokens(req)
	if err != nil {
		tb.Fatal(err)
	}
	return req, prompt, ids
}
