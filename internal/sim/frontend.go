package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/mediaresolver"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/router"
)

// DefaultModelDir is the model folder kvroute-sim loads by default, relative to the repository
// root.
const DefaultModelDir = "testdata/golden/qwen3vl-test-model"

// HubContract is the default video contract (DESIGN.md §2.3): current vLLM with the Hugging Face
// hub processor settings of Qwen3-VL.
const HubContract = layout.HubContractJSON

// maxKnownItems bounds the media items remembered for uuid-only parts.
const maxKnownItems = 4096

// FrontendConfig configures a Frontend.
type FrontendConfig struct {
	// ModelDir is the Hugging Face model folder (tokenizer.json, chat template, config.json,
	// processor configs). Default: DefaultModelDir.
	ModelDir string
	// Model and LayoutModel, when set, are used instead of loading ModelDir (tests share them).
	Model       *model.Model
	LayoutModel *layout.Model
	// Contract is the worker's video contract (JSON); its sampler, resize and layout rules are the
	// ones the simulator applies to its own decodes. Default: HubContract, or
	// layout.NemotronContractJSON for a Nemotron 3 Nano Omni model folder.
	Contract []byte
	// Media fetches and decodes media parts. Default: routing/mediaresolver over a fetcher built from
	// Fetch and a decoder with the DESIGN.md §6 defaults.
	Media router.Media
	// Fetch configures the default fetcher. Default: fetch.DefaultConfig with loopback and private
	// addresses allowed (a stand-in worker fetches what its test serves it).
	Fetch *fetch.Config
	// OracleTokens, when set, are the worker-visible prompt tokens of every request (oracle mode):
	// the prompt is not rendered or expanded; the media spans are read from the placeholder runs of
	// these tokens and the identities from the request's uuids (or the simulator's own decode).
	OracleTokens []uint32
	// MaxMedia caps the media items of a request. Default: 32.
	MaxMedia int
	// Codecs are the video codecs the default decoder decodes (av1, h264, hevc, vp8, vp9): a
	// vLLM worker decodes whatever its PyAV/FFmpeg has, so a simulator standing in for one is
	// told which. Default: vp8 and vp9 (media.DefaultCodecs). Unused when Media is set.
	Codecs []string
}

// Frontend turns a chat request into the worker-visible prompt the way a vLLM worker does: it
// renders the chat template and tokenizes, fetches and decodes each media part itself with its own
// contract, takes a client uuid verbatim as the item's identifier (otherwise its own content
// identity in kvroute's forwarded form), and expands the placeholders with the contract's adapter
// (Qwen3-VL, or Nemotron 3 Nano Omni for a nemotron_omni contract: one video per request, no images).
// Nothing the router computed is used except the uuids it spliced into the body. It is safe for
// concurrent use.
type Frontend struct {
	model       *model.Model
	adapter     *layout.Qwen3VL      // nil: the model has no vision processor, or the contract is nemotron_omni
	nemotron    *layout.NemotronOmni // set for a nemotron_omni contract
	expander    layout.Adapter       // adapter or nemotron; nil without a vision processor
	contract    *layout.Contract
	contractRaw json.RawMessage
	media       router.Media
	oracle      []uint32
	maxMedia    int

	// mu protects known and knownOrder.
	mu         sync.Mutex
	known      map[string]layout.Media // identifier → the item's layout, for uuid-only parts
	knownOrder []string
}

// NewFrontend loads the model and contract; cfg may be nil.
func NewFrontend(cfg *FrontendConfig) (*Frontend, error) {
	c := FrontendConfig{}
	if cfg != nil {
		c = *cfg
	}
	if c.ModelDir == "" {
		c.ModelDir = DefaultModelDir
	}
	if c.MaxMedia <= 0 {
		c.MaxMedia = router.DefaultMaxMedia
	}
	f := &Frontend{model: c.Model, media: c.Media, oracle: c.OracleTokens, maxMedia: c.MaxMedia, known: map[string]layout.Media{}}
	var err error
	if f.model == nil {
		if f.model, err = model.Load(c.ModelDir); err != nil {
			return nil, fmt.Errorf("creating simulator frontend: %w", err)
		}
	}
	// A Nemotron folder: one placeholder id for images and video.
	nemotronFolder := f.model.Vision && f.model.TokenIDs.ImagePad == f.model.TokenIDs.VideoPad
	if len(c.Contract) == 0 {
		c.Contract = []byte(HubContract)
		if nemotronFolder {
			c.Contract = []byte(layout.NemotronContractJSON)
		}
	}
	if f.contract, err = layout.ParseContract(c.Contract); err != nil {
		return nil, fmt.Errorf("creating simulator frontend: %w", err)
	}
	if err := f.contract.Validate(); err != nil {
		return nil, fmt.Errorf("creating simulator frontend: %w", err)
	}
	f.contractRaw = json.RawMessage(append([]byte(nil), c.Contract...))
	lm := c.LayoutModel
	nemotron := f.contract.Adapter == layout.AdapterNemotronOmni
	if lm == nil && f.model.Vision {
		// A Nemotron folder has no processor configs: its config.json says everything (and a
		// contract of another adapter is then refused by the adapter's model check).
		if _, err := os.Stat(filepath.Join(c.ModelDir, "preprocessor_config.json")); err == nil || nemotron || nemotronFolder {
			if lm, err = layout.LoadModel(c.ModelDir); err != nil {
				return nil, fmt.Errorf("creating simulator frontend: %w", err)
			}
		}
	}
	switch {
	case lm != nil && nemotron:
		if f.nemotron, err = layout.NewNemotronOmni(f.contract, lm, f.model.Tokenizer); err != nil {
			return nil, fmt.Errorf("creating simulator frontend: %w", err)
		}
		f.expander = f.nemotron
	case lm != nil:
		if f.adapter, err = layout.NewQwen3VL(f.contract, lm, f.model.Tokenizer); err != nil {
			return nil, fmt.Errorf("creating simulator frontend: %w", err)
		}
		f.expander = f.adapter
	}
	if f.media == nil {
		fc := c.Fetch
		if fc == nil {
			fc = fetch.DefaultConfig()
			fc.AllowLoopback, fc.AllowPrivate = true, true
		}
		fe, err := fetch.New(fc)
		if err != nil {
			return nil, fmt.Errorf("creating simulator frontend: %w", err)
		}
		dec, err := media.NewDecoder(&media.DecoderConfig{Codecs: c.Codecs})
		if err != nil {
			return nil, fmt.Errorf("creating simulator frontend: %w", err)
		}
		res := mediaresolver.New(fe, dec)
		res.Codecs = c.Codecs
		f.media = res
	}
	return f, nil
}

