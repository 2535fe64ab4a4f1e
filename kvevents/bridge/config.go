package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/kvroute/kvroute/kv"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/defaults"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("invalid bridge config")

// WorkerConfig describes one engine worker: where its KV events come from and what its registry
// record says (DESIGN.md §2.1). JSON field names are those of the --config file.
type WorkerConfig struct {
	// WorkerID is the worker id ([A-Za-z0-9_-]{1,64}); it names the NATS subjects.
	WorkerID string `json:"worker_id"`
	// Endpoint is the HTTP address Caddy dials for this worker (normalized to host:port).
	Endpoint string `json:"endpoint"`
	// Model is the served model name.
	Model string `json:"model"`
	// Engine is "vllm" or "sglang".
	Engine string `json:"engine"`
	// EngineVersion is recorded as given (e.g. "0.26.1"); optional.
	EngineVersion string `json:"engine_version,omitempty"`
	// BlockSize is the engine's KV block size in tokens (SGLang: its --page-size; required). 0 means
	// (vLLM only): the block_size of the first BlockStored of a main-attention KV cache group in the
	// worker's events (kvevents/normalize's group rule; hybrid models publish 528–2096-token attention
	// blocks beside Mamba or sliding-window groups), or until such an event arrives the one read from
	// MetricsURL (vllm:cache_config_info{block_size="16",...}), replaced by the events' when they
	// disagree. A configured value is kept; a disagreement with the events is logged.
	BlockSize int `json:"block_size,omitempty"`
	// MetricsURL is the engine's Prometheus endpoint for BlockSize discovery. Default:
	// http://<Endpoint>/metrics.
	MetricsURL string `json:"metrics_url,omitempty"`
	// ModelsURL is the engine's OpenAI model list, read for the LoRA adapters it serves (cards with
	// a `parent`) at registration and every Config.AdaptersRefresh. Default: http://<Endpoint>/v1/models.
	ModelsURL string `json:"models_url,omitempty"`
	// EngineAPIKeyFile is a file holding the engine's API key (vLLM --api-key), sent as a bearer
	// token with the ModelsURL request; read at every request. Default: none.
	EngineAPIKeyFile string `json:"engine_api_key_file,omitempty"`
	// DPSize is the number of data-parallel ranks; rank r publishes on the ZMQ ports + r. Default 1.
	DPSize int `json:"dp_size,omitempty"`
	// Features are recorded as given (e.g. ["mm_hashes"]).
	Features []string `json:"features,omitempty"`
	// Contract is the video contract JSON (DESIGN.md §2.3) recorded with the worker; optional.
	Contract json.RawMessage `json:"contract,omitempty"`
	// ZMQEndpoint is the engine's KV event PUB socket for rank 0, e.g. tcp://10.0.0.5:5557.
	ZMQEndpoint string `json:"zmq_endpoint"`
	// ReplayEndpoint is the engine's ROUTER replay socket for rank 0, e.g. tcp://10.0.0.5:5558;
	// empty when the engine has none (gaps are then filled from the bridge's own ring only when a
	// router asks, and a gap the bridge itself sees is announced as a reset).
	ReplayEndpoint string `json:"replay_endpoint,omitempty"`
	// Topic is the ZMQ subscription prefix. Default "" (every topic).
	Topic string `json:"topic,omitempty"`
	// Encoding is the Kvroute-Encoding header value: "vllm" or "sglang". Default: Engine.
	Encoding string `json:"encoding,omitempty"`
	// MaxBlocks bounds the block set kept per rank for snapshot requests (DESIGN.md §9): the engine's
	// GPU block count (vLLM num_gpu_blocks; SGLang max_total_num_tokens / page size). Default
	// snapshot.DefaultMaxBlocks (1 Mi). Beyond it the oldest block is dropped and counted
	// (RankStats.SetEvicted): the set then missed removals.
	MaxBlocks int `json:"max_blocks,omitempty"`
}

