// Package chat parses OpenAI chat requests without losing what the worker will see (member
// order, number text, byte offsets of every media part), converts their messages the way vLLM
// does, renders the model's chat template with Hugging Face semantics, and splices forwarded
// media identities into the body byte for byte (DESIGN.md §1 steps 1, 2 and 6).
//
// A text chat renders to a Prompt (RenderPrompt): internal/jinja's pieces as they are, each turn
// the template cache replayed a piece with its jinja.Note. The same pieces go to the tokenizer
// (model.Model.EncodePromptRuns): there is one piece type on the path, and nothing is copied
// between packages.
package chat
