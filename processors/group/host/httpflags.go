package host

import (
	"flag"
	"fmt"
	"strings"

	"github.com/fencestream/fencestream/processors/group/httpguard"
)

// HTTPFlags are the bounds of a binary's public HTTP server.
type HTTPFlags struct {
	AllowedHosts string
	MaxConns     int
	MaxStreams   int
}

// Register adds --allowed-hosts, --max-conns and --max-streams.
func (h *HTTPFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&h.AllowedHosts, "allowed-hosts", "", "comma-separated Host names the HTTP server answers (name, *.domain, or * for any); IP addresses always; others get 421 (DNS-rebinding protection). Empty: localhost names and the listen host")
	fs.IntVar(&h.MaxConns, "max-conns", httpguard.DefaultMaxConns, "HTTP connections held at once; above it the longest-idle one is closed, or the newcomer answered 503 if all are busy")
	fs.IntVar(&h.MaxStreams, "max-streams", 256, "trigger streams (/v1/triggers/stream) open at once; one more is answered 503")
}

// Validate checks the parsed flags.
func (h *HTTPFlags) Validate() error {
	if h.MaxConns <= 0 {
		return fmt.Errorf("--max-conns must be positive, got %d", h.MaxConns)
	}
	if h.MaxStreams <= 0 || h.MaxStreams >= h.MaxConns {
		return fmt.Errorf("--max-streams must be positive and below --max-conns (%d), got %d", h.MaxConns, h.MaxStreams)
	}
	return nil
}

// Opts are the httpguard options the flags choose.
func (h *HTTPFlags) Opts() []httpguard.Opt {
	var hosts []string
	for _, s := range strings.Split(h.AllowedHosts, ",") {
		if s = strings.TrimSpace(s); s != "" {
			hosts = append(hosts, s)
		}
	}
	return []httpguard.Opt{httpguard.MaxConns(h.MaxConns), httpguard.AllowedHosts(hosts)}
}
