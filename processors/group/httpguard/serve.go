package httpguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Defaults of the options.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxConns          = 1024
	DefaultShutdownTimeout   = 5 * time.Second
)

// Opt configures Serve. Every option overrides one default of defaults,
// which its doc names; validate checks them together.
type Opt func(*config)

type config struct {
	readHeader, read, write, idle, shutdown time.Duration
	maxConns                                int
	hosts                                   []string // nil: the defaults
	anyHost                                 bool
	hostsFlag                               string
	now                                     func() time.Time
}

func defaults() config {
	return config{
		readHeader: DefaultReadHeaderTimeout, read: DefaultReadTimeout, write: DefaultWriteTimeout,
		idle: DefaultIdleTimeout, shutdown: DefaultShutdownTimeout, maxConns: DefaultMaxConns,
		hostsFlag: "--allowed-hosts", now: time.Now,
	}
}

func (c *config) validate() error {
	for name, d := range map[string]time.Duration{"read header": c.readHeader, "read": c.read, "write": c.write, "idle": c.idle, "shutdown": c.shutdown} {
		if d <= 0 {
			return fmt.Errorf("httpguard: %s timeout %v must be positive", name, d)
		}
	}
	if c.maxConns <= 0 {
		return fmt.Errorf("httpguard: connection cap %d must be positive", c.maxConns)
	}
	return nil
}

// Timeouts sets the read-header, read (whole request), write (whole
// response) and idle (keep-alive) timeouts (defaults 10s, 30s, 30s, 60s).
// A long-lived response lifts its own deadlines with Unbounded.
func Timeouts(readHeader, read, write, idle time.Duration) Opt {
	return func(c *config) { c.readHeader, c.read, c.write, c.idle = readHeader, read, write, idle }
}

// MaxConns caps the client connections held at once (default
// DefaultMaxConns, 1024); see the package doc for what happens above it.
func MaxConns(n int) Opt { return func(c *config) { c.maxConns = n } }

// AllowedHosts sets the Host names requests may name: exact names, ".domain"
// or "*.domain" for a domain and its subdomains, "*" for any. IP literals are
// always allowed. Default (nil or empty): localhost and *.localhost, plus the
// listen address's host if it is a name.
func AllowedHosts(hosts []string) Opt { return func(c *config) { c.hosts = hosts } }

// HostsFlag names the setting that extends the allow-list in the 421 message
// (default "--allowed-hosts").
func HostsFlag(name string) Opt { return func(c *config) { c.hostsFlag = name } }

// AnyHost turns the Host check off (default on; for servers that serve
// nothing a web page may not read, such as /metrics scraped by service name).
func AnyHost() Opt { return func(c *config) { c.anyHost = true } }

// ShutdownTimeout bounds the graceful shutdown when ctx ends (default 5s).
func ShutdownTimeout(d time.Duration) Opt { return func(c *config) { c.shutdown = d } }

// Serve serves h on l until ctx ends, then shuts down gracefully within the
// shutdown timeout. Request contexts derive from ctx, so long-lived responses
// end when it does. Serve closes l.
func Serve(ctx context.Context, l net.Listener, h http.Handler, opts ...Opt) error {
	srv, ll, err := newServer(ctx, l, h, opts)
	if err != nil {
		_ = l.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ll) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serving on %s: %w", l.Addr(), err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), srv.shutdown)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		<-errc
		return nil
	}
}

type server struct {
	*http.Server
	shutdown time.Duration
}

func newServer(ctx context.Context, l net.Listener, h http.Handler, opts []Opt) (server, *limitListener, error) {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return server{}, nil, err
	}
	if !cfg.anyHost {
		hosts := cfg.hosts
		if len(hosts) == 0 {
			hosts = defaultHosts()
			if host, _, err := net.SplitHostPort(l.Addr().String()); err == nil {
				hosts = append(hosts, host)
			}
		}
		p, err := newHostPolicy(hosts)
		if err != nil {
			return server{}, nil, err
		}
		h = p.guard(h, cfg.hostsFlag)
	}
	ll := newLimitListener(l, cfg.maxConns, cfg.now)
	return server{Server: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.readHeader,
		ReadTimeout:       cfg.read,
		WriteTimeout:      cfg.write,
		IdleTimeout:       cfg.idle,
		ConnState:         ll.connState,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}, shutdown: cfg.shutdown}, ll, nil
}

// Unbounded lifts the read and write deadlines of w's connection, for a
// response that lasts as long as the client wants (a server-sent event
// stream). Whoever calls it must bound the number of such responses itself.
func Unbounded(w http.ResponseWriter) error {
	rc := http.NewResponseController(w)
	if err := rc.SetWriteDeadline(time.Time{}); err != nil {
		return err
	}
	return rc.SetReadDeadline(time.Time{})
}
