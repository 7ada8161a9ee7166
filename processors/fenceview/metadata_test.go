package fenceview_test

import (
	"slices"
	"testing"

	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fenceview"
)

// /v1/fences/{id} shows a fence's tags, groups and metadata as the
// catalogue holds them.
func TestFenceDetailShowsTagsAndMetadata(t *testing.T) {
	f := newFixture(t)
	fs, err := fences.ParseFences([]byte(`{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"depot","radius_m":50,
		"tags":["depot","north"],"groups":["fleet-a"],"owner":"ops","dock":{"bays":4}},"geometry":{"type":"Point","coordinates":[13.4,52.5]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cat.Apply(catalogueVersion+1, fs, nil); err != nil {
		t.Fatal(err)
	}
	var d fenceview.FenceDetail
	f.get(t, "/v1/fences/depot", &d)
	if !slices.Equal(d.Tags, []string{"depot", "north"}) || !slices.Equal(d.Groups, []string{"fleet-a"}) || string(d.Metadata) != `{"dock":{"bays":4},"owner":"ops"}` {
		t.Fatalf("depot: tags %v groups %v metadata %s", d.Tags, d.Groups, d.Metadata)
	}
	d = fenceview.FenceDetail{}
	f.get(t, "/v1/fences/station-zoo", &d)
	if d.Tags != nil || d.Metadata != nil {
		t.Fatalf("fence without tags or metadata: tags %v metadata %s", d.Tags, d.Metadata)
	}
}
