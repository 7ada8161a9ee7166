package httpguard

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// hostPolicy decides which Host headers a server answers.
type hostPolicy struct {
	any   bool            // "*": every host
	names map[string]bool // exact host names (lower case, no port, no trailing dot)
	wild  []string        // ".example.com": example.com and every name below it
}

// defaultHosts are the names allowed besides IP literals when no list is
// given: the loopback names (a function, so no caller can change them).
func defaultHosts() []string { return []string{"localhost", ".localhost"} }

func newHostPolicy(list []string) (hostPolicy, error) {
	p := hostPolicy{names: map[string]bool{}}
	for _, h := range list {
		h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
		switch {
		case h == "":
			continue
		case h == "*":
			p.any = true
		case strings.HasPrefix(h, "*."):
			p.wild = append(p.wild, h[1:])
		case strings.HasPrefix(h, "."):
			p.wild = append(p.wild, h)
		case strings.ContainsAny(h, "/ :") && net.ParseIP(strings.Trim(h, "[]")) == nil:
			return p, fmt.Errorf("allowed host %q: want a host name, an IP, *.domain or *", h)
		default:
			p.names[strings.Trim(h, "[]")] = true
		}
	}
	return p, nil
}

// allows reports whether a request for host (a Host header, with or without
// port) may be answered. An IP literal always may: DNS rebinding needs a
// name, and the address itself is what the client dialled.
func (p hostPolicy) allows(host string) bool {
	if p.any || host == "" { // no Host: not a browser (HTTP/1.0)
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
	if net.ParseIP(name) != nil || p.names[name] {
		return true
	}
	for _, w := range p.wild {
		if name == w[1:] || strings.HasSuffix(name, w) {
			return true
		}
	}
	return false
}

// guard answers 421 to requests for a host p does not allow.
func (p hostPolicy) guard(h http.Handler, flag string) http.Handler {
	if p.any {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.allows(r.Host) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusMisdirectedRequest)
			msg := fmt.Sprintf("host %q is not served here: add it to %s to allow it (the check stops DNS-rebinding pages from reading this API)", r.Host, flag)
			fmt.Fprintf(w, "{\"error\":%q,\"status\":%d}\n", msg, http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}
