// Package fenceview is fencestream's query service: an HTTP JSON API, a live
// web page and Prometheus metrics over Goka views of the debouncer and
// occupancy tables, the fence catalogue, and a live feed of triggers.
//
// # Use
//
// [Run] is the whole service in one call, on an already-open listener; the
// cmd/fenceview binary and the all-in-one runner both call it:
//
//	l, _ := net.Listen("tcp", "127.0.0.1:8080")
//	err := fenceview.Run(ctx, cl, l)
//
// For tests and other embeddings, [NewServer] builds the handler alone over
// [Sources]: small interfaces ([DeviceSource], [OccupancySource],
// [FenceSource], [Readiness]) that fakes implement, and a [Feed].
// [ViewSources] adapts the Goka views; [TriggerConsumer] fills the Feed
// from the fence-triggers topic.
//
// # Routes
//
//	GET /v1/fences             every fence with its occupancy; ?sort=id|count ?order=asc|desc ?limit= ?offset= ?geometry=true
//	GET /v1/fences/{id}        occupancy, devices inside (capped), totals, last change, lag, GeoJSON geometry,
//	                           effective debounce settings (the fence's own over the debouncer's defaults)
//	GET /v1/devices/{id}       debounce state per fence, last ping time and HLC, counters
//	GET /v1/triggers           recent triggers, newest event time first; ?limit= (default 50, at most 500) ?fence= ?device=
//	GET /v1/triggers/stream    Server-Sent Events of triggers; ?fence= (404 if unknown) ?device=
//	GET /v1/config             what the page needs: basemap tile URL and attribution
//	GET /v1/partition?key=K&partitions=N   the pinned partitioner's answer (N default 24, 1..10000)
//	GET /v1/topology           Describe text, Mermaid, topics, processors and boundaries
//	GET /healthz, GET /readyz, GET /metrics, GET / (the web page)
//
// Modules' routes (host.Route) are served beside these, e.g. the delivery
// module's GET /v1/subscriptions/{id} (a subscription's delivery status).
//
// The only writes, off by default ([WritableSubscriptions],
// [SubscriptionWrites]; 405 naming --subscription-writes while off):
//
//	PUT    /v1/subscriptions/{id}          a subscription, JSON {url, secret, fence_ids, fence_tags, device_groups,
//	                                       types (enter|exit|dwell), enabled (default true)}; checked with
//	                                       delivery.Validate (400 with the reasons), body at most
//	                                       [MaxSubscriptionBody] (413), written keyed by id
//	DELETE /v1/subscriptions/{id}          a tombstone
//	POST   /v1/subscriptions/{id}/disable  the latest record with enabled=false (404 if none)
//
// The secret is write-only: no answer carries it. Cross-origin browser
// writes are refused (403). The API has no authentication of its own: turn
// writes on only behind a proxy that authenticates.
//
// # Invariants
//
//   - Never stale, never empty by accident: while [Readiness] says not
//     ready (a view recovering, the catalogue loading, the feed not yet
//     positioned), every data read answers 503 with the reason, never a 200
//     with partial data. /readyz answers the same way.
//   - Every answer says how old its data is: [DataAgeHeader] (and
//     data_age_seconds in /readyz) is the time since the views last
//     confirmed with the brokers, once a second, that they hold every record
//     of their tables. A view that cannot reach the brokers keeps its copy,
//     and once the age passes [MaxStaleness] (default
//     [DefaultMaxStaleness]) /readyz and reads answer 503 saying how old.
//   - The trigger feed backs off (jittered, capped) while fetches fail and
//     logs that at most once per 10 s; a recreated triggers topic is
//     followed from its start.
//   - Errors are JSON {"error": "...", "status": N} with that HTTP status:
//     400 for a malformed id or parameter, 404 for an unknown fence, device
//     or route, 405 with Allow for a method other than GET or HEAD on a
//     route (but the subscription writes when on), 503 while not ready, 500
//     for a failing source. A 200 never carries an error.
//   - Ids are validated with the producers' key rules
//     ([topology.ValidateKey]: non-empty, valid UTF-8, at most 255 bytes)
//     before any lookup.
//   - Every key lookup uses the pinned murmur2 partitioner: the views are
//     built by view.New, and partition numbers in responses come from
//     [topology.PartitionFor], so a key written by any Java-compatible
//     producer is found.
//   - The live feed never blocks the consumer: each subscriber has a
//     bounded buffer, and a slow one loses triggers (counted, and told with
//     a "dropped" event) instead of slowing the others.
//   - Replicas are independent: no consumer group, no committed offsets;
//     by default each replica holds whole copies of the tables and answers
//     every key. A sharded replica ([Sharding]) holds some partitions
//     and reads a key of any other partition from the one peer holding it
//     (a peer answers only what it holds, so reads never loop); reads that
//     need every partition merge all replicas' shares. Either way every
//     replica answers every key with the same JSON.
//     Its trigger feed reads the last [DefaultHistory] triggers of each
//     partition back into its history at start-up, then follows the end of
//     the topic.
//   - The web page is served from the binary (embed), Leaflet included
//     (web/vendor/leaflet, its licence with it): no CDN. The only thing it
//     loads from elsewhere is the basemap tiles of [MapConfig] (none by
//     default in NewServer; OpenStreetMap's in the binaries, --tiles none
//     offline), and it works the same when they fail to load.
package fenceview
