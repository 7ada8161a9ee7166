package fenceview

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/fencestream/fencestream/processors/group/host"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
)

//go:embed web
var webFS embed.FS

// Defaults of the Server options.
const (
	DefaultHeartbeat     = 15 * time.Second
	DefaultDeviceListCap = 100
	DefaultPageLimit     = 1000
	MaxPageLimit         = 10000
	MaxPartitions        = 10000
	// DefaultMaxStreams caps the trigger streams open at once; each holds a
	// connection exempt from the server's write timeout.
	DefaultMaxStreams = 256
)

// streamWriteTimeout bounds each write of a trigger stream: a client that
// stops reading loses its stream (and its slot) after it.
const streamWriteTimeout = 30 * time.Second

// Sources are what a Server reads. Every field is required.
type Sources struct {
	Devices   DeviceSource
	Occupancy OccupancySource
	Fences    FenceSource
	Ready     Readiness
	Feed      *Feed
	// Visits is optional: it serves /v1/fences/{id}/visits (404 without).
	Visits VisitSource
	// Age is optional: how old the data is, put on every answer
	// (DataAgeHeader) and in /readyz's data_age_seconds.
	Age AgeSource
}

// MaxStreams caps the trigger streams (/v1/triggers/stream) open at once
// (default DefaultMaxStreams, 256); one more is answered 503.
func MaxStreams(n int) Opt { return func(c *config) { c.streams = n } }

// Topology sets the topology /v1/topology describes and whose partition
// counts /v1/partition and the partition fields use (default geofence.Topology()).
func Topology(t *topology.Topology) Opt { return func(c *config) { c.topo = t } }

// Logger sets the logger (default slog.Default(); nil keeps it).
func Logger(l *slog.Logger) Opt {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

// Now sets the clock of relative times in responses (default time.Now).
func Now(now func() time.Time) Opt { return func(c *config) { c.now = now } }

// Heartbeat sets how often an idle trigger stream sends a comment line so
// proxies and clients keep it open (default DefaultHeartbeat, 15s).
func Heartbeat(d time.Duration) Opt { return func(c *config) { c.heartbeat = d } }

// DeviceListCap caps the devices listed by /v1/fences/{id} (default
// DefaultDeviceListCap, 100); the count stays exact.
func DeviceListCap(n int) Opt { return func(c *config) { c.deviceCap = n } }

// validate refuses sources and options that cannot work, naming them.
func (c *config) validate(src Sources) error {
	if len(c.misplaced) > 0 {
		return fmt.Errorf("fenceview: %w", errors.Join(c.misplaced...))
	}
	var missing []string
	if src.Devices == nil {
		missing = append(missing, "Devices")
	}
	if src.Occupancy == nil {
		missing = append(missing, "Occupancy")
	}
	if src.Fences == nil {
		missing = append(missing, "Fences")
	}
	if src.Ready == nil {
		missing = append(missing, "Ready")
	}
	if src.Feed == nil {
		missing = append(missing, "Feed")
	}
	if len(missing) > 0 {
		return fmt.Errorf("fenceview: sources missing: %v", missing)
	}
	if c.topo == nil {
		return errors.New("fenceview: nil topology")
	}
	if err := c.topo.Validate(); err != nil {
		return fmt.Errorf("fenceview: %w", err)
	}
	for _, name := range []string{geofence.TopicPings, geofence.TopicOccupancy} {
		if _, ok := c.topo.Topic(name); !ok {
			return fmt.Errorf("fenceview: topology %s does not declare %s", c.topo.Name, name)
		}
	}
	if c.heartbeat <= 0 {
		return fmt.Errorf("fenceview: heartbeat %v must be positive", c.heartbeat)
	}
	if c.streams <= 0 {
		return fmt.Errorf("fenceview: stream cap %d must be positive", c.streams)
	}
	if c.deviceCap <= 0 {
		return fmt.Errorf("fenceview: device list cap %d must be positive", c.deviceCap)
	}
	return c.validateMap()
}

// Server is fenceview's HTTP handler: the JSON API, the trigger stream, the
// web page, health and metrics. Build it with NewServer.
type Server struct {
	src     Sources
	cfg     config
	mux     *http.ServeMux
	streams chan struct{} // a slot per open trigger stream
}

// NewServer builds the handler over src.
func NewServer(src Sources, opts ...Opt) (*Server, error) {
	return newServer(src, newConfig(atServer, opts))
}

// newServer builds the handler over src with cfg, Run's or NewServer's.
func newServer(src Sources, cfg config) (*Server, error) {
	if cfg.topo == nil {
		cfg.topo = geofence.Topology(geofence.Partitions(cfg.partitions))
	}
	if err := cfg.validate(src); err != nil {
		return nil, err
	}
	s := &Server{src: src, cfg: cfg, mux: http.NewServeMux(), streams: make(chan struct{}, cfg.streams)}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /v1/fences", s.ready(s.handleFences))
	m.HandleFunc("GET /v1/fences/{id}", s.ready(s.handleFence))
	m.HandleFunc("GET /v1/fences/{$}", s.emptyID)
	m.HandleFunc("GET /v1/fences/{id}/visits", s.ready(s.handleFenceVisits))
	m.HandleFunc("GET /v1/devices/{id}", s.ready(s.handleDevice))
	m.HandleFunc("GET /v1/devices/{$}", s.emptyID)
	m.HandleFunc("GET /v1/triggers/stream", s.handleStream)
	m.HandleFunc("GET /v1/triggers", s.ready(s.handleTriggers))
	m.HandleFunc("GET /v1/partition", s.handlePartition)
	m.HandleFunc("GET /v1/topology", s.handleTopology)
	for _, r := range s.cfg.routes {
		m.Handle(r.pattern, r.h)
	}
	m.HandleFunc("GET /v1/config", s.handleConfig)
	s.subscriptionRoutes()
	// The catch-alls below match every method, so the mux would answer 404
	// to POST /v1/fences; a path that GET serves gets 405 with Allow instead.
	notFound := func(w http.ResponseWriter, r *http.Request) {
		if s.servesGET(r) {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path+": the API is read-only (GET, HEAD)")
			return
		}
		writeError(w, http.StatusNotFound, "no such route: "+r.Method+" "+r.URL.Path)
	}
	m.HandleFunc("/v1/", notFound)
	m.HandleFunc("/", notFound)
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	m.HandleFunc("GET /readyz", s.handleReady)
	m.Handle("GET /metrics", promhttp.Handler())
	web, _ := fs.Sub(webFS, "web") // cannot fail: the directory is embedded
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, web, "index.html")
	})
	static := http.StripPrefix("/static/", http.FileServerFS(web))
	m.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		static.ServeHTTP(w, r)
	}))
}

