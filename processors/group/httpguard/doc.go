// Package httpguard serves HTTP with bounds a hostile or careless client
// cannot stretch: read, write and idle timeouts, a cap on open connections and
// an allow-list of Host headers.
//
// Invariant: a guarded server never holds more than its connection cap of
// client connections, and never closes a connection that may carry a request
// without an answer. A new connection above the cap first closes the
// longest-idle keep-alive (as any server may); failing that, the connection
// that has waited longest without sending a request is answered 503 (with
// Retry-After) and closed, and its request, if one arrives, is not served;
// only when every connection is busy with a request is the newcomer answered
// 503, at once, instead of queueing. At most 64 answers are written at once,
// each taking at most a second; beyond that new connections wait in the
// listen backlog. So idle connections can neither exhaust the process's file
// descriptors nor keep /readyz from answering. Requests whose Host is not
// allowed get 421 before any handler runs (DNS rebinding: a page on another
// origin resolving its name to 127.0.0.1 must not read the API).
package httpguard
