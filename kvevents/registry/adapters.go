package registry

import (
	"fmt"
	"sort"
	"unicode"
	"unicode/utf8"
)

// MaxAdapters bounds the LoRA adapters one worker record lists. Records come from the network;
// the bound keeps a record's adapter lookups and the router's memory of adapters small whatever a
// publisher writes. vLLM serves at most --max-cpu-loras adapters at once per engine (default
// --max-loras), far below it.
const MaxAdapters = 512

// MaxAdapterNameBytes bounds one adapter name (and its base_model) in bytes.
const MaxAdapterNameBytes = 256

// Adapter is one LoRA adapter a worker serves (DESIGN.md §1.1, §2.1): Name is what clients put in
// a request's `model` field to use it (vLLM's --lora-modules name, the id in its /v1/models) and
// what the engine's KV events carry as `lora_name`; BaseModel is the model it was trained for (the
// `parent` of its /v1/models card), the worker's Model when empty.
type Adapter struct {
	Name      string `json:"name"`
	BaseModel string `json:"base_model,omitempty"`
}

// ValidAdapterName reports whether s is a usable adapter or base model name: 1 to
// MaxAdapterNameBytes bytes of valid UTF-8 without control characters.
func ValidAdapterName(s string) bool {
	if s == "" || len(s) > MaxAdapterNameBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// normalizeAdapters validates w.Adapters, fills an empty base_model with w.Model, drops exact
// duplicates, and sorts them by name (HasAdapter searches them). Two entries of one name with
// different base models are an error: the record cannot say which the adapter is for.
func (w *Worker) normalizeAdapters() error {
	if len(w.Adapters) == 0 {
		w.Adapters = nil
		return nil
	}
	if len(w.Adapters) > MaxAdapters {
		return fmt.Errorf("%w: worker %s: %d adapters exceed %d", ErrInvalidWorker, w.WorkerID, len(w.Adapters), MaxAdapters)
	}
	out := make([]Adapter, 0, len(w.Adapters))
	for _, a := range w.Adapters {
		if a.BaseModel == "" {
			a.BaseModel = w.Model
		}
		if !ValidAdapterName(a.Name) || !ValidAdapterName(a.BaseModel) {
			return fmt.Errorf("%w: worker %s: adapter %.64q (base %.64q): names must be 1 to %d bytes of UTF-8 without control characters",
				ErrInvalidWorker, w.WorkerID, a.Name, a.BaseModel, MaxAdapterNameBytes)
		}
		out = append(out, a)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	n := 0
	for i, a := range out {
		if i > 0 && a.Name == out[n-1].Name {
			if a.BaseModel != out[n-1].BaseModel {
				return fmt.Errorf("%w: worker %s: adapter %q listed for base models %q and %q", ErrInvalidWorker, w.WorkerID, a.Name, out[n-1].BaseModel, a.BaseModel)
			}
			continue
		}
		out[n] = a
		n++
	}
	w.Adapters = out[:n]
	return nil
}

// Adapter returns the adapter of w named name, if w lists it. w.Adapters must be normalized
// (sorted by name: Normalize, Decode).
func (w *Worker) Adapter(name string) (Adapter, bool) {
	return FindAdapter(w.Adapters, name)
}

// FindAdapter returns the adapter named name in as, which is sorted by name (a normalized
// record's Adapters).
func FindAdapter(as []Adapter, name string) (Adapter, bool) {
	i := sort.Search(len(as), func(i int) bool { return as[i].Name >= name })
	if i < len(as) && as[i].Name == name {
		return as[i], true
	}
	return Adapter{}, false
}
