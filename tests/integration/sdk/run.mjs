// Runs the npm OpenAI and Anthropic clients against kvroute's TLS edge (tests/integration/sdk_test.go).
// Usage: node run.mjs BASE_URL   (NODE_EXTRA_CA_CERTS points at Caddy's local CA root)
// Prints one JSON object with what each call returned.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const base = process.argv[2];
const openai = new OpenAI({ baseURL: base + "/v1", apiKey: "test", maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: "test", maxRetries: 0 });
const tools = [{ type: "function", name: "read_file", description: "Read a file.",
  parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] }, strict: false }];
const out = {};

const r1 = await openai.responses.create({ model: "qwen", instructions: "You are a coding agent.", input: "List the files.", tools });
out.responses = { id: r1.id, text: r1.output_text, cached: r1.usage.input_tokens_details.cached_tokens };

let streamed = "", completed = null, events = 0;
const stream = await openai.responses.create({ model: "qwen", instructions: "You are a coding agent.", previous_response_id: r1.id, input: "Now read main.go.", tools, stream: true });
for await (const ev of stream) {
  events++;
  if (ev.type === "response.output_text.delta") streamed += ev.delta;
  if (ev.type === "response.completed") completed = ev.response;
}
out.responses_stream = { text: streamed, events, id: completed && completed.id, cached: completed && completed.usage.input_tokens_details.cached_tokens };
out.responses_get = (await openai.responses.retrieve(completed.id)).id;

const m1 = await anthropic.messages.create({ model: "qwen", max_tokens: 8, system: "You are a coding agent.",
  messages: [{ role: "user", content: "List the files." }] });
out.messages = { text: m1.content[0].text, cache_read: m1.usage.cache_read_input_tokens };
const ms = anthropic.messages.stream({ model: "qwen", max_tokens: 8, system: "You are a coding agent.",
  messages: [{ role: "user", content: "List the files." }] });
let mtext = "";
ms.on("text", (t) => { mtext += t; });
const final = await ms.finalMessage();
out.messages_stream = { text: mtext, final: final.content[0].text, cache_read: final.usage.cache_read_input_tokens };
// An error kvroute answers itself (an image URL on loopback: media_url_blocked, 400) reaches the
// Anthropic client in Anthropic's error shape, the reason code kept beside its type.
try {
  await anthropic.messages.create({ model: "qwen", max_tokens: 8, messages: [{ role: "user", content: [
    { type: "image", source: { type: "url", url: "http://127.0.0.1:9/picture.png" } },
    { type: "text", text: "Describe it." }] }] });
  out.messages_error = { status: 0 };
} catch (e) {
  out.messages_error = { status: e.status, class: e.constructor.name, type: e.error && e.error.type,
    error_type: e.error && e.error.error && e.error.error.type, code: e.error && e.error.error && e.error.error.code };
}
// The OpenAI client gets the OpenAI form for the same error.
try {
  await openai.responses.create({ model: "qwen", input: [{ role: "user", content: [
    { type: "input_image", image_url: "http://127.0.0.1:9/picture.png", detail: "auto" },
    { type: "input_text", text: "Describe it." }] }] });
  out.responses_error = { status: 0 };
} catch (e) {
  out.responses_error = { status: e.status, class: e.constructor.name, code: e.code, type: e.error && e.error.type };
}
console.log(JSON.stringify(out));
