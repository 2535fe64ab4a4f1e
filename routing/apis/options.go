package apis

// Options are the worker-side settings of vLLM that change how these APIs' requests become
// prompts; they must match the workers' (docs/configuration.md, `apis`).
type Options struct {
	Anthropic AnthropicOptions
	Responses ResponsesOptions
}
