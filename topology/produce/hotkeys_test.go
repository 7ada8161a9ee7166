package produce

import (
	"math"
	"strings"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestHotKeys(salting bool, keyLimit int) (*hotKeys, *fakeClock) {
	clk := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	return newHotKeys("t", salting, keyLimit, HotKeyPolicy{Threshold: 10, Window: time.Second, SaltBuckets: 3, Now: clk.now}), clk
}

func TestHotKeysDisabled(t *testing.T) {
	h := newHotKeys("t", true, 255, HotKeyPolicy{Threshold: 0, Window: time.Second, SaltBuckets: 3, Now: time.Now})
	if h != nil {
		t.Fatal("threshold 0 must turn detection off")
	}
	for range 1000 {
		if k, d := h.observe("k"); k != "k" || d != nil {
			t.Fatal("a disabled tracker changed a key")
		}
	}
}

func TestHotKeySaltedOnceAndRoundRobin(t *testing.T) {
	h, clk := newTestHotKeys(true, 255)
	var keys []string
	decisions := 0
	for range 16 {
		k, d := h.observe("dev")
		keys = append(keys, k)
		if d != nil {
			decisions++
			if !d.GetSalted() || d.GetSaltBuckets() != 3 || d.GetKey() != "dev" || d.GetTopic() != "t" || d.GetRatePerS() != 11 {
				t.Fatalf("decision %v", d)
			}
			if d.GetDecidedAtMs() != clk.t.UnixMilli() {
				t.Fatalf("decided at %d, want %d", d.GetDecidedAtMs(), clk.t.UnixMilli())
			}
		}
	}
	want := "dev dev dev dev dev dev dev dev dev dev dev#0 dev#1 dev#2 dev#0 dev#1 dev#2"
	if got := strings.Join(keys, " "); got != want {
		t.Fatalf("keys\n got %s\nwant %s", got, want)
	}
	if decisions != 1 {
		t.Fatalf("%d decisions, want one", decisions)
	}
	// Salting is sticky, also after the key cools down and windows pass.
	clk.advance(10 * time.Second)
	if k, d := h.observe("dev"); k != "dev#0" || d != nil {
		t.Fatalf("cooled salted key went to %q (decision %v)", k, d)
	}
}

func TestHotKeyReportedOncePerWindowWithoutSalting(t *testing.T) {
	h, clk := newTestHotKeys(false, 255)
	reports := 0
	for window := range 3 {
		for range 25 {
			k, d := h.observe("dev")
			if k != "dev" {
				t.Fatalf("key changed to %q on a topic without salting", k)
			}
			if d != nil {
				reports++
				if d.GetSalted() {
					t.Fatal("reported as salted")
				}
			}
		}
		if reports != window+1 {
			t.Fatalf("after window %d: %d reports, want %d", window, reports, window+1)
		}
		clk.advance(time.Second)
	}
	// A key at the threshold (10 per second) is not hot.
	for range 10 {
		if _, d := h.observe("steady"); d != nil {
			t.Fatal("a key at the threshold was reported")
		}
	}
}

func TestHotKeyNotSaltedWhenSaltedKeyWouldBeTooLong(t *testing.T) {
	h, _ := newTestHotKeys(true, 10)
	long := "0123456789" // at the limit; "0123456789#2" is not
	for range 30 {
		k, d := h.observe(long)
		if k != long {
			t.Fatalf("salted to %q, past the key limit", k)
		}
		if d != nil && d.GetSalted() {
			t.Fatal("decision says salted")
		}
	}
	if k, _ := h.observe("short"); k != "short" {
		t.Fatal(k)
	}
}

func TestHotKeysPruned(t *testing.T) {
	h, clk := newTestHotKeys(true, 255)
	for i := range 1000 {
		h.observe("cold-" + string(rune('a'+i%26)) + strings.Repeat("x", i%40))
	}
	for range 20 {
		h.observe("hot")
	}
	clk.advance(2 * time.Second)
	h.observe("new")
	if len(h.keys) != 2 {
		t.Fatalf("%d keys tracked after the window ended, want the salted key and the new one", len(h.keys))
	}
	if k, _ := h.observe("hot"); !strings.HasPrefix(k, "hot#") {
		t.Fatalf("pruning forgot a salted key: %q", k)
	}
}

func TestHotKeyWallClockBackwards(t *testing.T) {
	h, clk := newTestHotKeys(false, 255)
	for range 5 {
		h.observe("dev")
	}
	clk.advance(-time.Hour) // the window does not roll backwards
	reports := 0
	for range 10 {
		if _, d := h.observe("dev"); d != nil {
			reports++
		}
	}
	if reports != 1 {
		t.Fatalf("%d reports, want 1", reports)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := map[string]Opt{
		"key limit":    KeyLimit(0),
		"buckets":      HotKeys(HotKeyPolicy{Threshold: 5, SaltBuckets: 1}),
		"window":       HotKeys(HotKeyPolicy{Threshold: 5, Window: -time.Second}),
		"threshold":    HotKeys(HotKeyPolicy{Threshold: float64Inf()}),
		"many buckets": HotKeys(HotKeyPolicy{Threshold: 5, SaltBuckets: 5000}),
	}
	for name, o := range bad {
		cfg := defaultConfig()
		o(&cfg)
		if err := cfg.validate(); err == nil {
			t.Errorf("%s: validate accepted it", name)
		}
	}
	cfg := defaultConfig()
	HotKeys(HotKeyPolicy{Threshold: 5})(&cfg)
	if err := cfg.validate(); err != nil || cfg.hot.Window != DefaultHotKeyWindow || cfg.hot.SaltBuckets != DefaultHotKeySaltBuckets || cfg.hot.Now == nil || cfg.clock == nil || cfg.logger == nil {
		t.Fatalf("defaults not filled: %+v %v", cfg, err)
	}
	cfg = defaultConfig()
	HotKeys(HotKeyPolicy{})(&cfg) // detection off: nothing else to check
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
}

func float64Inf() float64 { return math.Inf(1) }
