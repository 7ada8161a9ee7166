package group

import (
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// TestRecordBytesIsSaramas: the size a dead letter is judged by is the one
// sarama checks Producer.MaxMessageBytes against, so one judged to fit is
// never refused by the producer.
func TestRecordBytesIsSaramas(t *testing.T) {
	hs := []*kitpb.Header{{Key: deadletter.HeaderReason, Value: []byte("undecodable")}, {Key: deadletter.HeaderSourceOffset, Value: []byte("12345")}}
	key, value := strings.Repeat("k", 300), []byte(strings.Repeat("v", 70_000))
	msg := &sarama.ProducerMessage{Key: sarama.StringEncoder(key), Value: sarama.ByteEncoder(value)}
	for _, h := range hs {
		msg.Headers = append(msg.Headers, sarama.RecordHeader{Key: []byte(h.GetKey()), Value: h.GetValue()})
	}
	if got, want := recordBytes(key, value, hs), msg.ByteSize(2); got != want {
		t.Fatalf("recordBytes = %d, sarama's ByteSize = %d", got, want)
	}
}

// TestCutDownFits: a dead letter over the limit comes out cut down, within
// the limit, with the sizes and every header but an oversized error kept;
// one within it is unchanged.
func TestCutDownFits(t *testing.T) {
	limit := deadLetterLimit(sarama.NewConfig().Producer.MaxMessageBytes, kafkaMaxMessageBytes)
	if limit != kafkaMaxMessageBytes-batchOverhead {
		t.Fatalf("limit %d: sarama's default (1 MiB) is above Kafka's default less a batch header", limit)
	}
	hs := []*kitpb.Header{{Key: deadletter.HeaderReason, Value: []byte(deadletter.ReasonBadKey)}, {Key: deadletter.HeaderError, Value: []byte(strings.Repeat("e", 5000))}, {Key: deadletter.HeaderSourceOffset, Value: []byte("7")}}
	small := &kitpb.Output{Topic: "deadletter", Key: "d1", Value: []byte("v"), Headers: hs}
	if o, cut := fit(small, limit); cut || o != small {
		t.Fatal("a small dead letter was cut")
	}
	big := &kitpb.Output{Topic: "deadletter", Key: strings.Repeat("ü", 600_000), Value: []byte("v"), Headers: hs}
	o, cut := fit(big, limit)
	if !cut || recordBytes(o.GetKey(), o.GetValue(), o.GetHeaders()) > limit || len(o.GetKey()) > deadletter.CutKeyBytes {
		t.Fatalf("cut %v, %d bytes, key %d bytes", cut, recordBytes(o.GetKey(), o.GetValue(), o.GetHeaders()), len(o.GetKey()))
	}
	got := map[string]string{}
	for _, h := range o.GetHeaders() {
		got[h.GetKey()] = string(h.GetValue())
	}
	if got[deadletter.HeaderCutDown] != "true" || got[deadletter.HeaderKeyBytes] != "1200000" || got[deadletter.HeaderValueBytes] != "1" || got[deadletter.HeaderReason] != deadletter.ReasonBadKey ||
		got[deadletter.HeaderSourceOffset] != "7" || len(got[deadletter.HeaderError]) > deadLetterErrorBytes || !strings.HasPrefix(o.GetKey(), "üü") || strings.ContainsRune(o.GetKey(), 0xFFFD) {
		t.Fatalf("cut-down headers %v, key prefix %.10q", got, o.GetKey())
	}
}
