package kafka

import (
	"context"
	"sync"
	"testing"

	"github.com/IBM/sarama"
)

// marks is a sarama session recording what reaches it, keeping the highest
// mark per partition as sarama does.
type marks struct {
	sarama.ConsumerGroupSession
	mu   sync.Mutex
	high map[int32]int64
}

func (m *marks) MarkOffset(_ string, part int32, offset int64, _ string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if offset > m.high[part] {
		m.high[part] = offset
	}
}

func (m *marks) MarkMessage(msg *sarama.ConsumerMessage, metadata string) {
	m.MarkOffset(msg.Topic, msg.Partition, msg.Offset+1, metadata)
}

func (m *marks) Context() context.Context { return context.Background() }

func (m *marks) at(part int32) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.high[part]
}

func newMarked() (*orderedSession, *marks) {
	m := &marks{high: map[int32]int64{}}
	return &orderedSession{ConsumerGroupSession: m, parts: map[topicPart]*markTracker{}}, m
}

func TestMarksWaitForEarlierInputs(t *testing.T) {
	s, m := newMarked()
	tr := s.track("in", 0)
	// Offsets with gaps (compaction, transaction markers).
	for _, o := range []int64{10, 11, 13, 17, 18} {
		tr.delivered(o)
	}
	steps := []struct {
		markOf int64 // the message whose processing finished
		want   int64 // the mark sarama holds afterwards
	}{
		{13, 0},  // 10 and 11 still running
		{11, 0},  // 10 still running
		{10, 14}, // 10, 11, 13 done: next is 14 (not 12)
		{18, 14}, // 17 still running
		{17, 19},
	}
	for _, st := range steps {
		s.MarkOffset("in", 0, st.markOf+1, "")
		if got := m.at(0); got != st.want {
			t.Fatalf("after %d finished: mark %d, want %d", st.markOf, got, st.want)
		}
	}
	if len(tr.pending)-tr.head != 0 {
		t.Errorf("%d offsets still tracked after all finished", len(tr.pending)-tr.head)
	}
}

func TestUnmarkedInputHoldsBackItsPartitionOnly(t *testing.T) {
	s, m := newMarked()
	p0, p1 := s.track("in", 0), s.track("in", 1)
	for o := range int64(100) {
		p0.delivered(o)
		p1.delivered(o)
	}
	// Every message but p0's offset 5 finishes, from many goroutines.
	var wg sync.WaitGroup
	for o := range int64(100) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o != 5 {
				s.MarkOffset("in", 0, o+1, "")
			}
			s.MarkMessage(&sarama.ConsumerMessage{Topic: "in", Partition: 1, Offset: o}, "")
		}()
	}
	wg.Wait()
	if got := m.at(0); got != 5 {
		t.Errorf("partition 0 marked %d; offset 5 never finished, so the mark must stay 5", got)
	}
	if got := m.at(1); got != 100 {
		t.Errorf("partition 1 marked %d, want 100", got)
	}
	s.MarkOffset("in", 0, 6, "")
	if got := m.at(0); got != 100 {
		t.Errorf("partition 0 marked %d once 5 finished, want 100", got)
	}
}

func TestUntrackedMarks(t *testing.T) {
	s, m := newMarked()
	tr := s.track("in", 0)
	tr.delivered(7)
	s.MarkOffset("in", 0, 5, "") // below every pending message: harmless
	if got := m.at(0); got != 5 {
		t.Errorf("mark below the pending ones: %d, want 5", got)
	}
	s.MarkOffset("in", 0, 9, "") // not delivered and above 7, which runs
	if got := m.at(0); got != 5 {
		t.Errorf("an undelivered mark passed an unfinished message: %d", got)
	}
	s.MarkOffset("other", 3, 42, "") // not a claim of the session
	if got := m.at(3); got != 42 {
		t.Errorf("a mark of an untracked partition was held: %d", got)
	}
}

