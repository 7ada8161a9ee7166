// Command receiver is the smallest webhook receiver for fencestream's
// delivery processor: it prints each request's headers and body, checks
// the Fencestream-Signature with the subscription's secret
// (delivery.Verify), and answers 204 when it verifies, 401 when not (the
// processor retries a 401 like any other error).
//
//	go run ./processors/delivery/example/receiver --secret s3cret
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/fencestream/fencestream/processors/delivery"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8088", "listen address")
	secret := flag.String("secret", "", "the subscription's secret (required)")
	flag.Parse()
	if *secret == "" {
		fmt.Fprintln(os.Stderr, "receiver: --secret is required")
		os.Exit(2)
	}
	fmt.Printf("receiver: listening on http://%s/hook\n", *addr)
	log.Fatal(http.ListenAndServe(*addr, handler(*secret, os.Stdout, time.Now)))
}

// handler prints each request to out and verifies it against secret,
// refusing a signature older than 5 minutes (a replay).
func handler(secret string, out io.Writer, now func() time.Time) http.Handler {
	var mu sync.Mutex // one request printed at a time
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "reading the body", http.StatusBadRequest)
			return
		}
		verr := delivery.Verify(secret, r.Header.Get(delivery.HeaderSignature), body, now(), 5*time.Minute)
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s %s\n", r.Method, r.URL.Path)
		for _, h := range []string{"Content-Type", "User-Agent", delivery.HeaderSubscription, delivery.HeaderIdempotencyKey, delivery.HeaderSignature} {
			fmt.Fprintf(out, "  %s: %s\n", h, r.Header.Get(h))
		}
		fmt.Fprintf(out, "  body: %s\n", body)
		if verr != nil {
			fmt.Fprintf(out, "  signature: REFUSED (%v)\n", verr)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(out, "  signature: ok")
		w.WriteHeader(http.StatusNoContent)
	})
}
