// Package apis turns the two agent APIs vLLM serves besides chat completions — the Anthropic
// Messages API (POST /v1/messages) and the OpenAI Responses API (POST /v1/responses) — into the
// chat-completions form vLLM builds from them, so the router renders, tokenizes and hashes them
// exactly as a /v1/chat/completions request (DESIGN.md §1.1). The body forwarded to the worker is
// never changed: the conversion only tells the router what prompt the worker will build.
//
// vLLM version followed (vllm-project/vllm; vLLM changes this code often, see testdata/SOURCE.md):
//
//	vllm/entrypoints/anthropic/serving.py        a8c3bdb20f5dd558bbb813e1644b82830e63dcbb
//	vllm/entrypoints/anthropic/inline_system.py  a8c3bdb20f5dd558bbb813e1644b82830e63dcbb
//	vllm/entrypoints/anthropic/protocol.py       a8c3bdb20f5dd558bbb813e1644b82830e63dcbb
//	vllm/entrypoints/openai/responses/utils.py   01ca842df5b1ddd7f91aa376294040d126a453f2
//	vllm/entrypoints/openai/responses/protocol.py 01ca842df5b1ddd7f91aa376294040d126a453f2
//	vllm/entrypoints/openai/responses/serving.py 0001948bc76939369ca855c90b36d81256477e85
//	vllm/tool_parsers/utils.py                   0064cc9cb1ae57b1308015d48a57462fa27a68f2
//
// Files: value.go (order-keeping JSON), pyjson.go (Python's json.dumps and str of JSON values),
// chatform.go (the chat form and the chat body built from it), errors.go (vLLM's rejections),
// anthropic.go, anthropic_system.go (inline system placement), anthropic_validate.go,
// responses.go, responses_tools.go; convert.go and convert_fast.go (Converter: the same
// conversion with a cache of items and messages keyed by their bytes, for the request path),
// scan.go (the body split into its members and its list's elements for the Converter).
package apis