// TestTrackerMemoryFollowsInFlight: with one message stuck, the tracker holds
// what was delivered since; once it finishes, that is dropped, and a stream
// with one message always in flight keeps a small array.
func TestTrackerMemoryFollowsInFlight(t *testing.T) {
	s, _ := newMarked()
	tr := s.track("in", 0)
	for o := range int64(10000) {
		tr.delivered(o)
		if o > 0 {
			s.MarkOffset("in", 0, o+1, "")
		}
	}
	if n := len(tr.pending) - tr.head; n != 10000 {
		t.Fatalf("tracked %d behind a stuck message, want 10000", n)
	}
	s.MarkOffset("in", 0, 1, "")
	if n := len(tr.pending) - tr.head; n != 0 {
		t.Fatalf("tracked %d with nothing in flight", n)
	}
	// Now always one message in flight: the finished prefix is dropped.
	tr.delivered(10000)
	for o := int64(10001); o < 100000; o++ {
		tr.delivered(o)
		s.MarkOffset("in", 0, o, "") // o-1 finished
	}
	if n := len(tr.pending) - tr.head; n != 1 || cap(tr.pending) > 16384 {
		t.Errorf("tracked %d (cap %d) with one message in flight", n, cap(tr.pending))
	}
}

type fakeClaim struct {
	sarama.ConsumerGroupClaim
	msgs chan *sarama.ConsumerMessage
}

func (c *fakeClaim) Topic() string                            { return "in" }
func (c *fakeClaim) Partition() int32                         { return 0 }
func (c *fakeClaim) Messages() <-chan *sarama.ConsumerMessage { return c.msgs }

// stopsAfter is a Goka stand-in: it marks each message it reads, in reverse
// pairs, and returns after n messages although the claim goes on.
type stopsAfter struct {
	sarama.ConsumerGroupHandler
	n    int
	seen []int64
}

func (h *stopsAfter) Setup(sarama.ConsumerGroupSession) error { return nil }
func (h *stopsAfter) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.seen = append(h.seen, m.Offset)
		if len(h.seen)%2 == 0 { // the later of a pair is acknowledged first
			s.MarkMessage(m, "")
			s.MarkOffset("in", 0, h.seen[len(h.seen)-2]+1, "")
		}
		if len(h.seen) == h.n {
			return nil
		}
	}
	return nil
}

// TestHandlerForwardsInOrderAndStops: Goka sees every message in order, its
// marks reach sarama in order, and a Goka ConsumeClaim that returns while
// the claim is still open (a partition processor stopping on an error) does
// not leave the kit's ConsumeClaim waiting for a message that never comes.
func TestHandlerForwardsInOrderAndStops(t *testing.T) {
	m := &marks{high: map[int32]int64{}}
	inner := &stopsAfter{n: 4}
	h := newInOrder(inner)
	if err := h.Setup(m); err != nil {
		t.Fatal(err)
	}
	claim := &fakeClaim{msgs: make(chan *sarama.ConsumerMessage, 8)}
	for _, o := range []int64{3, 4, 6, 9} {
		claim.msgs <- &sarama.ConsumerMessage{Topic: "in", Partition: 0, Offset: o}
	}
	if err := h.ConsumeClaim(m, claim); err != nil { // returns although msgs stays open
		t.Fatal(err)
	}
	if len(inner.seen) != 4 || inner.seen[0] != 3 || inner.seen[3] != 9 {
		t.Errorf("Goka saw %v, want [3 4 6 9]", inner.seen)
	}
	if got := m.at(0); got != 10 {
		t.Errorf("marked %d, want 10", got)
	}
}

// markEach is a Goka stand-in that marks every message it reads.
type markEach struct{ sarama.ConsumerGroupHandler }

func (markEach) Setup(sarama.ConsumerGroupSession) error { return nil }
func (markEach) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
	}
	return nil
}

// BenchmarkInOrderClaim: what the in-order marking adds per message (the
// forwarding hop, the tracker's note and its mark) over Goka reading the
// claim and marking directly.
func BenchmarkInOrderClaim(b *testing.B) {
	for _, tc := range []struct {
		name string
		wrap bool
	}{{"direct", false}, {"in-order", true}} {
		b.Run(tc.name, func(b *testing.B) {
			m := &marks{high: map[int32]int64{}}
			claim := &fakeClaim{msgs: make(chan *sarama.ConsumerMessage, 256)} // sarama's buffer
			go func() {
				for i := range b.N {
					claim.msgs <- &sarama.ConsumerMessage{Topic: "in", Partition: 0, Offset: int64(i)}
				}
				close(claim.msgs)
			}()
			var h sarama.ConsumerGroupHandler = markEach{}
			if tc.wrap {
				h = newInOrder(h)
			}
			if err := h.Setup(m); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			if err := h.ConsumeClaim(m, claim); err != nil {
				b.Fatal(err)
			}
			if got := m.at(0); got != int64(b.N) {
				b.Fatalf("marked %d, want %d", got, b.N)
			}
		})
	}
}
