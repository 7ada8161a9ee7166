package topology_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
)

func TestGeofenceValidates(t *testing.T) {
	g := geofence.Topology()
	if err := g.Validate(); err != nil {
		t.Fatalf("Geofence().Validate() = %v", err)
	}
	if err := geofence.Topology(geofence.Partitions(12)).Validate(); err != nil {
		t.Fatalf("Geofence(12).Validate() = %v", err)
	}
	for _, name := range []string{geofence.TopicPings, geofence.TopicTriggers, geofence.TopicDebouncer, geofence.TopicOccupancyMembers, geofence.TopicOccupancyChanges, geofence.TopicOccupancy, topology.TopicDeadLetter} {
		if tp := g.MustTopic(name); tp.Partitions != topology.DefaultPartitions {
			t.Errorf("%s has %d partitions, want the default %d", name, tp.Partitions, topology.DefaultPartitions)
		}
	}
	if tp := g.MustTopic(geofence.TopicPings); tp.Salting {
		t.Error("pings needs per-device order: it must not allow salting")
	}
	for _, name := range []string{geofence.TopicFences, geofence.TopicDebouncer, geofence.TopicOccupancyMembers, geofence.TopicOccupancy, topology.TopicHotKeys} {
		if tp := g.MustTopic(name); tp.Cleanup != topology.CleanupCompact {
			t.Errorf("%s is %s, want compact", name, tp.Cleanup)
		}
	}
	if _, ok := g.Boundary(geofence.GroupOccupancyMembers, geofence.TopicTriggers, geofence.TopicOccupancyChanges); !ok {
		t.Error("the occupancy changes' re-key by fence_id is not a declared boundary")
	}
}

// small is a valid two-topic topology that the tests below break one way each.
func small() *topology.Topology {
	return &topology.Topology{
		Name: "small",
		Topics: []topology.Topic{
			{Name: "pings", Key: "device_id", Partitions: 24, Cleanup: topology.CleanupDelete},
			{Name: "by-fence", Key: "fence_id", Partitions: 24, Cleanup: topology.CleanupDelete},
			{Name: "rekeyer-table", Key: "device_id", Partitions: 24, Cleanup: topology.CleanupCompact},
		},
		Processors: []topology.Processor{{
			Group:   "rekeyer",
			Streams: []string{"pings"},
			Emits:   []string{"by-fence"},
			Table:   "rekeyer-table",
			Flows: []topology.Flow{
				{From: "pings", To: "rekeyer-table"},
				{From: "pings", To: "by-fence"},
			},
		}},
		Boundaries: []topology.Boundary{{
			Processor: "rekeyer", From: "pings", To: "by-fence",
			Preserved: "per-(device, fence) order",
			Lost:      "per-device order across fences",
		}},
	}
}

func TestSmallTopologyValidates(t *testing.T) {
	if err := small().Validate(); err != nil {
		t.Fatal(err)
	}
}

func validationErrors(err error) []*topology.ValidationError {
	var out []*topology.ValidationError
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var ve *topology.ValidationError
		if errors.As(err, &ve) {
			out = append(out, ve)
		}
	}
	walk(err)
	return out
}

