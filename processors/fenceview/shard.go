package fenceview

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Shard declares which partitions of the keyed tables this replica holds and
// which peer replica holds each of the others. Partition numbers are the same
// in every table fenceview reads (the topology gives them one count), and the
// pinned partitioner decides a key's partition, so a key is answered by the
// replica that holds its partition: locally, or read from the peer.
type Shard struct {
	// Partitions held here (at least one).
	Partitions []int32
	// Peers hold the rest: together with Partitions every partition exactly once.
	Peers []Peer
}

// Peer is another replica: its base URL (http://host:port) and partitions.
type Peer struct {
	URL        string
	Partitions []int32
}

// Validate checks that the shard and its peers hold every partition of n
// exactly once.
func (s *Shard) Validate(n int32) error {
	if len(s.Partitions) == 0 {
		return errors.New("shard: no partitions held")
	}
	holder := make(map[int32]string, n)
	claim := func(who string, ps []int32) error {
		for _, p := range ps {
			if p < 0 || p >= n {
				return fmt.Errorf("shard: %s holds partition %d, but the tables have partitions 0-%d", who, p, n-1)
			}
			if prev, ok := holder[p]; ok {
				return fmt.Errorf("shard: partition %d is held by both %s and %s", p, prev, who)
			}
			holder[p] = who
		}
		return nil
	}
	if err := claim("this replica", s.Partitions); err != nil {
		return err
	}
	for _, p := range s.Peers {
		u, err := url.Parse(p.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("shard: peer %q: want a base URL such as http://127.0.0.1:8081", p.URL)
		}
		if err := claim("peer "+p.URL, p.Partitions); err != nil {
			return err
		}
	}
	var missing []int32
	for p := range n {
		if _, ok := holder[p]; !ok {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("shard: no replica holds partitions %s (give every replica in --peers)", FormatPartitions(missing))
	}
	return nil
}

// ParsePartitions reads a partition list such as "0-11" or "0,2,5-7".
func ParsePartitions(s string) ([]int32, error) {
	var out []int32
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 32)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("partitions %q: %q is not a partition number", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(strings.TrimSpace(hi), 10, 32); err != nil || b < a {
				return nil, fmt.Errorf("partitions %q: range %q must be LOW-HIGH with LOW <= HIGH", s, part)
			}
		}
		for p := a; p <= b; p++ {
			out = append(out, int32(p))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("partitions %q: empty", s)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatPartitions writes ps as ParsePartitions reads them ("0-11,14").
func FormatPartitions(ps []int32) string {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	var b strings.Builder
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(ps[i])))
		if j > i {
			b.WriteString("-" + strconv.Itoa(int(ps[j])))
		}
		i = j + 1
	}
	return b.String()
}

// ReplicaPartitions is the block of n partitions replica i of replicas holds:
// partition p belongs to replica p*replicas/n (24 over 2 replicas: 0-11, 12-23).
func ReplicaPartitions(i, replicas int, n int32) ([]int32, error) {
	if replicas < 1 || i < 0 || i >= replicas {
		return nil, fmt.Errorf("replica %d of %d: want 0 <= replica < replicas", i, replicas)
	}
	if int32(replicas) > n {
		return nil, fmt.Errorf("%d replicas for %d partitions: some would hold none", replicas, n)
	}
	var out []int32
	for p := range n {
		if int(int64(p)*int64(replicas)/int64(n)) == i {
			out = append(out, p)
		}
	}
	return out, nil
}

// ParsePeers reads a --peers list. Each entry is either a base URL, the i-th
// being replica i of the --replicas layout (ReplicaPartitions; the entry of
// this replica, self, is skipped, so every replica can be given the same
// list), or PARTITIONS=URL ("12-23=http://10.0.0.2:8080"). Entries that hold
// exactly own are this replica and skipped too.
func ParsePeers(s string, self, replicas int, n int32, own []int32) ([]Peer, error) {
	var peers []Peer
	entries := strings.Split(s, ",")
	// A PARTITIONS=URL entry's list may itself hold commas ("0,2=http://…"):
	// pieces without a URL belong to the next entry.
	var merged []string
	pending := ""
	for _, e := range entries {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case !strings.Contains(e, "://"):
			pending += e + ","
		default:
			merged = append(merged, pending+e)
			pending = ""
		}
	}
	if pending != "" {
		return nil, fmt.Errorf("peers %q: %q is not followed by =URL", s, strings.TrimSuffix(pending, ","))
	}
	for i, e := range merged {
		spec, u, hasSpec := strings.Cut(e, "=")
		var ps []int32
		var err error
		if hasSpec {
			if ps, err = ParsePartitions(spec); err != nil {
				return nil, fmt.Errorf("peer %q: %w", e, err)
			}
		} else {
			u = spec
			if replicas < 1 {
				return nil, fmt.Errorf("peer %q: a bare URL needs --replica and --replicas (or write PARTITIONS=URL)", e)
			}
			if len(merged) != replicas {
				return nil, fmt.Errorf("--peers lists %d URLs for %d replicas: give one per replica, this one included, in replica order", len(merged), replicas)
			}
			if i == self {
				continue
			}
			if ps, err = ReplicaPartitions(i, replicas, n); err != nil {
				return nil, err
			}
		}
		if slices.Equal(ps, own) {
			continue
		}
		peers = append(peers, Peer{URL: strings.TrimRight(strings.TrimSpace(u), "/"), Partitions: ps})
	}
	return peers, nil
}
