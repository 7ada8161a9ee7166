//go:build unix

package chaostest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// procGroup is one consumer group of processor processes.
//
// The test only kills a process of a settled group: one that is stable with
// a member per process and, since the last restart of one of its processes,
// holds a member it did not hold before. That also keeps the test clear of a
// kfake bug: a member that dies during its first JoinGroup is never given a
// session timer (group.reply skips updateHeartbeat when the reply cannot be
// delivered), so it stays in the group for good, holding partitions nobody
// consumes, until a rebalance times out around it.
type procGroup struct {
	name  string
	procs []*proc
	adm   *kadm.Client

	mu     sync.Mutex
	before map[string]bool // members before the last restart; nil once settled
}

// mark records the members before a process of the group is restarted.
func (g *procGroup) mark() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := g.describe(ctx)
	m := map[string]bool{}
	if err == nil {
		m = members(d)
	}
	g.mu.Lock()
	if g.before == nil {
		g.before = m
	} else {
		for id := range m { // a restart before the last one settled
			g.before[id] = true
		}
	}
	g.mu.Unlock()
}

// settled says whether the group is settled (see procGroup), describing it.
func (g *procGroup) settled(ctx context.Context) (bool, string) {
	d, err := g.describe(ctx)
	if err != nil {
		return false, err.Error()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	fresh := g.before == nil
	for id := range members(d) {
		fresh = fresh || !g.before[id]
	}
	if g.stable(ctx, d) && fresh {
		g.before = nil
		return true, summary(d)
	}
	return false, summary(d)
}

// stable says whether the group is Stable with one member per process, every
// member consuming and every partition of every topic its members subscribe
// to assigned: each process is up and processing (dead members of killed
// processes have been dropped).
func (g *procGroup) stable(ctx context.Context, d kadm.DescribedGroup) bool {
	if d.Err != nil || d.State != "Stable" || len(d.Members) != len(g.procs) {
		return false
	}
	var topics []string
	for _, m := range d.Members {
		c, ok := m.Assigned.AsConsumer()
		if !ok || len(c.Topics) == 0 {
			return false
		}
		if j, ok := m.Join.AsConsumer(); ok {
			topics = append(topics, j.Topics...)
		}
	}
	if len(topics) == 0 {
		return false
	}
	details, err := g.adm.ListTopics(ctx, topics...)
	if err != nil {
		return false
	}
	assigned := d.AssignedPartitions()
	for _, td := range details {
		if td.Err != nil || len(assigned[td.Topic]) != len(td.Partitions) {
			return false
		}
	}
	return true
}

func (g *procGroup) describe(ctx context.Context) (kadm.DescribedGroup, error) {
	ds, err := g.adm.DescribeGroups(ctx, g.name)
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

// waitSettled waits until the group is settled. On timeout the group's
// processes dump their goroutines into their logs.
func (g *procGroup) waitSettled(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := g.settled(ctx)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			var dumps []string
			for _, p := range g.procs {
				if s := p.dumpStacks(); s != "" {
					dumps = append(dumps, p.name+s)
				}
			}
			return fmt.Errorf("group %s not settled with %d processing members within %v (last: %s); %s",
				g.name, len(g.procs), timeout, last, strings.Join(dumps, "; "))
		case <-tick.C:
		}
	}
}
