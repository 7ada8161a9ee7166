package codecs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	pb "github.com/fencestream/fencestream/codecs/geofencepb"
)

// fuzzCodec is the generic codec of one message type, with its type
// parameters erased so one fuzz target covers every topic's values.
type fuzzCodec struct {
	name   string
	decode func([]byte) (any, error)
	encode func(any) ([]byte, error)
	// as is codecs.As for the type: the value as a proto.Message (nil when
	// not ok) and the Poison it carried.
	as func(any) (proto.Message, *codecs.Poison, bool)
}

func codecOf[M any, P codecs.Message[M]](name string) fuzzCodec {
	c := codecs.For[M, P]()
	return fuzzCodec{
		name:   name,
		decode: c.Decode,
		encode: c.Encode,
		as: func(v any) (proto.Message, *codecs.Poison, bool) {
			m, poison, ok := codecs.As[M, P](v)
			if !ok {
				return nil, poison, false
			}
			return m, poison, true
		},
	}
}

// fuzzCodecs lists every message of the schema; TestFuzzCoversEveryMessage
// keeps it complete.
var fuzzCodecs = []fuzzCodec{
	codecOf[pb.Ping]("Ping"),
	codecOf[pb.DebounceSettings]("DebounceSettings"),
	codecOf[pb.Fence]("Fence"),
	codecOf[pb.Trigger]("Trigger"),
	codecOf[pb.FenceState]("FenceState"),
	codecOf[pb.DeviceState]("DeviceState"),
	codecOf[pb.FenceEntry]("FenceEntry"),
	codecOf[pb.Member]("Member"),
	codecOf[pb.Occupancy]("Occupancy"),
	codecOf[pb.DeviceMembership]("DeviceMembership"),
	codecOf[pb.OccupancyChange]("OccupancyChange"),
	codecOf[pb.HotKey]("HotKey"),
}

func TestFuzzCoversEveryMessage(t *testing.T) {
	have := map[string]bool{}
	for _, c := range fuzzCodecs {
		have[c.name] = true
	}
	msgs := pb.File_fencestream_v1_geofence_proto.Messages()
	for i := range msgs.Len() {
		if name := string(msgs.Get(i).Name()); !have[name] {
			t.Errorf("message %s is missing from fuzzCodecs: FuzzDecode does not cover it", name)
		}
	}
}

// FuzzDecode: the goka codec of every message type never fails and never
// panics; bytes that do not decode come back as a *Poison holding a copy of
// them; a decoded value re-encodes to bytes that decode to an equal message.
// kind picks the message type (modulo the number of types).
func FuzzDecode(f *testing.F) {
	for i, c := range fuzzCodecs {
		golden, _ := filepath.Glob(filepath.Join("testdata", "*", c.name+".bin"))
		for _, path := range golden {
			data, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), data)
			f.Add(uint8(i), data[:len(data)/2]) // truncated mid-field
		}
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte{0x0a, 0x02, 0xff, 0xfe}) // field 1 as invalid UTF-8
		f.Add(uint8(i), []byte{0x08, 0x80})             // truncated varint
		f.Add(uint8(i), []byte{0x07})                   // field 0, unknown wire type
	}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		c := fuzzCodecs[int(kind)%len(fuzzCodecs)]
		orig := bytes.Clone(data)
		v, err := c.decode(data)
		if err != nil {
			t.Fatalf("%s: Decode returned an error (must yield a Poison): %v", c.name, err)
		}
		if !bytes.Equal(data, orig) {
			t.Fatalf("%s: Decode modified its input", c.name)
		}
		m, poison, ok := c.as(v)
		if poison != nil {
			if ok || m != nil {
				t.Fatalf("%s: As gave both a message and a Poison", c.name)
			}
			checkPoison(t, c.name, poison, data)
			return
		}
		if !ok {
			t.Fatalf("%s: As(%T) = no message and no Poison", c.name, v)
		}
		enc, err := c.encode(v)
		if err != nil {
			t.Fatalf("%s: decoded value does not re-encode: %v", c.name, err)
		}
		v2, err := c.decode(enc)
		if err != nil {
			t.Fatalf("%s: Decode of re-encoded bytes: %v", c.name, err)
		}
		m2, poison2, _ := c.as(v2)
		if poison2 != nil {
			t.Fatalf("%s: re-encoded %x decodes to poison: %v", c.name, enc, poison2)
		}
		// Deterministic bytes, not proto.Equal: NaN floats are legal values
		// and never equal themselves.
		b1, err1 := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		b2, err2 := proto.MarshalOptions{Deterministic: true}.Marshal(m2)
		if err1 != nil || err2 != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("%s: round trip changed the message:\n  %v\n  %v", c.name, m, m2)
		}
	})
}

func checkPoison(t *testing.T, name string, p *codecs.Poison, data []byte) {
	t.Helper()
	if p.Err == nil {
		t.Fatalf("%s: Poison without a reason", name)
	}
	if !bytes.Equal(p.Data, data) {
		t.Fatalf("%s: Poison holds %x, input was %x", name, p.Data, data)
	}
	if len(data) > 0 && &p.Data[0] == &data[0] {
		t.Fatalf("%s: Poison aliases the input buffer (Goka reuses it)", name)
	}
	if p.Schema != "fencestream.v1."+name {
		t.Fatalf("%s: Poison schema %q", name, p.Schema)
	}
	var asErr *codecs.Poison
	if !errors.As(error(p), &asErr) || p.Error() == "" {
		t.Fatalf("%s: Poison is not a usable error", name)
	}
}
