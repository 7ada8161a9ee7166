package fences_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/processors/fences"
)

func featureWith(props string) string {
	return `{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"depot"` + props +
		`},"geometry":{"type":"Point","coordinates":[13.4,52.5]}}]}`
}

// Tags, groups and the other properties (metadata) survive parsing and the
// fences topic's protobuf form.
func TestParseTagsGroupsMetadata(t *testing.T) {
	doc := featureWith(`,"radius_m":100,"name":"Depot","tags":["depot","north"],"groups":["fleet-a"],"owner":"ops","contact":{"phone": "123"},"min_samples":2`)
	fs, err := fences.ParseFences([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	f := fs[0]
	wantMeta := `{"contact":{"phone":"123"},"owner":"ops"}`
	if !slices.Equal(f.Tags, []string{"depot", "north"}) || !slices.Equal(f.Groups, []string{"fleet-a"}) || string(f.Metadata) != wantMeta {
		t.Fatalf("parsed tags %v groups %v metadata %s; want [depot north] [fleet-a] %s", f.Tags, f.Groups, f.Metadata, wantMeta)
	}
	p, err := f.ToProto()
	if err != nil {
		t.Fatal(err)
	}
	g, err := fences.FenceFromProto(p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Tags, f.Tags) || !slices.Equal(g.Groups, f.Groups) || string(g.Metadata) != wantMeta {
		t.Fatalf("round trip: tags %v groups %v metadata %s", g.Tags, g.Groups, g.Metadata)
	}
	if !f.Applies([]string{"x", "fleet-a"}) || f.Applies([]string{"fleet-b"}) || f.Applies(nil) {
		t.Fatal("Applies: want true only for a device in fleet-a")
	}
	open := fs[0]
	open.Groups = nil
	if !open.Applies(nil) {
		t.Fatal("a fence without groups applies to every device")
	}
}

// A fence whose metadata is over MaxMetadataBytes is refused, and with it
// the whole file, as invalid GeoJSON is; bad tags and groups likewise.
func TestParseRefusesLargeMetadataAndBadLabels(t *testing.T) {
	pad := strings.Repeat("x", fences.MaxMetadataBytes)
	okDoc := `{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"ok","radius_m":5},"geometry":{"type":"Point","coordinates":[13.4,52.5]}},`
	for _, tc := range []struct {
		props string
		want  error
		text  string
	}{
		{`,"radius_m":5,"note":"` + pad + `"`, fences.ErrMetadataTooLarge, "limit 4096"},
		{`,"radius_m":5,"tags":"depot"`, fences.ErrInvalidProperty, "properties.tags must be a list of strings"},
		{`,"radius_m":5,"groups":[1]`, fences.ErrInvalidProperty, "properties.groups must be a list of strings"},
		{`,"radius_m":5,"tags":[""]`, fences.ErrInvalidProperty, "tags entry"},
		{`,"radius_m":5,"groups":["` + strings.Repeat("g", fences.MaxLabelBytes+1) + `"]`, fences.ErrInvalidProperty, "groups entry"},
	} {
		doc := okDoc + strings.TrimPrefix(featureWith(tc.props), `{"type":"FeatureCollection","features":[`)
		fs, err := fences.ParseFences([]byte(doc))
		if !errors.Is(err, tc.want) || fs != nil || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("props %.60s: fences %d, err %v; want %v mentioning %q and no fence", tc.props, len(fs), err, tc.want, tc.text)
		}
	}
	// Just under the bound is accepted.
	under := pad[:fences.MaxMetadataBytes-len(`{"note":""}`)]
	if _, err := fences.ParseFences([]byte(featureWith(fmt.Sprintf(`,"radius_m":5,"note":%q`, under)))); err != nil {
		t.Fatalf("metadata of exactly %d bytes: %v", fences.MaxMetadataBytes, err)
	}
}