// Config configures a Bridge.
type Config struct {
	// Workers lists the workers this process bridges (at least one).
	Workers []WorkerConfig
	// RingBatches and RingBytes bound the ring of forwarded batches kept per rank for replay.
	// Defaults: 10000 batches (vLLM's buffer_steps), 64 MiB.
	RingBatches int
	RingBytes   int64
	// ReplayTimeout is the longest wait for the next frame of an engine replay. Default 2 s.
	ReplayTimeout time.Duration
	// MaxReplayBatches and MaxReplayBytes bound one engine replay. Defaults: 100000 batches, 256 MiB.
	MaxReplayBatches int
	MaxReplayBytes   int64
	// ReconnectInterval and ReconnectIntervalMax are the ZMQ reconnect backoff (libzmq doubles the
	// interval up to the max). Defaults 100 ms and 5 s.
	ReconnectInterval    time.Duration
	ReconnectIntervalMax time.Duration
	// RegisterRetry is the first wait before retrying registration steps (block size probe, bucket
	// open); it doubles up to 30 s. Default 1 s.
	RegisterRetry time.Duration
	// Heartbeat overrides the registry heartbeat interval (tests). Default registry.HeartbeatInterval.
	Heartbeat time.Duration
	// AdaptersRefresh is how often each worker's LoRA adapters are read again from its ModelsURL
	// (adapters.go). Default DefaultAdaptersRefresh (15 s); negative: read once at registration.
	AdaptersRefresh time.Duration
	// DisableRegistration skips the registry record (events only).
	DisableRegistration bool
	// Logger receives the bridge's logs. Default: a no-op logger.
	Logger *zap.Logger
}

// DefaultConfig returns a Config with the defaults and no workers.
func DefaultConfig() *Config {
	return &Config{
		RingBatches:          10000,
		RingBytes:            64 << 20,
		ReplayTimeout:        2 * time.Second,
		MaxReplayBatches:     100000,
		MaxReplayBytes:       256 << 20,
		ReconnectInterval:    100 * time.Millisecond,
		ReconnectIntervalMax: 5 * time.Second,
		RegisterRetry:        time.Second,
		Logger:               zap.NewNop(),
	}
}

// withDefaults returns a copy of c with zero fields set to the defaults.
func (c *Config) withDefaults() Config {
	d := *DefaultConfig()
	out := *c
	defaults.Positive(&out.RingBatches, d.RingBatches)
	defaults.Positive(&out.RingBytes, d.RingBytes)
	defaults.Positive(&out.ReplayTimeout, d.ReplayTimeout)
	defaults.Positive(&out.MaxReplayBatches, d.MaxReplayBatches)
	defaults.Positive(&out.MaxReplayBytes, d.MaxReplayBytes)
	defaults.Positive(&out.ReconnectInterval, d.ReconnectInterval)
	if out.ReconnectIntervalMax < out.ReconnectInterval {
		out.ReconnectIntervalMax = max(d.ReconnectIntervalMax, out.ReconnectInterval)
	}
	defaults.Positive(&out.RegisterRetry, d.RegisterRetry)
	if out.AdaptersRefresh == 0 {
		out.AdaptersRefresh = DefaultAdaptersRefresh
	}
	if out.Logger == nil {
		out.Logger = d.Logger
	}
	out.Workers = append([]WorkerConfig(nil), c.Workers...)
	return out
}

