package sim

import (
	"context"

	"go.uber.org/zap"

	isim "github.com/kvroute/kvroute/internal/sim"
)

// The worker's types; see internal/sim.
type (
	Config       = isim.Config
	Server       = isim.Server
	RequestInfo  = isim.RequestInfo
	DoneInfo     = isim.DoneInfo
	Cache        = isim.Cache
	NoCache      = isim.NoCache
	Tokenizer    = isim.Tokenizer
	Registration = isim.Registration
)

// WordTokenizer is the stand-in tokenizer used without a Frontend.
type WordTokenizer = isim.WordTokenizer

// New returns a Server; cfg may be nil.
func New(cfg *Config) *Server { return isim.New(cfg) }

// DefaultConfig returns the defaults.
func DefaultConfig() *Config { return isim.DefaultConfig() }

// Register connects to natsURL and publishes the worker record for s, reachable at endpoint.
func Register(ctx context.Context, natsURL, endpoint string, s *Server, logger *zap.Logger) (*Registration, error) {
	return isim.Register(ctx, natsURL, endpoint, s, logger)
}