// Model returns the loaded model.
func (f *Frontend) Model() *model.Model { return f.model }

// ContractJSON returns the contract document the simulator applies (for its registry record), or
// nil when the model has no vision processor.
func (f *Frontend) ContractJSON() json.RawMessage {
	if f.expander == nil {
		return nil
	}
	return f.contractRaw
}

// Contract returns the parsed contract.
func (f *Frontend) Contract() *layout.Contract { return f.contract }

// errRequest marks errors about the request itself (answered with 400).
var errRequest = errors.New("invalid request")

// Prepare parses a chat (or completions) request body and returns the prompt the worker computes.
// Errors about the request (unparseable body, template failure, media that cannot be fetched or
// decoded, placeholders that do not match the media) wrap errRequest and carry a reason code when
// one applies.
func (f *Frontend) Prepare(ctx context.Context, body []byte) (*Prompt, error) {
	req, err := chat.ParseRequest(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errRequest, err)
	}
	if req.SchemaErr != nil {
		return nil, fmt.Errorf("%w: %w", errRequest, req.SchemaErr)
	}
	if req.HasAudio {
		return nil, fmt.Errorf("%w: audio parts are not supported by the simulator", errRequest)
	}
	if len(req.Media) > f.maxMedia {
		return nil, fmt.Errorf("%w: %w", errRequest, reason.New(reason.TooManyMedia, "%d media items, at most %d", len(req.Media), f.maxMedia))
	}
	if len(req.Media) > 0 && f.expander == nil {
		return nil, fmt.Errorf("%w: the model has no vision processor", errRequest)
	}
	var kwargs []byte
	if req.MMProcessorKwargs {
		var probe struct {
			K json.RawMessage `json:"mm_processor_kwargs"`
		}
		_ = json.Unmarshal(body, &probe)
		kwargs = probe.K
	}
	items := make([]item, len(req.Media))
	for i, p := range req.Media {
		if items[i], err = f.resolve(ctx, p, kwargs, f.oracle == nil); err != nil {
			if reason.CodeOf(err) == reason.UnsupportedCodec && f.oracle == nil {
				// vLLM's loader decodes codecs kvroute's decoder does not (H.264, …); the
				// simulator cannot lay such a clip out, so it serves the prompt with the
				// placeholders unexpanded and caches no media identity.
				return f.unexpanded(req)
			}
			return nil, fmt.Errorf("%w: media item %d: %w", errRequest, i, err)
		}
	}
	p := &Prompt{CacheSalt: req.CacheSalt, Identifiers: make([]string, len(items))}
	for i, it := range items {
		p.Identifiers[i] = it.identifier
	}
	if f.oracle != nil {
		p.Tokens = f.oracle
		if p.Spans, err = f.oracleSpans(items); err != nil {
			return nil, fmt.Errorf("%w: %w", errRequest, err)
		}
		return p, nil
	}
	prompt, ids, err := f.model.PromptTokens(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errRequest, err)
	}
	if len(items) == 0 {
		p.Tokens = ids
		return p, nil
	}
	ms := make([]layout.Media, len(items))
	for i, it := range items {
		ms[i] = it.media
	}
	exp, err := f.expander.ExpandEncoded(prompt, ids, ms)
	if err != nil {
		return nil, fmt.Errorf("%w: expanding the prompt: %w", errRequest, err)
	}
	p.Tokens, p.Spans = exp.Tokens, exp.Spans
	for i := range items {
		f.remember(items[i].identifier, ms[i])
	}
	return p, nil
}

// unexpanded is the prompt of a request whose media the simulator cannot decode: the template's
// tokens with the placeholders left as they are, no spans and no identifiers.
func (f *Frontend) unexpanded(req *chat.Request) (*Prompt, error) {
	_, ids, err := f.model.PromptTokens(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errRequest, err)
	}
	return &Prompt{CacheSalt: req.CacheSalt, Tokens: ids}, nil
}

// remember keeps an item's layout for later uuid-only parts (vLLM's processor cache).
func (f *Frontend) remember(id string, m layout.Media) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.known[id]; ok {
		return
	}
	f.known[id] = m
	f.knownOrder = append(f.knownOrder, id)
	if len(f.knownOrder) > maxKnownItems {
		delete(f.known, f.knownOrder[0])
		f.knownOrder = f.knownOrder[1:]
	}
}

func (f *Frontend) recall(id string) (layout.Media, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.known[id]
	return m, ok
}
