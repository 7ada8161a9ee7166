//go:build unix

package chaostest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// procGroup is one consumer group of processor processes.
type procGroup struct {
	name   string
	procs  []*proc
	inputs int // partitions its members must cover between them
}

// stable says whether the group is Stable with one member per process, every
// member consuming and every input partition assigned: each process is up and
// processing (dead members of killed processes have been dropped).
func (g *procGroup) stable(d kadm.DescribedGroup) bool {
	if d.Err != nil || d.State != "Stable" || len(d.Members) != len(g.procs) {
		return false
	}
	for _, m := range d.Members {
		c, ok := m.Assigned.AsConsumer()
		if !ok || len(c.Topics) == 0 {
			return false
		}
	}
	n := 0
	for _, ps := range d.AssignedPartitions() {
		n += len(ps)
	}
	return n == g.inputs
}

func (g *procGroup) describe(ctx context.Context, adm *kadm.Client) (kadm.DescribedGroup, error) {
	ds, err := adm.DescribeGroups(ctx, g.name)
	if err != nil {
		return kadm.DescribedGroup{}, err
	}
	d, ok := ds[g.name]
	if !ok {
		return kadm.DescribedGroup{}, fmt.Errorf("group %s not described", g.name)
	}
	return d, nil
}

func members(d kadm.DescribedGroup) map[string]bool {
	m := map[string]bool{}
	for _, mem := range d.Members {
		m[mem.MemberID] = true
	}
	return m
}

func summary(d kadm.DescribedGroup) string {
	var ms []string
	for _, m := range d.Members {
		n := 0
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				n += len(t.Partitions)
			}
		}
		ms = append(ms, fmt.Sprintf("%s(%d partitions)", m.MemberID, n))
	}
	sort.Strings(ms)
	return fmt.Sprintf("state %s, %d members: %s", d.State, len(d.Members), strings.Join(ms, " "))
}

// waitStable waits until the group is stable and, when old is given, holds a
// member not in old (the restarted process has joined). On timeout the
// group's processes dump their goroutines into their logs.
func (g *procGroup) waitStable(adm *kadm.Client, old map[string]bool, timeout time.Duration) (kadm.DescribedGroup, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := "not described yet"
	for {
		d, err := g.describe(ctx, adm)
		if err == nil {
			last = summary(d)
			fresh := old == nil
			for id := range members(d) {
				fresh = fresh || !old[id]
			}
			if g.stable(d) && fresh {
				return d, nil
			}
		}
		select {
		case <-ctx.Done():
			var dumps []string
			for _, p := range g.procs {
				if s := p.dumpStacks(); s != "" {
					dumps = append(dumps, p.name+s)
				}
			}
			return d, fmt.Errorf("group %s not stable with %d processing members within %v (last: %s); %s",
				g.name, len(g.procs), timeout, last, strings.Join(dumps, "; "))
		case <-tick.C:
		}
	}
}
