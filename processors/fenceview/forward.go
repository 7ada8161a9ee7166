package fenceview

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/topology"
)

// A sharded replica answers a key it does not hold by reading the key's
// record from the replica that does, over the internal records route below,
// and builds the response itself: every replica answers every key with the
// same JSON. Fence-level reads that need every partition (listing fences,
// summing a fence's salted parts) read their own partitions and each peer's,
// and merge. A replica serves only what it holds, never forwarding again, so
// a wrong --peers list gives an error, not a loop.

// recordsPath is the internal route a replica serves its held records on.
const recordsPath = "/v1/internal/records/"

// recordsContentType frames a stream of records: per record the uvarint
// length of the key, the key, the uvarint length of the value, the value
// (the table's state message in protobuf); then a zero key length, so a cut
// stream is an error, never a short answer.
const recordsContentType = "application/x-fencestream-records"

// peerTimeout bounds one read from a peer (a whole stream of records included).
const peerTimeout = 30 * time.Second

// table is one table as the sources read it: a whole local view, or a shard.
type table[M any, PM codecs.Message[M]] interface {
	Get(key string) (PM, error)
	Each(fn func(key string, v PM) bool) error
}

// router knows which peer holds each partition not held here.
type router struct {
	n     int32
	owner map[int32]*peerClient
	peers []*peerClient
}

func newRouter(s *Shard, n int32, hc *http.Client) (*router, error) {
	if err := s.Validate(n); err != nil {
		return nil, err
	}
	r := &router{n: n, owner: map[int32]*peerClient{}}
	for _, p := range s.Peers {
		base, _ := url.Parse(p.URL) // validated
		pc := &peerClient{base: base, parts: p.Partitions, hc: hc}
		r.peers = append(r.peers, pc)
		for _, part := range p.Partitions {
			r.owner[part] = pc
		}
	}
	return r, nil
}

// peerClient reads records from one peer.
type peerClient struct {
	base  *url.URL
	parts []int32
	hc    *http.Client
}

func (c *peerClient) url(tbl string, q url.Values) string {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + recordsPath + url.PathEscape(tbl)
	u.RawQuery = q.Encode()
	return u.String()
}

