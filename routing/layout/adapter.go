package layout

import "fmt"

// Adapter is a model adapter for one agreed contract (DESIGN.md §4): it expands a rendered prompt
// into the worker-visible tokens and media spans. *Qwen3VL and *NemotronOmni implement it.
type Adapter interface {
	// Contract returns the adapter's contract.
	Contract() *Contract
	// Expand and ExpandEncoded expand the prompt (ExpandEncoded with its known token ids) for the
	// media items in prompt order; errors are *reason.Error.
	Expand(prompt string, media []Media) (*Expansion, error)
	ExpandEncoded(prompt string, ids []uint32, media []Media) (*Expansion, error)
}

// NewAdapter returns the adapter the contract's adapter field names: NewQwen3VL for qwen3_vl,
// NewNemotronOmni for nemotron_omni. Errors wrap ErrInvalidContract for contract problems.
func NewAdapter(c *Contract, m *Model, tok Tokenizer) (Adapter, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: no contract", ErrInvalidContract)
	}
	if c.Adapter == AdapterNemotronOmni {
		return NewNemotronOmni(c, m, tok)
	}
	return NewQwen3VL(c, m, tok)
}
