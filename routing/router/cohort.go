package router

import (
	"sort"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/layout"
)

// cohortState caches the cohort rule's outcome for one model until its workers change.
type cohortState struct {
	key     string
	cohort  layout.Cohort
	adapter layout.Adapter
	err     error // a *reason.Error when exact video routing is off
}

// cohortFor evaluates the cohort rule of DESIGN.md §2.3 for the workers of model, reusing the last
// outcome while the workers (and their contracts) are unchanged.
func (r *Router) cohortFor(model string, workers []Worker) *cohortState {
	key := cohortKey(workers)
	r.mu.Lock()
	cs := r.cohorts[model]
	r.mu.Unlock()
	if cs != nil && cs.key == key {
		return cs
	}
	cs = r.evalCohort(workers)
	cs.key = key
	r.mu.Lock()
	prev := r.cohorts[model]
	r.cohorts[model] = cs
	r.mu.Unlock()
	if cs.err == nil && (prev == nil || prev.err != nil || prev.cohort.Digest != cs.cohort.Digest) {
		r.log.Debug("video routing processor available", zap.String("model", model),
			zap.String("contract_digest", cs.cohort.Digest), zap.Int("workers", len(workers)))
	} else if cs.err != nil && (prev == nil || prev.err == nil || prev.err.Error() != cs.err.Error()) {
		r.log.Info("exact video routing off", zap.String("model", model), zap.Error(cs.err))
	}
	return cs
}

func (r *Router) evalCohort(workers []Worker) *cohortState {
	if r.lmodel == nil {
		return &cohortState{err: reason.New(reason.NoMediaSupport, "the model folder has no vision processor")}
	}
	ms, err := members(workers)
	if err != nil {
		return &cohortState{err: reason.Wrap(reason.ContractUnsupported, err, "a worker's contract does not parse")}
	}
	c, err := layout.Agree(ms, r.model.TokenIDs)
	if err != nil {
		if reason.CodeOf(err) == "" {
			err = reason.Wrap(reason.ContractUnsupported, err, "evaluating the cohort")
		}
		return &cohortState{cohort: c, err: err}
	}
	a, err := layout.NewAdapter(c.Contract, r.lmodel, r.model.Tokenizer)
	if err != nil {
		return &cohortState{cohort: c, err: reason.Wrap(reason.ContractUnsupported, err, "the adapter does not support the contract")}
	}
	return &cohortState{cohort: c, adapter: a}
}

// Agreement is the contract agreement of one model's workers, for the admin API and the
// caddy_kvroute_contract_agreement metric.
type Agreement struct {
	Model  string
	Agreed bool
	// Digest is the agreed contract's digest ("" without agreement).
	Digest string
	// Reason is the reason code when exact video routing is off.
	Reason reason.Code
	// Detail says why, for people.
	Detail string
	// LayoutMismatch is set when run-time verification turned exact video routing off.
	LayoutMismatch bool
}

// Agreements evaluates the cohort rule for every model of workers, sorted by model.
func (r *Router) Agreements(workers []Worker) []Agreement {
	r.verify.setWorkers(workers)
	byModel := map[string]bool{}
	for _, w := range workers {
		byModel[w.Model] = true
	}
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	sort.Strings(models)
	out := make([]Agreement, 0, len(models))
	for _, m := range models {
		ws, _ := workersFor(workers, m)
		cs := r.cohortFor(m, ws)
		a := Agreement{Model: m, Agreed: cs.err == nil, Digest: cs.cohort.Digest}
		if cs.err != nil {
			a.Reason, a.Detail = reason.CodeOf(cs.err), cs.err.Error()
		}
		if a.Agreed && r.verify.mismatched(m, a.Digest) {
			a.Agreed, a.LayoutMismatch, a.Reason = false, true, reason.LayoutMismatch
		}
		out = append(out, a)
	}
	return out
}

// ContractDigest returns the digest of a worker's raw contract, "" when it has none or it does
// not parse.
func ContractDigest(raw []byte) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	c, err := layout.ParseContract(raw)
	if err != nil {
		return ""
	}
	d, err := c.Digest()
	if err != nil {
		return ""
	}
	return d
}
