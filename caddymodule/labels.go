package caddymodule

import "github.com/kvroute/kvroute/kvevents/registry"

// otherModel is the `model` label of decisions whose model no worker declares.
const otherModel = "other"

// modelLabel bounds the `model` label of caddy_kvroute_decisions_total: the request's `model` comes
// from the client body, so only a model that a worker (static or registered) declares is used as
// the label; any other non-empty value becomes "other", and an absent model stays "". The label set
// is then at most the operator's models plus two, whatever clients send.
func modelLabel(model string, workers []registry.Worker) string {
	if model == "" {
		return ""
	}
	for i := range workers {
		if workers[i].Model == model {
			return model
		}
	}
	return otherModel
}
