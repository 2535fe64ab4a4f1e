package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/kvroute/kvroute/kvevents/registry"
)

// LoRA adapters served like vLLM's --enable-lora: adapters given with --lora-modules name=path at
// start, loaded and unloaded at run time with POST /v1/load_lora_adapter and
// /v1/unload_lora_adapter (vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True), listed in /v1/models
// with `parent` (vllm/entrypoints/openai/serving_models.py). A request whose model names an
// adapter is served under it: its blocks get the adapter name first in every block's extra_keys
// (vllm/v1/core/kv_cache_utils.py _gen_lora_extra_hash_keys), so they are another chain than the
// base model's and another adapter's, and its BlockStored events carry lora_name and lora_id.

// LoRAModule is one adapter: its served name and the path it was loaded from (reported as the
// model card's root).
type LoRAModule struct {
	Name string
	Path string
}

// ParseLoRAModule parses one --lora-modules value: `name=path`, or vLLM's JSON form
// `{"name": ..., "path": ...}` (base_model_name, if any, must be the served model: the simulator
// serves one base model).
func ParseLoRAModule(s string) (LoRAModule, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "{") {
		var j struct {
			Name, Path    string
			BaseModelName string `json:"base_model_name"`
		}
		if err := json.Unmarshal([]byte(s), &j); err != nil {
			return LoRAModule{}, fmt.Errorf("--lora-modules %q: %w", s, err)
		}
		if j.Name == "" || j.Path == "" {
			return LoRAModule{}, fmt.Errorf("--lora-modules %q: name and path are required", s)
		}
		return LoRAModule{Name: j.Name, Path: j.Path}, nil
	}
	name, path, ok := strings.Cut(s, "=")
	if !ok || name == "" || path == "" {
		return LoRAModule{}, fmt.Errorf("--lora-modules %q: want name=path", s)
	}
	return LoRAModule{Name: name, Path: path}, nil
}

// loras is a worker's adapter table. Each adapter gets vLLM's lora_int_id: 1, 2, … in load order,
// never reused.
type loras struct {
	mu     sync.Mutex
	byName map[string]loraEntry
	order  []string
	nextID int64

	onChange func() // called after a load or unload (the registration updates the record)
}

type loraEntry struct {
	path string
	id   int64
}

func newLoras(mods []LoRAModule) (*loras, error) {
	l := &loras{byName: map[string]loraEntry{}, nextID: 1}
	for _, m := range mods {
		if err := l.load(m); err != nil {
			return nil, err
		}
	}
	return l, nil
}

var errLoRAExists = errors.New("adapter already loaded")

func (l *loras) load(m LoRAModule) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m.Name == "" || len(m.Name) > registry.MaxAdapterNameBytes || len(l.order) >= registry.MaxAdapters {
		return fmt.Errorf("adapter %.64q: empty, longer than %d bytes, or more than %d adapters", m.Name, registry.MaxAdapterNameBytes, registry.MaxAdapters)
	}
	if _, ok := l.byName[m.Name]; ok {
		return fmt.Errorf("%w: %q", errLoRAExists, m.Name)
	}
	l.byName[m.Name] = loraEntry{path: m.Path, id: l.nextID}
	l.order = append(l.order, m.Name)
	l.nextID++
	return nil
}

func (l *loras) unload(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.byName[name]; !ok {
		return false
	}
	delete(l.byName, name)
	for i, n := range l.order {
		if n == name {
			l.order = append(l.order[:i], l.order[i+1:]...)
			break
		}
	}
	return true
}

// lookup returns adapter name's lora_int_id.
func (l *loras) lookup(name string) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.byName[name]
	return e.id, ok
}

// list returns the loaded adapters in load order.
func (l *loras) list() []LoRAModule {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LoRAModule, len(l.order))
	for i, n := range l.order {
		out[i] = LoRAModule{Name: n, Path: l.byName[n].path}
	}
	return out
}

func (l *loras) changed() {
	l.mu.Lock()
	f := l.onChange
	l.mu.Unlock()
	if f != nil {
		f()
	}
}

// Adapters returns the record's adapters: every loaded adapter, of the served model.
func (s *Server) Adapters() []registry.Adapter {
	mods := s.loras.list()
	if len(mods) == 0 {
		return nil
	}
	out := make([]registry.Adapter, len(mods))
	for i, m := range mods {
		out[i] = registry.Adapter{Name: m.Name, BaseModel: s.cfg.Model}
	}
	return out
}

// servedModel resolves a request's model: "" or the served model is the base model (lora ""),
// a loaded adapter's name is that adapter (its name and lora_int_id); anything else is unknown.
func (s *Server) servedModel(model string) (lora string, loraID int64, ok bool) {
	if model == "" || model == s.cfg.Model {
		return "", 0, true
	}
	if id, ok := s.loras.lookup(model); ok {
		return model, id, true
	}
	return "", 0, false
}

// modelCards is the /v1/models list: the base model (parent null), then each adapter with its
// path as root and the base model as parent, as vLLM lists them.
func (s *Server) modelCards() []modelCard {
	cards := []modelCard{{ID: s.cfg.Model, Object: "model", Created: s.started.Unix(), OwnedBy: "kvroute-sim", Root: s.cfg.Model}}
	base := s.cfg.Model
	for _, m := range s.loras.list() {
		cards = append(cards, modelCard{ID: m.Name, Object: "model", Created: s.started.Unix(), OwnedBy: "kvroute-sim", Root: m.Path, Parent: &base})
	}
	return cards
}

// handleLoadLoRA is vLLM's POST /v1/load_lora_adapter {"lora_name", "lora_path"}: 200 with a text
// message, 400 when the adapter is already loaded or the body is not valid.
func (s *Server) handleLoadLoRA(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"lora_name"`
		Path string `json:"lora_path"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil || req.Name == "" || req.Path == "" {
		writeError(w, http.StatusBadRequest, "lora_name and lora_path are required")
		return
	}
	if err := s.loras.load(LoRAModule{Name: req.Name, Path: req.Path}); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.loras.changed()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", req.Name)
}

// handleUnloadLoRA is vLLM's POST /v1/unload_lora_adapter {"lora_name"}: 200, or 404 for an
// adapter that is not loaded. Its cached blocks stay (vLLM does not free them either).
func (s *Server) handleUnloadLoRA(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"lora_name"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil || req.Name == "" {
		writeError(w, http.StatusBadRequest, "lora_name is required")
		return
	}
	if !s.loras.unload(req.Name) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("The lora adapter '%s' cannot be found.", req.Name))
		return
	}
	s.loras.changed()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", req.Name)
}
