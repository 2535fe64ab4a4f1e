package chat

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// readPrompt reads a /v1/completions prompt in the forms vLLM's CompletionRequest accepts
// (vllm/entrypoints/openai/protocol.py: str | list[int] | list[str] | list[list[int]]): a string,
// token ids, or a batch of one of either, which the worker serves as that one prompt. A batch of
// several prompts, an empty one, or ids that are not integers in [0, 2^32) are errors.
func (r *Request) readPrompt(v *node) error {
	switch v.kind {
	case kindString:
		r.Prompt = v.str
		return nil
	case kindArray:
	default:
		return fmt.Errorf("prompt is %s, not a string or a list", v.kind)
	}
	if len(v.items) == 0 {
		return errors.New("prompt is an empty list")
	}
	switch first := v.items[0]; first.kind {
	case kindNumber:
		ids, err := tokenIDs(v)
		if err != nil {
			return fmt.Errorf("prompt: %w", err)
		}
		r.PromptIDs = ids
		return nil
	case kindString, kindArray:
		if len(v.items) > 1 {
			return fmt.Errorf("prompt is a batch of %d prompts; one request is routed by one prompt", len(v.items))
		}
		if first.kind == kindString {
			r.Prompt = first.str
			return nil
		}
		if len(first.items) == 0 {
			return errors.New("prompt[0] is an empty list")
		}
		ids, err := tokenIDs(first)
		if err != nil {
			return fmt.Errorf("prompt[0]: %w", err)
		}
		r.PromptIDs = ids
		return nil
	default:
		return fmt.Errorf("prompt[0] is %s, not a token id, string or list", first.kind)
	}
}

// tokenIDs returns the elements of a JSON array as token ids: integers in [0, 2^32), written
// without a fraction or exponent (pydantic's int rejects 1.5; 1.0 and 1e3 are not ids either).
func tokenIDs(v *node) ([]uint32, error) {
	ids := make([]uint32, len(v.items))
	for i, it := range v.items {
		if it.kind != kindNumber {
			return nil, fmt.Errorf("element %d is %s, not a token id", i, it.kind)
		}
		n, err := strconv.ParseUint(it.str, 10, 64)
		if err != nil || n > math.MaxUint32 {
			return nil, fmt.Errorf("element %d (%s) is not a token id", i, it.str)
		}
		ids[i] = uint32(n)
	}
	return ids, nil
}
