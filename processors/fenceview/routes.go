package fenceview

import "net/http"

// Route serves pattern with h besides fenceview's own routes (default:
// none). Run adds the routes of the modules it is given this way.
func Route(pattern string, h http.Handler) Opt {
	return func(c *config) { c.routes = append(c.routes, route{pattern, h}) }
}

type route struct {
	pattern string
	h       http.Handler
}