// Normalize checks w and fills its defaults (DPSize, Encoding, MetricsURL, endpoint forms).
func (w *WorkerConfig) Normalize() error {
	if !registry.ValidWorkerID(w.WorkerID) {
		return fmt.Errorf("%w: worker_id %q must match [A-Za-z0-9_-]{1,64}", ErrConfig, w.WorkerID)
	}
	ep, err := registry.NormalizeEndpoint(w.Endpoint)
	if err != nil {
		return fmt.Errorf("%w: worker %s: %w", ErrConfig, w.WorkerID, err)
	}
	w.Endpoint = ep
	if w.Model == "" {
		return fmt.Errorf("%w: worker %s: model is empty", ErrConfig, w.WorkerID)
	}
	if w.Engine != kv.EngineVLLM && w.Engine != kv.EngineSGLang {
		return fmt.Errorf("%w: worker %s: engine %q must be vllm or sglang", ErrConfig, w.WorkerID, w.Engine)
	}
	if w.Encoding == "" {
		w.Encoding = w.Engine
	}
	if e, err := codec.ParseEncoding(w.Encoding); err != nil || (e != codec.VLLM && e != codec.SGLang) {
		return fmt.Errorf("%w: worker %s: encoding %q must be vllm or sglang", ErrConfig, w.WorkerID, w.Encoding)
	}
	if w.BlockSize == 0 && w.Engine == kv.EngineSGLang {
		return fmt.Errorf("%w: worker %s: block_size (SGLang's --page-size) is required for sglang workers", ErrConfig, w.WorkerID)
	}
	if w.BlockSize < 0 {
		return fmt.Errorf("%w: worker %s: block_size %d must not be negative", ErrConfig, w.WorkerID, w.BlockSize)
	}
	if w.MetricsURL == "" {
		w.MetricsURL = "http://" + w.Endpoint + "/metrics"
	}
	if w.ModelsURL == "" {
		w.ModelsURL = "http://" + w.Endpoint + "/v1/models"
	}
	if w.MaxBlocks < 0 {
		return fmt.Errorf("%w: worker %s: max_blocks %d must not be negative", ErrConfig, w.WorkerID, w.MaxBlocks)
	}
	if w.DPSize < 0 || w.DPSize > 1024 {
		return fmt.Errorf("%w: worker %s: dp_size %d must be in [1, 1024]", ErrConfig, w.WorkerID, w.DPSize)
	}
	if w.DPSize == 0 {
		w.DPSize = 1
	}
	if w.ZMQEndpoint == "" {
		return fmt.Errorf("%w: worker %s: zmq_endpoint is empty", ErrConfig, w.WorkerID)
	}
	for r := 0; r < w.DPSize; r++ {
		if _, err := RankEndpoint(w.ZMQEndpoint, r); err != nil {
			return fmt.Errorf("%w: worker %s: %w", ErrConfig, w.WorkerID, err)
		}
		if w.ReplayEndpoint != "" {
			if _, err := RankEndpoint(w.ReplayEndpoint, r); err != nil {
				return fmt.Errorf("%w: worker %s: %w", ErrConfig, w.WorkerID, err)
			}
		}
	}
	if len(w.Contract) > 0 && !json.Valid(w.Contract) {
		return fmt.Errorf("%w: worker %s: contract is not valid JSON", ErrConfig, w.WorkerID)
	}
	return nil
}

// RankEndpoint returns the endpoint of data-parallel rank r the way vLLM and SGLang derive it from
// the configured one (ZmqEventPublisher.offset_endpoint_port): tcp://host:port → tcp://host:port+r,
// inproc://name → inproc://name_dp<r>; other transports (ipc) are used unchanged for rank 0 only.
func RankEndpoint(endpoint string, r int) (string, error) {
	if r == 0 {
		return endpoint, nil
	}
	switch {
	case strings.HasPrefix(endpoint, "inproc://"):
		return fmt.Sprintf("%s_dp%d", endpoint, r), nil
	case strings.HasPrefix(endpoint, "tcp://"):
		hostport := strings.TrimPrefix(endpoint, "tcp://")
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			return "", fmt.Errorf("parsing zmq endpoint %q: %w", endpoint, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p <= 0 || p+r > 65535 {
			return "", fmt.Errorf("parsing zmq endpoint %q: port %q with rank %d out of range", endpoint, port, r)
		}
		return "tcp://" + net.JoinHostPort(host, strconv.Itoa(p+r)), nil
	}
	return "", fmt.Errorf("zmq endpoint %q: only tcp:// and inproc:// endpoints can be offset for rank %d", endpoint, r)
}
