package delivery_test

import (
	"strings"
	"testing"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery"
	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
)

// A subscription filtering on fence tags matches a trigger whose fence
// carries one of them; on device groups, one whose device is in one of
// them; both filters, and the older ones, must all pass.
func TestMatchesTagsAndGroups(t *testing.T) {
	sub := func(tags, groups []string) *deliverypb.Subscription {
		return &deliverypb.Subscription{Id: "s", Url: "https://x.test/h", Secret: "k", FenceTags: tags, DeviceGroups: groups, Enabled: true}
	}
	trig := func(tags, groups []string) *geofencepb.Trigger {
		return &geofencepb.Trigger{FenceId: "depot", Type: geofencepb.TriggerType_TRIGGER_TYPE_ENTER, FenceTags: tags, DeviceGroups: groups}
	}
	for _, tc := range []struct {
		name string
		s    *deliverypb.Subscription
		tr   *geofencepb.Trigger
		want bool
	}{
		{"tag shared", sub([]string{"north", "loading"}, nil), trig([]string{"depot", "loading"}, nil), true},
		{"tag not carried", sub([]string{"north"}, nil), trig([]string{"depot"}, []string{"north"}), false},
		{"fence without tags", sub([]string{"north"}, nil), trig(nil, nil), false},
		{"group shared", sub(nil, []string{"fleet-a"}), trig(nil, []string{"fleet-b", "fleet-a"}), true},
		{"group not the device's", sub(nil, []string{"fleet-a"}), trig([]string{"fleet-a"}, []string{"fleet-b"}), false},
		{"device without groups", sub(nil, []string{"fleet-a"}), trig(nil, nil), false},
		{"both pass", sub([]string{"depot"}, []string{"fleet-a"}), trig([]string{"depot"}, []string{"fleet-a"}), true},
		{"tag passes, group fails", sub([]string{"depot"}, []string{"fleet-a"}), trig([]string{"depot"}, []string{"fleet-b"}), false},
		{"no filter", sub(nil, nil), trig(nil, nil), true},
	} {
		if got := delivery.Matches(tc.s, tc.tr); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Matching (the set) applies the same filters.
	set := delivery.NewSubscriptions()
	a := sub([]string{"depot"}, nil)
	a.Id = "by-tag"
	b := sub(nil, []string{"fleet-a"})
	b.Id = "by-group"
	set.Put(a)
	set.Put(b)
	got := set.Matching(trig([]string{"depot"}, []string{"fleet-b"}))
	if len(got) != 1 || got[0].GetId() != "by-tag" {
		t.Fatalf("Matching: %v, want only by-tag", got)
	}
}

// Validate accepts fence tags and device groups, and refuses empty or
// oversized ones.
func TestValidateTagsAndGroups(t *testing.T) {
	s := &deliverypb.Subscription{Id: "s", Url: "https://x.test/h", Secret: "k", FenceTags: []string{"depot"}, DeviceGroups: []string{"fleet-a"}}
	if err := delivery.Validate(s); err != nil {
		t.Fatalf("tags and groups refused: %v", err)
	}
	s.FenceTags = []string{""}
	s.DeviceGroups = []string{strings.Repeat("g", delivery.MaxLabelBytes+1)}
	err := delivery.Validate(s)
	if err == nil || !strings.Contains(err.Error(), "fence tag must be") || !strings.Contains(err.Error(), "device group must be") {
		t.Fatalf("bad tag and group: %v", err)
	}
}

// The body a subscription receives carries the fence's name and tags and the
// device's groups, so the receiver needs no second call.
func TestBodyCarriesFenceMetadata(t *testing.T) {
	b, err := delivery.Body("s", &geofencepb.Trigger{TriggerId: "t", FenceId: "depot", FenceName: "Depot", FenceTags: []string{"north"}, DeviceGroups: []string{"fleet-a"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"fence_name":"Depot"`, `"fence_tags":["north"]`, `"device_groups":["fleet-a"]`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("body lacks %s: %s", w, b)
		}
	}
}
