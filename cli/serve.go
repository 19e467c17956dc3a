package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/server"
)

// Serve runs the server on a data directory until its context ends.
type Serve struct {
	DataDir string
	Listen  string
	Config  server.Config
	// Ready, when set, is called with the base URL once the server listens.
	Ready func(url string)
}

// DefaultDataDir is where sealbox keeps its data unless told otherwise.
const DefaultDataDir = "./sealbox-data"

// Paths inside the data directory.
const (
	dbFile   = "sealbox.db"
	blobsDir = "blobs"
)

// shutdownGrace bounds how long in-flight requests may run after a signal.
const shutdownGrace = 30 * time.Second

func newServeCmd() *cobra.Command {
	s := &Serve{Config: server.DefaultConfig()}
	cfg := &s.Config
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the sealbox server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return err
			}
			if err := validateConfig(cfg); err != nil {
				return err
			}
			cfg.Log = newLogger(cmd.ErrOrStderr())
			return s.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&s.DataDir, "data", DefaultDataDir, "data directory (database, blobs, server key); created on first start")
	f.StringVar(&s.Listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.BoolVar(&cfg.TrustProxy, "trust-proxy", false, "take the client address from the last hop of X-Forwarded-For")
	f.StringVar(&cfg.Registration, "registration", cfg.Registration, "open or closed")
	f.Var(sizeFlag{&cfg.MaxBody}, "max-body", "largest ordinary request body (e.g. 1MiB)")
	f.Var(sizeFlag{&cfg.MaxBlob}, "max-blob", "largest uploaded blob (e.g. 16GiB)")
	f.DurationVar(&cfg.AccessTTL, "access-ttl", cfg.AccessTTL, "access token lifetime")
	f.DurationVar(&cfg.RefreshTTL, "refresh-ttl", cfg.RefreshTTL, "refresh token lifetime")
	f.DurationVar(&cfg.FreshWindow, "fresh-window", cfg.FreshWindow, "how recent a credential presentation must be for sensitive operations")
	f.IntVar(&cfg.LockoutFailures, "lockout-failures", cfg.LockoutFailures, "consecutive failed password checks that lock an account")
	f.DurationVar(&cfg.LockoutWindow, "lockout-window", cfg.LockoutWindow, "how long a lockout lasts")
	f.StringVar(&cfg.ProtocolMin, "protocol-min", cfg.ProtocolMin, "oldest protocol date (YYYY-MM-DD) the server speaks")
	f.StringVar(&cfg.ProtocolMax, "protocol-max", cfg.ProtocolMax, "newest protocol date (YYYY-MM-DD) the server speaks")
	f.StringVar(&cfg.AlbumProtocol, "album-protocol", "", "protocol date (YYYY-MM-DD) new albums are pinned to (default: --protocol-max)")
	f.Float64Var(&cfg.ShareRate, "share-rate", cfg.ShareRate, "share reads per second each client address earns back")
	f.IntVar(&cfg.ShareBurst, "share-burst", cfg.ShareBurst, "share reads a client address may make at once")
	return cmd
}

// validateConfig refuses flag values the server cannot run with.
func validateConfig(cfg *server.Config) error {
	if cfg.Registration != "open" && cfg.Registration != "closed" {
		return fmt.Errorf("--registration must be open or closed, not %q", cfg.Registration)
	}
	if cfg.MaxBlob <= 0 {
		return fmt.Errorf("--max-blob must be positive")
	}
	// The limiter keeps whole nanoseconds per token and refuses a bucket
	// that takes over a century to refill.
	if !(cfg.ShareRate > 0) || math.IsInf(cfg.ShareRate, 0) || cfg.ShareBurst < 1 ||
		float64(cfg.ShareBurst)/cfg.ShareRate > 100*365*24*3600 {
		return fmt.Errorf("--share-rate must be a positive number and --share-burst at least 1, refilling within a century")
	}
	if cfg.AlbumProtocol == "" {
		cfg.AlbumProtocol = cfg.ProtocolMax
	}
	for _, d := range []struct{ flag, value string }{
		{"--protocol-min", cfg.ProtocolMin}, {"--protocol-max", cfg.ProtocolMax}, {"--album-protocol", cfg.AlbumProtocol},
	} {
		if _, err := time.Parse(time.DateOnly, d.value); err != nil {
			return fmt.Errorf("%s must be a date YYYY-MM-DD, not %q", d.flag, d.value)
		}
	}
	// YYYY-MM-DD strings compare in date order.
	if cfg.ProtocolMin > cfg.ProtocolMax {
		return fmt.Errorf("--protocol-min %s is after --protocol-max %s", cfg.ProtocolMin, cfg.ProtocolMax)
	}
	if cfg.AlbumProtocol < cfg.ProtocolMin || cfg.AlbumProtocol > cfg.ProtocolMax {
		return fmt.Errorf("--album-protocol %s is outside %s..%s", cfg.AlbumProtocol, cfg.ProtocolMin, cfg.ProtocolMax)
	}
	return nil
}

// Run opens the data directory, serves until ctx ends, then shuts down
// gracefully: in-flight requests finish and the store closes cleanly.
func (s *Serve) Run(ctx context.Context) error {
	if err := os.MkdirAll(s.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	store, err := kv.Open(filepath.Join(s.DataDir, dbFile), kv.Options{Now: s.Config.Now})
	if err != nil {
		return err
	}
	defer store.Close()
	blobStore, err := blobs.Open(filepath.Join(s.DataDir, blobsDir))
	if err != nil {
		return fmt.Errorf("open blob store: %w", err)
	}
	srv := server.New(s.Config, store, blobStore)
	if err := srv.Open(s.Listen); err != nil {
		return err
	}
	s.Config.Log.Info().Str("url", srv.URL()).Str("data", s.DataDir).Msg("sealbox listening")
	if s.Ready != nil {
		s.Ready(srv.URL())
	}
	<-ctx.Done()
	s.Config.Log.Info().Msg("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	return srv.Close(shutdownCtx)
}

// newLogger logs human-readable lines on a terminal and JSON otherwise.
func newLogger(w io.Writer) zerolog.Logger {
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			w = zerolog.ConsoleWriter{Out: f, TimeFormat: time.RFC3339}
		}
	}
	return zerolog.New(w).With().Timestamp().Logger()
}