// servesGET reports whether a GET of r's path would reach a route other than
// the catch-alls.
func (s *Server) servesGET(r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return false
	}
	g := r.Clone(r.Context())
	g.Method = http.MethodGet
	_, pattern := s.mux.Handler(g)
	return pattern != "" && pattern != "/" && pattern != "/v1/"
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.setAge(w)
	s.mux.ServeHTTP(w, r)
}

// ready answers 503 with the reason while the sources are not ready, so no
// read returns stale or empty data.
func (s *Server) ready(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ok, why := s.src.Ready.Ready(); !ok {
			writeNotReady(w, why)
			return
		}
		h(w, r)
	}
}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	if ok, why := s.src.Ready.Ready(); !ok {
		writeNotReady(w, why)
		return
	}
	body := map[string]any{"ready": true}
	if age, known := s.setAge(w); known {
		body["data_age_seconds"] = age.Seconds()
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) emptyID(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusBadRequest, "id refused: "+topology.ErrEmptyKey.Error())
}

// sourceError answers an error of a source: 503 when it has no complete copy
// yet, 500 otherwise.
func (s *Server) sourceError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ErrNotReady) {
		writeNotReady(w, err.Error())
		return
	}
	s.cfg.log.Error("reading source failed", "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, err.Error())
}

// ErrorBody is the body of every error response (the kit's, so that
// modules' routes answer alike).
type ErrorBody = host.ErrorBody

func writeNotReady(w http.ResponseWriter, reason string) { host.WriteNotReady(w, reason) }

func writeError(w http.ResponseWriter, status int, msg string) { host.WriteError(w, status, msg) }

func writeJSON(w http.ResponseWriter, status int, v any) { host.WriteJSON(w, status, v) }
