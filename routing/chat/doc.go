// Package chat parses OpenAI chat requests without losing what the worker will see (member
// order, number text, byte offsets of every media part), converts their messages the way vLLM
// does, renders the model's chat template with Hugging Face semantics, and splices forwarded
// media identities into the body byte for byte (DESIGN.md §1 steps 1, 2 and 6).
package chat
