package streams

import (
	"net/http"
	"strings"

	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/view"
)

// Route serves a table's value per key over HTTP, as Kafka Streams'
// interactive queries do, from a view of table (an aggregation's table of
// V: Table.Name): the key is pattern's last wildcard ("GET
// /v1/counts/{device}"), and answer makes the JSON of the key's value. It
// answers 503 while the view recovers or when a read fails, and 404 when
// the table does not hold the key.
func Route[V any](pattern, table string, answer func(key string, v *V) any) host.Route {
	wildcard := pattern[strings.LastIndex(pattern, "{")+1:]
	wildcard = strings.TrimSuffix(strings.TrimSuffix(wildcard, "}"), "...")
	return host.ViewRoute(pattern, table, func(vw *view.View[msg[V], *msg[V]], w http.ResponseWriter, r *http.Request) {
		key := r.PathValue(wildcard)
		switch m, err := vw.Get(key); {
		case err != nil:
			host.WriteError(w, http.StatusServiceUnavailable, err.Error())
		case unwrap(m) == nil:
			host.WriteError(w, http.StatusNotFound, "no "+wildcard+" "+key+" in "+table)
		default:
			host.WriteJSON(w, http.StatusOK, answer(key, unwrap(m)))
		}
	})
}
