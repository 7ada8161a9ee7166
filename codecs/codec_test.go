package codecs_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/lovoo/goka"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	pb "github.com/fencestream/fencestream/codecs/geofencepb"
)

// Compile-time: the codec is what Goka asks for.
var _ goka.Codec = codecs.For[pb.Ping]()

func roundTrip[M any, P codecs.Message[M]](t *testing.T, want P) {
	t.Helper()
	c := codecs.For[M, P]()
	data, err := c.Encode(want)
	if err != nil {
		t.Fatalf("Encode(%T): %v", want, err)
	}
	v, err := c.Decode(data)
	if err != nil {
		t.Fatalf("Decode never returns an error, got %v", err)
	}
	got, ok := v.(P)
	if !ok {
		t.Fatalf("Decode returned %T (%v), want %T", v, v, want)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("round trip of %T:\n got %v\nwant %v", want, got, want)
	}
	// The typed forms agree with the goka.Codec forms.
	data2, err := c.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got2, err := c.Unmarshal(data2)
	if err != nil || !proto.Equal(got2, want) {
		t.Fatalf("Marshal/Unmarshal of %T: %v, %v", want, got2, err)
	}
}

func TestRoundTripEveryMessage(t *testing.T) {
	m := v1Messages()
	roundTrip(t, m["Ping"].(*pb.Ping))
	roundTrip(t, m["DebounceSettings"].(*pb.DebounceSettings))
	roundTrip(t, m["Fence"].(*pb.Fence))
	roundTrip(t, m["Trigger"].(*pb.Trigger))
	roundTrip(t, m["FenceState"].(*pb.FenceState))
	roundTrip(t, m["DeviceState"].(*pb.DeviceState))
	roundTrip(t, m["Member"].(*pb.Member))
	roundTrip(t, m["Occupancy"].(*pb.Occupancy))
	roundTrip(t, m["HotKey"].(*pb.HotKey))
	// Zero values round-trip too (they encode to no bytes).
	roundTrip(t, &pb.Ping{})
	roundTrip(t, &pb.Occupancy{})
}

func TestDecodeGarbageYieldsPoison(t *testing.T) {
	garbage := map[string][]byte{
		"truncated varint":        {0x08, 0xff, 0xff},
		"length past the end":     {0x0a, 0x20, 'd', 'e', 'v'},
		"invalid wire type":       {0x0f, 0x01},
		"field number zero":       {0x00, 0x01},
		"invalid UTF-8 in string": {0x0a, 0x02, 0xff, 0xfe},
		"plain text":              []byte("this is not a protobuf message at all \xff"),
	}
	c := codecs.For[pb.Ping]()
	for name, data := range garbage {
		t.Run(name, func(t *testing.T) {
			in := bytes.Clone(data)
			v, err := c.Decode(in)
			if err != nil {
				t.Fatalf("Decode returned an error %v; it must yield a *Poison instead", err)
			}
			p, ok := v.(*codecs.Poison)
			if !ok {
				t.Fatalf("Decode(% x) = %T %v, want *Poison", data, v, v)
			}
			if p.Schema != "fencestream.v1.Ping" {
				t.Errorf("Poison.Schema = %q, want fencestream.v1.Ping", p.Schema)
			}
			if p.Err == nil || !bytes.Equal(p.Data, data) {
				t.Errorf("Poison = %+v, want the reason and the raw bytes", p)
			}
			if !strings.Contains(p.Error(), "undecodable fencestream.v1.Ping") {
				t.Errorf("Poison.Error() = %q", p.Error())
			}
			// The poison keeps its own copy: Goka reuses message buffers.
			in[0] ^= 0xff
			if !bytes.Equal(p.Data, data) {
				t.Error("Poison.Data aliases the input buffer")
			}
			if _, err := c.Unmarshal(data); err == nil {
				t.Error("Unmarshal (the typed form) must return the error")
			}
		})
	}
	// Poison for another schema names that schema.
	v, _ := codecs.For[pb.Occupancy]().Decode([]byte{0x0a, 0x20})
	if p, ok := v.(*codecs.Poison); !ok || p.Schema != "fencestream.v1.Occupancy" {
		t.Fatalf("Occupancy garbage = %#v", v)
	}
}

