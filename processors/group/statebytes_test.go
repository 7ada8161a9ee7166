package group_test

import (
	"context"
	"testing"

	"github.com/lovoo/goka/tester"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology/cluster"
)

// StateBytes is the stored state's encoding: nil for a key with none, the
// bytes State decodes otherwise, and nil again once the handler set the
// state in the callback.
func TestStateBytes(t *testing.T) {
	type seen struct {
		before *state // decoded from StateBytes at the callback's start
		none   bool   // StateBytes was nil at the start
		after  bool   // StateBytes was nil after SetState
	}
	var got []seen
	handle := func(c *ctxT, p *testpb.Ping) error {
		var s seen
		if b := c.StateBytes(); b == nil {
			s.none = true
		} else {
			s.before = &state{}
			if err := proto.Unmarshal(b, s.before); err != nil {
				t.Errorf("StateBytes does not decode: %v", err)
			}
			if !proto.Equal(s.before, c.State()) {
				t.Errorf("StateBytes %v, State %v", s.before, c.State())
			}
		}
		st := c.State()
		if st == nil {
			st = &state{}
		}
		st.Pings++
		c.SetState(st)
		s.after = c.StateBytes() == nil
		got = append(got, s)
		return nil
	}
	tt := tester.New(t)
	proc, err := validGroup(testTopology(2), handle).Processor(context.Background(), cluster.Config{}, group.Tester(tt))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, proc.Run)
	tt.Consume(topicIn, "d1", &testpb.Ping{DeviceId: "d1", Hlc: 1})
	tt.Consume(topicIn, "d1", &testpb.Ping{DeviceId: "d1", Hlc: 2})
	if len(got) != 2 {
		t.Fatalf("%d callbacks, want 2", len(got))
	}
	if !got[0].none || !got[0].after {
		t.Errorf("first callback: %+v, want no bytes before and after SetState", got[0])
	}
	if got[1].none || got[1].before.GetPings() != 1 || !got[1].after {
		t.Errorf("second callback: %+v, want the stored state (1 ping), none after SetState", got[1])
	}
}