func TestValidateUndeclaredRekey(t *testing.T) {
	top := small()
	top.Boundaries = nil
	err := top.Validate()
	if !errors.Is(err, topology.ErrUndeclaredRekey) {
		t.Fatalf("Validate() = %v, want ErrUndeclaredRekey", err)
	}
	for _, want := range []string{"processor rekeyer", "pings (key device_id) -> by-fence (key fence_id)", "Boundary"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	ves := validationErrors(err)
	if len(ves) != 1 || ves[0].Where != "processor rekeyer" {
		t.Fatalf("want exactly one ValidationError at processor rekeyer, got %v", ves)
	}
	// Same-key flows need no boundary.
	if strings.Contains(err.Error(), "rekeyer-table (key") {
		t.Errorf("the same-key flow to the table was flagged: %v", err)
	}
}

func TestValidateEmptyBoundary(t *testing.T) {
	for _, mutate := range []func(*topology.Boundary){
		func(b *topology.Boundary) { b.Preserved = "" },
		func(b *topology.Boundary) { b.Lost = "  " },
	} {
		top := small()
		mutate(&top.Boundaries[0])
		err := top.Validate()
		if !errors.Is(err, topology.ErrEmptyBoundary) {
			t.Fatalf("Validate() = %v, want ErrEmptyBoundary", err)
		}
		if !strings.Contains(err.Error(), "pings -> by-fence") {
			t.Errorf("error %q does not name the boundary", err)
		}
	}
}

func TestValidateNotCopartitioned(t *testing.T) {
	top := small()
	top.Topics[2].Partitions = 12 // the table
	err := top.Validate()
	if !errors.Is(err, topology.ErrNotCopartitioned) {
		t.Fatalf("Validate() = %v, want ErrNotCopartitioned", err)
	}
	for _, want := range []string{"rekeyer-table has 12 partitions", "pings has 24"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// Emitted topics need not be co-partitioned with the inputs.
	top = small()
	top.Topics[1].Partitions = 7
	if err := top.Validate(); err != nil {
		t.Fatalf("an emit target with another partition count is fine, got %v", err)
	}
}

func TestValidateUndeclaredTopic(t *testing.T) {
	top := small()
	top.Processors[0].Broadcast = []string{"fences"}
	err := top.Validate()
	if !errors.Is(err, topology.ErrUndeclaredTopic) || !strings.Contains(err.Error(), `broadcast edge to "fences"`) {
		t.Fatalf("Validate() = %v, want ErrUndeclaredTopic naming fences", err)
	}
}

func TestValidateWrongTableName(t *testing.T) {
	top := small()
	top.Topics[2].Name = "rekeyer-state"
	top.Processors[0].Table = "rekeyer-state"
	top.Processors[0].Flows[0].To = "rekeyer-state"
	err := top.Validate()
	if !errors.Is(err, topology.ErrBadDeclaration) || !strings.Contains(err.Error(), `table must be named "rekeyer-table"`) {
		t.Fatalf("Validate() = %v, want a bad declaration naming Goka's table name", err)
	}
}

func TestValidateBadDeclarations(t *testing.T) {
	cases := map[string]func(*topology.Topology){
		"zero partitions":     func(t *topology.Topology) { t.Topics[1].Partitions = 0 },
		"no key":              func(t *topology.Topology) { t.Topics[1].Key = "" },
		"bad cleanup":         func(t *topology.Topology) { t.Topics[1].Cleanup = "compact,delete" },
		"declared twice":      func(t *topology.Topology) { t.Topics = append(t.Topics, t.Topics[0]) },
		"flow off the edges":  func(t *topology.Topology) { t.Processors[0].Flows[1].To = "elsewhere" },
		"boundary no flow":    func(t *topology.Topology) { t.Boundaries[0].To = "nowhere" },
		"boundary same key":   func(t *topology.Topology) { t.Boundaries[0].To = "rekeyer-table" },
		"boundary no process": func(t *topology.Topology) { t.Boundaries[0].Processor = "nobody" },
		"wrong loop name":     func(t *topology.Topology) { t.Processors[0].Loop = "by-fence" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			top := small()
			mutate(top)
			if err := top.Validate(); !errors.Is(err, topology.ErrBadDeclaration) {
				t.Fatalf("Validate() = %v, want ErrBadDeclaration", err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	top := small()
	top.Boundaries = nil
	top.Topics[2].Partitions = 12
	err := top.Validate()
	if !errors.Is(err, topology.ErrUndeclaredRekey) || !errors.Is(err, topology.ErrNotCopartitioned) {
		t.Fatalf("Validate() = %v, want both problems", err)
	}
}

func TestDescribeShowsBoundary(t *testing.T) {
	g := geofence.Topology()
	d := g.Describe()
	b, _ := g.Boundary(geofence.GroupOccupancyMembers, geofence.TopicTriggers, geofence.TopicOccupancyChanges)
	for _, want := range []string{
		"topology geofence",
		"pings",
		"partitions=24",
		"fence-triggers [device_id] -> occupancy-changes [fence_id]   ═══ ORDERING BOUNDARY",
		"═══ occupancy-members: fence-triggers (key device_id) -> occupancy-changes (key fence_id)",
		"preserved: " + b.Preserved,
		"lost:      " + b.Lost,
		"lag:       " + b.Lag,
		"reads whole (every instance): fences",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe() lacks %q:\n%s", want, d)
		}
	}
	top := small()
	top.Topics[1].Salting = true
	if !strings.Contains(top.Describe(), "hot keys may be salted") {
		t.Error("Describe() does not say which topics allow salting")
	}
}

func TestMermaidShowsBoundary(t *testing.T) {
	m := geofence.Topology().Mermaid()
	for _, want := range []string{
		"flowchart LR",
		`t_pings[("pings<br/>key: device_id<br/>24 partitions")]`,
		`p_occupancy_members ==>|"ORDERING BOUNDARY: device_id -> fence_id"| t_occupancy_changes`,
		"t_occupancy_changes --> p_occupancy",
		"t_fences -. every instance .-> p_debouncer",
		"t_pings --> p_debouncer",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("Mermaid() lacks %q:\n%s", want, m)
		}
	}
	if n, want := strings.Count(m, "==>"), len(geofence.Topology().Boundaries); n != want {
		t.Errorf("Mermaid() has %d thick edges, want exactly the %d boundaries", n, want)
	}
}

func TestTopicNamesSorted(t *testing.T) {
	names := geofence.Topology().TopicNames()
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatalf("TopicNames() not sorted: %v", names)
		}
	}
	if len(names) != len(geofence.Topology().Topics) {
		t.Fatalf("TopicNames() = %v", names)
	}
}

// A processor that declares no Flows gets them from its edges, and a derived
// re-key needs a Boundary like a declared one (before, a stream feeding a
// loop of another key with no Flow and no Boundary passed Validate).
func TestDerivedFlowsRefuseUndeclaredRekey(t *testing.T) {
	top := &topology.Topology{
		Name: "derived",
		Topics: []topology.Topic{
			{Name: "pings", Key: "device_id", Partitions: 4, Cleanup: topology.CleanupDelete},
			{Name: "stats-loop", Key: "fence_id", Partitions: 4, Cleanup: topology.CleanupDelete},
			{Name: "stats-table", Key: "fence_id", Partitions: 4, Cleanup: topology.CleanupCompact},
			{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Partitions: 4, Cleanup: topology.CleanupDelete},
		},
		Processors: []topology.Processor{{
			Group: "stats", Streams: []string{"pings"}, Loop: "stats-loop", Table: "stats-table",
			Emits: []string{topology.TopicDeadLetter},
		}},
	}
	err := top.Validate()
	if !errors.Is(err, topology.ErrUndeclaredRekey) || !strings.Contains(err.Error(), "pings (key device_id) -> stats-loop (key fence_id)") {
		t.Fatalf("Validate() = %v, want the undeclared re-key pings -> stats-loop", err)
	}
	flows := top.Processors[0].EffectiveFlows(top)
	want := map[topology.Flow]bool{
		{From: "pings", To: "stats-loop"}: true, {From: "pings", To: topology.TopicDeadLetter}: true,
		{From: "stats-loop", To: "stats-loop"}: true, {From: "stats-loop", To: topology.TopicDeadLetter}: true,
		{From: "stats-loop", To: "stats-table"}: true,
	}
	if len(flows) != len(want) {
		t.Errorf("derived flows %v, want %v", flows, want)
	}
	for _, f := range flows {
		if !want[f] {
			t.Errorf("unexpected derived flow %v (pings is device-keyed: it cannot write the fence-keyed table)", f)
		}
	}
	top.Boundaries = []topology.Boundary{{Processor: "stats", From: "pings", To: "stats-loop",
		Preserved: "per-(device, fence) order", Lost: "per-device order across fences"}}
	if err := top.Validate(); err != nil {
		t.Fatalf("with the boundary declared: %v", err)
	}
	if d := top.Describe(); !strings.Contains(d, "ORDERING BOUNDARY") {
		t.Errorf("Describe does not show the derived boundary flow:\n%s", d)
	}
}