// do GETs u and checks the answer: 404 gives found false; 503 wraps
// ErrNotReady with the peer's reason.
func (c *peerClient) do(u string) (body io.ReadCloser, found bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, false, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		cancel()
		return nil, false, fmt.Errorf("%w: peer %s unreachable: %v", ErrNotReady, c.base, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return cancelOnClose{resp.Body, cancel}, true, nil
	case http.StatusNotFound:
		resp.Body.Close()
		cancel()
		return nil, false, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	cancel()
	if resp.StatusCode == http.StatusServiceUnavailable {
		return nil, false, fmt.Errorf("%w: peer %s: %s", ErrNotReady, c.base, strings.TrimSpace(string(msg)))
	}
	return nil, false, fmt.Errorf("peer %s: %s: %s", c.base, resp.Status, strings.TrimSpace(string(msg)))
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error { err := c.ReadCloser.Close(); c.cancel(); return err }

// get reads key's record of tbl (nil when absent).
func (c *peerClient) get(tbl, key string) ([]byte, error) {
	body, found, err := c.do(c.url(tbl, url.Values{"key": {key}}))
	if err != nil || !found {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("%w: peer %s: reading %s/%s: %v", ErrNotReady, c.base, tbl, key, err)
	}
	return b, nil
}

// each streams every record of tbl the peer holds for this replica.
func (c *peerClient) each(tbl string, fn func(key string, val []byte) bool) error {
	body, found, err := c.do(c.url(tbl, url.Values{"partitions": {FormatPartitions(c.parts)}}))
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("peer %s does not serve table %s", c.base, tbl)
	}
	defer body.Close()
	br := bufio.NewReader(body)
	for {
		key, err := readFrame(br)
		if err != nil {
			return fmt.Errorf("%w: peer %s: records of %s cut short: %v", ErrNotReady, c.base, tbl, err)
		}
		if len(key) == 0 {
			return nil // end of stream
		}
		val, err := readFrame(br)
		if err != nil {
			return fmt.Errorf("%w: peer %s: records of %s cut short: %v", ErrNotReady, c.base, tbl, err)
		}
		if !fn(string(key), val) {
			return nil
		}
	}
}

// maxFrame bounds one key or value read from a peer.
const maxFrame = 64 << 20

func readFrame(r *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

func writeFrame(w *bufio.Writer, b []byte) error {
	var hdr [binary.MaxVarintLen64]byte
	if _, err := w.Write(hdr[:binary.PutUvarint(hdr[:], uint64(len(b)))]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// shardedTable is a table whose partitions are spread over replicas: the
// local partial view, then the peers.
type shardedTable[M any, PM codecs.Message[M]] struct {
	local *view.View[M, PM]
	r     *router
}

func (t shardedTable[M, PM]) Get(key string) (PM, error) {
	msg, err := t.local.Get(key)
	var nh *view.NotHeldError
	if !errors.As(err, &nh) {
		return msg, err
	}
	peer, ok := t.r.owner[nh.Partition]
	if !ok {
		return nil, fmt.Errorf("no replica holds partition %d of %s", nh.Partition, t.local.Topic())
	}
	raw, err := peer.get(t.local.Topic(), key)
	if err != nil || raw == nil {
		return nil, err
	}
	return decodeRecord[M, PM](raw)
}

func (t shardedTable[M, PM]) Each(fn func(key string, v PM) bool) error {
	more := true
	if err := t.local.Each(func(k string, v PM) bool { more = fn(k, v); return more }); err != nil || !more {
		return err
	}
	for _, p := range t.r.peers {
		var derr error
		err := p.each(t.local.Topic(), func(k string, raw []byte) bool {
			msg, err := decodeRecord[M, PM](raw)
			if err != nil {
				derr = err
				return false
			}
			more = fn(k, msg)
			return more
		})
		if err = errors.Join(err, derr); err != nil || !more {
			return err
		}
	}
	return nil
}

func decodeRecord[M any, PM codecs.Message[M]](raw []byte) (PM, error) {
	msg := PM(new(M))
	if err := protov2.Unmarshal(raw, msg); err != nil {
		return nil, fmt.Errorf("record from peer: %w", err)
	}
	return msg, nil
}

// recordServer serves the records this replica holds of one table.
type recordServer interface {
	get(key string) ([]byte, error) // nil: absent
	each(parts map[int32]bool, fn func(key string, val []byte) error) error
}

type viewRecords[M any, PM codecs.Message[M]] struct {
	v *view.View[M, PM]
	n int32
}

var recordMarshal = protov2.MarshalOptions{Deterministic: true}

func (r viewRecords[M, PM]) get(key string) ([]byte, error) {
	msg, err := r.v.Get(key)
	if err != nil || msg == nil {
		return nil, err
	}
	return recordMarshal.Marshal(msg)
}

func (r viewRecords[M, PM]) each(parts map[int32]bool, fn func(string, []byte) error) error {
	var ferr error
	err := r.v.Each(func(k string, msg PM) bool {
		if !parts[topology.PartitionFor(k, r.n)] {
			return true
		}
		b, err := recordMarshal.Marshal(msg)
		if err == nil {
			err = fn(k, b)
		}
		ferr = err
		return err == nil
	})
	return errors.Join(err, ferr)
}

// recordsHandler serves GET /v1/internal/records/{table}: ?key=K answers
// that key's record (404 when absent), ?partitions=LIST streams every record
// of those partitions. A partition not held here is 421 Misdirected Request.
func recordsHandler(tables map[string]recordServer, held []int32) http.HandlerFunc {
	heldSet := map[int32]bool{}
	for _, p := range held {
		heldSet[p] = true
	}
	return func(w http.ResponseWriter, r *http.Request) {
		rs, ok := tables[r.PathValue("table")]
		if !ok {
			writeError(w, http.StatusNotFound, "no table "+r.PathValue("table")+" here")
			return
		}
		q := r.URL.Query()
		if q.Has("key") {
			raw, err := rs.get(q.Get("key"))
			if err != nil {
				recordsError(w, err)
				return
			}
			if raw == nil {
				writeError(w, http.StatusNotFound, "no record")
				return
			}
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(raw)
			return
		}
		parts, err := ParsePartitions(q.Get("partitions"))
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		want := map[int32]bool{}
		for _, p := range parts {
			if !heldSet[p] {
				writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("partition %d is not held here (held: %s)", p, FormatPartitions(held)))
				return
			}
			want[p] = true
		}
		bw := bufio.NewWriter(w)
		started := false
		err = rs.each(want, func(k string, v []byte) error {
			if !started {
				started = true
				w.Header().Set("Content-Type", recordsContentType)
			}
			if err := writeFrame(bw, []byte(k)); err != nil {
				return err
			}
			return writeFrame(bw, v)
		})
		if err != nil {
			if !started {
				recordsError(w, err)
			}
			return // no end frame: the reader sees a cut stream
		}
		w.Header().Set("Content-Type", recordsContentType)
		_ = writeFrame(bw, nil)
		_ = bw.Flush()
	}
}

func recordsError(w http.ResponseWriter, err error) {
	var nh *view.NotHeldError
	switch {
	case errors.As(err, &nh):
		writeError(w, http.StatusMisdirectedRequest, err.Error())
	case errors.Is(err, view.ErrNotRecovered), errors.Is(err, view.ErrViewStopped), errors.Is(err, ErrNotReady):
		writeNotReady(w, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}
