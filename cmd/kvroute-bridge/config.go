package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvroute/kvroute/kvevents/bridge"
)

// maxConfigBytes bounds a --config or --contract file.
const maxConfigBytes = 1 << 20

// fileWorker is one worker in a --config file: the bridge.WorkerConfig fields, plus contract_file
// (a path, relative to the config file) as an alternative to an inline contract.
type fileWorker struct {
	bridge.WorkerConfig
	ContractFile string `json:"contract_file,omitempty"`
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// workerFlags are the flags describing one worker (when no --config file is given).
type workerFlags struct {
	id, endpoint, model, engine, engineVersion, metricsURL string
	modelsURL, apiKeyFile                                  string
	features, contract, zmqEndpoint, replayEndpoint, topic string
	encoding                                               string
	blockSize, dpSize, maxBlocks                           int
}

func (w *workerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&w.id, "worker-id", "", "worker id ([A-Za-z0-9_-]{1,64}); names the NATS subjects")
	fs.StringVar(&w.endpoint, "endpoint", "", "HTTP address Caddy dials for this worker, e.g. http://10.0.0.5:8000")
	fs.StringVar(&w.model, "model", "", "served model name")
	fs.StringVar(&w.engine, "engine", "vllm", "engine: vllm or sglang")
	fs.StringVar(&w.engineVersion, "engine-version", "", "engine version recorded in the registry")
	fs.IntVar(&w.blockSize, "block-size", 0, "KV block size in tokens; 0 takes the main-attention KV cache group's from the engine's KV events (hybrid models: 528–2096), reading the engine's /metrics (vllm:cache_config_info) until the first arrives")
	fs.StringVar(&w.metricsURL, "metrics-url", "", "engine Prometheus URL for the block size (default http://<endpoint>/metrics)")
	fs.StringVar(&w.apiKeyFile, "engine-api-key-file", "", "file holding the engine's API key (vLLM --api-key), sent with the --models-url request")
	fs.StringVar(&w.modelsURL, "models-url", "", "engine OpenAI model list read for the LoRA adapters it serves (cards with a parent; default http://<endpoint>/v1/models)")
	fs.IntVar(&w.dpSize, "dp-size", 1, "data-parallel ranks; rank r publishes on the ZMQ ports + r")
	fs.StringVar(&w.features, "features", "", "comma-separated worker features, e.g. mm_hashes")
	fs.StringVar(&w.contract, "contract", "", "video contract JSON file (DESIGN.md §2.3) recorded with the worker")
	fs.StringVar(&w.zmqEndpoint, "zmq-endpoint", "tcp://127.0.0.1:5557", "engine KV event PUB endpoint of rank 0")
	fs.StringVar(&w.replayEndpoint, "replay-endpoint", "", "engine KV event replay (ROUTER) endpoint of rank 0, e.g. tcp://127.0.0.1:5558")
	fs.StringVar(&w.topic, "topic", "", "ZMQ topic prefix to subscribe to (the engine's kv-events-config topic)")
	fs.StringVar(&w.encoding, "encoding", "", "Kvroute-Encoding header: vllm or sglang (default: the engine)")
	fs.IntVar(&w.maxBlocks, "max-blocks", 0, "blocks per rank kept for routers' snapshot requests: the engine's GPU block count (default 1048576)")
}

func (w *workerFlags) worker() (bridge.WorkerConfig, error) {
	wc := bridge.WorkerConfig{
		WorkerID: w.id, Endpoint: w.endpoint, Model: w.model, Engine: w.engine, EngineVersion: w.engineVersion,
		BlockSize: w.blockSize, MetricsURL: w.metricsURL, ModelsURL: w.modelsURL, EngineAPIKeyFile: w.apiKeyFile, DPSize: w.dpSize, ZMQEndpoint: w.zmqEndpoint,
		ReplayEndpoint: w.replayEndpoint, Topic: w.topic, Encoding: w.encoding, MaxBlocks: w.maxBlocks,
	}
	for _, f := range strings.Split(w.features, ",") {
		if f = strings.TrimSpace(f); f != "" {
			wc.Features = append(wc.Features, f)
		}
	}
	if w.contract != "" {
		c, err := readContract(w.contract)
		if err != nil {
			return wc, err
		}
		wc.Contract = c
	}
	return wc, nil
}

// readFile reads a small file.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("reading %s: larger than %d bytes", path, maxConfigBytes)
	}
	return b, nil
}

// readContract reads a contract file; it must be one JSON object (its fields are checked by the
// routers, see checkContract).
func readContract(path string) (json.RawMessage, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return nil, fmt.Errorf("reading contract %s: not a JSON object", path)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, fmt.Errorf("reading contract %s: %w", path, err)
	}
	return buf.Bytes(), nil
}

// loadConfigFile reads a --config file: one worker object or an array of them.
func loadConfigFile(path string) ([]bridge.WorkerConfig, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	var fws []fileWorker
	dec := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		return d.Decode(v)
	}
	if len(b) > 0 && b[0] == '[' {
		err = dec(&fws)
	} else {
		var fw fileWorker
		err = dec(&fw)
		fws = []fileWorker{fw}
	}
	if err != nil {
		return nil, fmt.Errorf("decoding config %s: %w", path, err)
	}
	out := make([]bridge.WorkerConfig, 0, len(fws))
	for _, fw := range fws {
		wc := fw.WorkerConfig
		if fw.ContractFile != "" {
			if len(wc.Contract) > 0 {
				return nil, fmt.Errorf("decoding config %s: worker %s has both contract and contract_file", path, wc.WorkerID)
			}
			cf := fw.ContractFile
			if !filepath.IsAbs(cf) {
				cf = filepath.Join(filepath.Dir(path), cf)
			}
			if wc.Contract, err = readContract(cf); err != nil {
				return nil, err
			}
		}
		out = append(out, wc)
	}
	if len(out) == 0 {
		return nil, errors.New("decoding config " + path + ": no workers")
	}
	return out, nil
}
