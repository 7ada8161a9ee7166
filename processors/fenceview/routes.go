package fenceview

import (
	"context"
	"net/http"
	"slices"
	"sync"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology/cluster"
)

// extraRoute is a route fenceview serves for a registered processor.
type extraRoute struct {
	pattern string
	build   func(cl cluster.Config, opts ...group.ViewOpt) (builtRoute, error)
}

type builtRoute struct {
	handler http.Handler
	run     func(ctx context.Context) error
}

var registered struct {
	mu     sync.Mutex
	routes []extraRoute
}

// RegisterViewRoute makes every fenceview that links the calling package
// serve pattern (a net/http pattern such as "GET /v1/counts/{device}") from a
// typed view of table: fenceview runs the view alongside its own, answers 503
// until it has recovered, and then hands it to serve. Call it from the init of
// the processor's package, next to topology.Register.
func RegisterViewRoute[M any, PM codecs.Message[M]](pattern, table string, serve func(v *group.View[M, PM], w http.ResponseWriter, r *http.Request)) {
	registered.mu.Lock()
	defer registered.mu.Unlock()
	registered.routes = append(registered.routes, extraRoute{pattern: pattern, build: func(cl cluster.Config, opts ...group.ViewOpt) (builtRoute, error) {
		v, err := group.NewView[M, PM](cl, table, opts...)
		if err != nil {
			return builtRoute{}, err
		}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !v.Recovered() {
				writeNotReady(w, "view of "+table+" is recovering")
				return
			}
			serve(v, w, r)
		})
		return builtRoute{handler: h, run: v.Run}, nil
	}})
}

func registeredRoutes() []extraRoute {
	registered.mu.Lock()
	defer registered.mu.Unlock()
	return slices.Clone(registered.routes)
}

// WithRoute serves pattern with h besides fenceview's own routes (default:
// none). Run adds the routes of registered processors this way.
func WithRoute(pattern string, h http.Handler) Opt {
	return func(c *config) { c.routes = append(c.routes, route{pattern, h}) }
}

type route struct {
	pattern string
	h       http.Handler
}

// WriteJSON writes v as a JSON response with status, as fenceview's own
// routes do; for registered routes.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

// WriteError writes a JSON error response, as fenceview's own routes do.
func WriteError(w http.ResponseWriter, status int, msg string) { writeError(w, status, msg) }
