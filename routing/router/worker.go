package router

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/kvroute/kvroute/routing/layout"
)

// Worker is one worker as the router sees it: the registry record of DESIGN.md §2.1 without the
// transport details.
type Worker struct {
	ID        string
	Endpoint  string
	Model     string
	Engine    string
	BlockSize int
	DPSize    int
	Features  []string
	// Contract is the worker's raw contract JSON (nil when it publishes none).
	Contract json.RawMessage
	// Adapters are the LoRA adapters the worker serves, sorted by Name (adapter.go).
	Adapters []Adapter
}

func (w *Worker) hasFeature(f string) bool {
	for _, x := range w.Features {
		if x == f {
			return true
		}
	}
	return false
}

// workersFor returns the workers that serve model: those whose Model equals it, or every worker
// when none does (then matched is false: the request names a model no record declares, or none).
func workersFor(all []Worker, model string) (ws []Worker, matched bool) {
	for _, w := range all {
		if w.Model == model {
			ws = append(ws, w)
		}
	}
	matched = len(ws) > 0
	if !matched {
		ws = append(ws, all...)
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].ID < ws[j].ID })
	return ws, matched
}

// cohortKey identifies one set of workers with their contracts, so the cohort rule runs again
// only when the registry changed.
func cohortKey(ws []Worker) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString(w.ID)
		b.WriteByte(0)
		b.WriteString(w.Engine)
		b.WriteByte(0)
		b.WriteString(strings.Join(w.Features, ","))
		b.WriteByte(0)
		b.Write(w.Contract)
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(w.BlockSize))
		b.WriteByte(1)
	}
	return b.String()
}

// members converts workers to the cohort rule's input; a contract that does not parse counts as
// present but unsupported.
func members(ws []Worker) ([]layout.Member, error) {
	out := make([]layout.Member, 0, len(ws))
	for _, w := range ws {
		m := layout.Member{WorkerID: w.ID, BlockSize: w.BlockSize}
		if len(w.Contract) > 0 && string(w.Contract) != "null" {
			c, err := layout.ParseContract(w.Contract)
			if err != nil {
				return nil, &contractParseError{worker: w.ID, err: err}
			}
			m.Contract = c
		}
		out = append(out, m)
	}
	return out, nil
}

type contractParseError struct {
	worker string
	err    error
}

func (e *contractParseError) Error() string { return "worker " + e.worker + ": " + e.err.Error() }
func (e *contractParseError) Unwrap() error { return e.err }
