package host

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// ErrorBody is the JSON body of every error response a route writes.
type ErrorBody struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
	// Reason says why a 503 is not ready yet (recovering, catching up).
	Reason string `json:"reason,omitempty"`
}

// WriteJSON writes v as a JSON response with status (no HTML escaping, no
// caching), as the query server's own routes do.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // JSON for programs; pages insert text with textContent
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		_ = enc.Encode(ErrorBody{Error: "encoding response: " + err.Error(), Status: status})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// WriteError writes an ErrorBody with status.
func WriteError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, ErrorBody{Error: msg, Status: status})
}

// WriteNotReady writes a 503 that asks the client to retry in a second.
func WriteNotReady(w http.ResponseWriter, reason string) {
	w.Header().Set("Retry-After", "1")
	WriteJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: "not ready: " + reason, Status: http.StatusServiceUnavailable, Reason: reason})
}
