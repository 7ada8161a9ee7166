// Package httpguard serves HTTP with bounds a hostile or careless client
// cannot stretch: read, write and idle timeouts, a cap on open connections and
// an allow-list of Host headers.
//
// Invariant: a guarded server never holds more than its connection cap of
// client connections. A new connection above the cap first closes the
// longest-idle one (an idle keep-alive or a connection that has not finished
// sending a request); only when every connection is busy with a request is the
// newcomer answered 503 and closed, at once, instead of queueing. So idle
// connections can neither exhaust the process's file descriptors nor keep
// /readyz from answering. Requests whose Host is not allowed get 421 before
// any handler runs (DNS rebinding: a page on another origin resolving its name
// to 127.0.0.1 must not read the API).
package httpguard
