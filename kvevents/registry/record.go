package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/kvroute/kvroute/kv"
)

// MaxRecordBytes bounds the size of one encoded worker record read from the bucket. Records come
// from the network and are untrusted.
const MaxRecordBytes = 1 << 20

// ErrInvalidWorker is wrapped by every validation error of a worker record.
var ErrInvalidWorker = errors.New("invalid worker record")

// workerIDPattern is the worker id syntax of DESIGN.md §2.1. It is also a valid NATS KV key and a
// valid NATS subject token.
var workerIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Worker is one worker record (DESIGN.md §2.1). The JSON field names are the wire format of the
// `kvroute_workers` bucket and of the Caddyfile-declared static workers.
type Worker struct {
	// WorkerID identifies the worker: `[A-Za-z0-9_-]{1,64}`. It is the bucket key and the last
	// token of the worker's event subject `kvroute.events.<worker_id>`.
	WorkerID string `json:"worker_id"`

	// Endpoint is the upstream dial address of the worker, normalized `host:port` (see
	// NormalizeEndpoint). The kvroute selection policy matches it against reverse_proxy upstreams.
	Endpoint string `json:"endpoint"`

	// Model is the served model name, as clients put it in the request's `model` field.
	Model string `json:"model"`

	// Engine is `vllm` or `sglang`.
	Engine string `json:"engine"`

	// EngineVersion is the engine's version string, for operators; not interpreted.
	EngineVersion string `json:"engine_version,omitempty"`

	// BlockSize is the engine's KV block size in tokens (> 0).
	BlockSize int `json:"block_size"`

	// DPSize is the engine's data-parallel size (>= 1; 0 is read as 1).
	DPSize int `json:"dp_size,omitempty"`

	// Features lists optional capabilities, e.g. `mm_hashes`.
	Features []string `json:"features,omitempty"`

	// Contract is the worker's video contract (DESIGN.md §2.3), raw JSON, or absent.
	Contract json.RawMessage `json:"contract,omitempty"`

	// Adapters lists the LoRA adapters the worker serves (DESIGN.md §1.1), at most MaxAdapters,
	// sorted by name after Normalize; absent when it serves none.
	Adapters []Adapter `json:"adapters,omitempty"`

	// Instance identifies the publishing process: random, new at each Publisher (NewPublisher
	// sets it), `[A-Za-z0-9_-]{1,64}`, or absent (older publishers). Records of one worker id
	// that alternate between two instances mean two processes claim the id (Watcher).
	Instance string `json:"instance,omitempty"`
}

// ValidWorkerID reports whether id matches `[A-Za-z0-9_-]{1,64}`.
func ValidWorkerID(id string) bool { return workerIDPattern.MatchString(id) }

// HasFeature reports whether w declares feature f.
func (w *Worker) HasFeature(f string) bool {
	for _, x := range w.Features {
		if x == f {
			return true
		}
	}
	return false
}

// Normalize validates w and rewrites its endpoint to the normalized `host:port` form and a zero
// DPSize to 1. Errors wrap ErrInvalidWorker.
func (w *Worker) Normalize() error {
	if !ValidWorkerID(w.WorkerID) {
		return fmt.Errorf("%w: worker_id %q must match [A-Za-z0-9_-]{1,64}", ErrInvalidWorker, w.WorkerID)
	}
	ep, err := NormalizeEndpoint(w.Endpoint)
	if err != nil {
		return fmt.Errorf("%w: worker %s: %w", ErrInvalidWorker, w.WorkerID, err)
	}
	w.Endpoint = ep
	if w.Model == "" {
		return fmt.Errorf("%w: worker %s: model is empty", ErrInvalidWorker, w.WorkerID)
	}
	if w.Engine != kv.EngineVLLM && w.Engine != kv.EngineSGLang {
		return fmt.Errorf("%w: worker %s: engine %q must be %q or %q", ErrInvalidWorker, w.WorkerID, w.Engine, kv.EngineVLLM, kv.EngineSGLang)
	}
	if w.BlockSize <= 0 {
		return fmt.Errorf("%w: worker %s: block_size %d must be positive", ErrInvalidWorker, w.WorkerID, w.BlockSize)
	}
	if w.Instance != "" && !ValidWorkerID(w.Instance) {
		return fmt.Errorf("%w: worker %s: instance %q must match [A-Za-z0-9_-]{1,64}", ErrInvalidWorker, w.WorkerID, w.Instance)
	}
	if w.DPSize < 0 {
		return fmt.Errorf("%w: worker %s: dp_size %d must not be negative", ErrInvalidWorker, w.WorkerID, w.DPSize)
	}
	if w.DPSize == 0 {
		w.DPSize = 1
	}
	if err := w.normalizeAdapters(); err != nil {
		return err
	}
	if len(w.Contract) > 0 {
		if !json.Valid(w.Contract) {
			return fmt.Errorf("%w: worker %s: contract is not valid JSON", ErrInvalidWorker, w.WorkerID)
		}
		if string(w.Contract) == "null" {
			w.Contract = nil
		}
	}
	return nil
}

// Encode returns the record's JSON (the bucket value).
func (w *Worker) Encode() ([]byte, error) {
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encoding worker record: %w", err)
	}
	return b, nil
}

// Decode parses and normalizes one record. key, when not empty, must equal the record's worker_id
// (the bucket key is the worker id).
func Decode(key string, data []byte) (Worker, error) {
	var w Worker
	if len(data) > MaxRecordBytes {
		return w, fmt.Errorf("%w: record of %d bytes exceeds %d", ErrInvalidWorker, len(data), MaxRecordBytes)
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return w, fmt.Errorf("%w: decoding record: %w", ErrInvalidWorker, err)
	}
	if err := w.Normalize(); err != nil {
		return w, err
	}
	if key != "" && key != w.WorkerID {
		return w, fmt.Errorf("%w: key %q differs from worker_id %q", ErrInvalidWorker, key, w.WorkerID)
	}
	return w, nil
}

// NormalizeEndpoint returns addr as `host:port`: a scheme (`http://`, `https://`) and a trailing
// path are removed, the host is lowercased, IPv6 hosts keep their brackets, and a missing port
// becomes 80 (http or no scheme) or 443 (https). It is the form reverse_proxy upstream dial
// addresses are compared in.
func NormalizeEndpoint(addr string) (string, error) {
	s := strings.TrimSpace(addr)
	if s == "" {
		return "", errors.New("endpoint is empty")
	}
	defPort := "80"
	if i := strings.Index(s, "://"); i >= 0 {
		u, err := url.Parse(s)
		if err != nil {
			return "", fmt.Errorf("parsing endpoint %q: %w", addr, err)
		}
		switch strings.ToLower(u.Scheme) {
		case "http", "h2c":
		case "https":
			defPort = "443"
		default:
			return "", fmt.Errorf("endpoint %q: unsupported scheme %q", addr, u.Scheme)
		}
		s = u.Host
	} else if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// no port: the whole string is the host (maybe a bracketed IPv6 literal)
		host, port = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), defPort
	}
	if host == "" {
		return "", fmt.Errorf("endpoint %q: empty host", addr)
	}
	if strings.ContainsAny(host, " /@?#") {
		return "", fmt.Errorf("endpoint %q: invalid host %q", addr, host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return "", fmt.Errorf("endpoint %q: invalid port %q", addr, port)
	}
	return net.JoinHostPort(strings.ToLower(host), strconv.Itoa(p)), nil
}
