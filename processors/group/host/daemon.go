package host

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencestream/fencestream/processors/group/httpguard"
)

// LogFlags holds the logging flags.
type LogFlags struct {
	Level  string
	Format string
}

// Register adds --log-level and --log-format.
func (l *LogFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&l.Level, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&l.Format, "log-format", "text", "log format: text or json")
}

// Logger builds the logger the flags describe, writing to w.
func (l *LogFlags) Logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.Level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(l.Format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.Format)
}

// SignalContext is canceled on SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Listen opens addr; an address without a host binds 127.0.0.1.
func Listen(addr string) (net.Listener, error) {
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return l, nil
}

// Serve serves h on l until ctx ends, then shuts down gracefully. The server
// is bounded by httpguard's defaults (timeouts, 1024 connections) and
// answers any Host: it serves metrics and health, nothing a web page may not
// read, and scrapers address it by service name.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	return httpguard.Serve(ctx, l, h, httpguard.AnyHost())
}

// Readiness is what /readyz reports: 200 when every added check passes, else
// 503 with each failing check's reason (brokers unreachable, recovering, a
// state directory that cannot be written). With no check added yet it is not
// ready ("starting"). Safe for concurrent use; the zero value is ready to use.
type Readiness struct {
	mu     sync.Mutex
	checks []func() error
}

// Add adds a check (nil: ready).
func (r *Readiness) Add(check func() error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks = append(r.checks, check)
}

// Check is nil when ready, else why not.
func (r *Readiness) Check() error {
	r.mu.Lock()
	checks := slices.Clone(r.checks)
	r.mu.Unlock()
	if len(checks) == 0 {
		return errors.New("starting")
	}
	var errs []error
	for _, c := range checks {
		if err := c(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// MetricsHandler serves /metrics (the default Prometheus registry), /healthz
// (the process is alive) and /readyz (ready's checks; nil: always ready).
func MetricsHandler(ready *Readiness) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready.Check(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	return mux
}

// ServeMetrics serves MetricsHandler(ready) on addr until ctx ends; an empty
// addr serves nothing.
func ServeMetrics(ctx context.Context, addr string, log *slog.Logger, ready *Readiness) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	l, err := Listen(addr)
	if err != nil {
		return err
	}
	log.Info("metrics listening", "url", "http://"+l.Addr().String()+"/metrics")
	return Serve(ctx, l, MetricsHandler(ready))
}