func TestDecodeEmptyIsZeroMessage(t *testing.T) {
	v, err := codecs.For[pb.Ping]().Decode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := v.(*pb.Ping); !ok || !proto.Equal(p, &pb.Ping{}) {
		t.Fatalf("Decode(nil) = %#v, want an empty *Ping", v)
	}
}

func TestEncodeWrongTypeErrors(t *testing.T) {
	c := codecs.For[pb.Ping]()
	for _, v := range []any{&pb.Fence{FenceId: "f"}, pb.Ping{}, "device-1", nil, &codecs.Poison{}} {
		data, err := c.Encode(v)
		if err == nil {
			t.Errorf("Encode(%T) = % x, want an error", v, data)
			continue
		}
		if !strings.Contains(err.Error(), "fencestream.v1.Ping") {
			t.Errorf("Encode(%T) error %q does not name the schema", v, err)
		}
	}
}

func TestAs(t *testing.T) {
	ping := &pb.Ping{DeviceId: "dev-1"}
	if m, p, ok := codecs.As[pb.Ping](ping); !ok || p != nil || m != ping {
		t.Errorf("As(*Ping) = %v, %v, %v", m, p, ok)
	}
	if m, p, ok := codecs.As[pb.Ping](nil); ok || p != nil || m != nil {
		t.Errorf("As(nil) = %v, %v, %v; want no value and no poison", m, p, ok)
	}
	if m, p, ok := codecs.As[pb.Ping]((*pb.Ping)(nil)); ok || p != nil || m != nil {
		t.Errorf("As((*Ping)(nil)) = %v, %v, %v; want no value", m, p, ok)
	}
	poison := &codecs.Poison{Schema: "fencestream.v1.Ping", Err: errors.New("bad")}
	if m, p, ok := codecs.As[pb.Ping](poison); ok || p != poison || m != nil {
		t.Errorf("As(*Poison) = %v, %v, %v; want the poison back", m, p, ok)
	}
	// A value of another type is a wiring mistake; it comes back as poison
	// naming the expected schema, never as a panic.
	m, p, ok := codecs.As[pb.Ping](&pb.Fence{})
	if ok || m != nil || p == nil || p.Schema != "fencestream.v1.Ping" || !strings.Contains(p.Err.Error(), "*geofencepb.Fence") {
		t.Errorf("As(*Fence) = %v, %+v, %v", m, p, ok)
	}
	// Through the codec: Decode then As.
	data, _ := codecs.For[pb.Ping]().Encode(ping)
	v, _ := codecs.For[pb.Ping]().Decode(data)
	if m, _, ok := codecs.As[pb.Ping](v); !ok || m.GetDeviceId() != "dev-1" {
		t.Errorf("As(Decode(Encode(ping))) = %v, %v", m, ok)
	}
	v, _ = codecs.For[pb.Ping]().Decode([]byte{0xff})
	if _, p, ok := codecs.As[pb.Ping](v); ok || p == nil {
		t.Errorf("As(Decode(garbage)) = %v, %v; want poison", p, ok)
	}
}

// Bytes already encoded pass through: the kit encodes an output once, records
// it, and replays the same bytes after a crash.
func TestEncodePassesEncodedBytesThrough(t *testing.T) {
	want, err := proto.Marshal(&pb.Ping{DeviceId: "d", Hlc: 7})
	if err != nil {
		t.Fatal(err)
	}
	got, err := codecs.For[pb.Ping]().Encode(want)
	if err != nil || string(got) != string(want) {
		t.Fatalf("Encode(bytes) = %x, %v; want %x", got, err, want)
	}
}
