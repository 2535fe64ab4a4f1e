package caddymodule

import "github.com/kvroute/kvroute/kvevents/registry"

// otherModel is the `model` label of decisions whose model no worker declares.
const otherModel = "other"

// modelLabel bounds the `model` label of caddy_kvroute_decisions_total: the request's `model` comes
// from the client body, so only a model that a worker (static or registered) declares is used as
// the label; a request for a LoRA adapter a worker lists counts under that worker's model; any other
// non-empty value becomes "other", and an absent model stays "". The label set is then at most the
// operator's models plus two, whatever clients send and however many adapters workers list.
func modelLabel(model string, workers []registry.Worker) string {
	if model == "" {
		return ""
	}
	for i := range workers {
		if workers[i].Model == model {
			return model
		}
	}
	for i := range workers {
		if _, ok := workers[i].Adapter(model); ok {
			return workers[i].Model // a LoRA adapter counts under its worker's model, not its own name
		}
	}
	return otherModel
}
