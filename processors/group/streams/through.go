package streams

import "time"

// Through writes the stream To topic and reads it back (Kafka Streams'
// through): what follows runs in the group that reads topic, the app's
// routing group. After a table's stream, where a re-key is refused (the
// table's group writes only topics of its key), Through(topic).GroupBy(...)
// re-keys what the table hands over; and records written to topic by
// others (a replay, a retry) are read as the app's own. opts are the read
// source's; it keeps the stream's event time unless they say otherwise.
func (s Stream[V]) Through(topic string, opts ...SourceOpt[V]) Stream[V] {
	s.To(topic)
	return s.n.b.Stream[V](topic, append(s.eventTime(), opts...)...)
}

// eventTime is, as a source option, the event time of the stream's sources
// when they hold V: a topic the stream is written to and read back from
// keeps its records' event time, as Kafka Streams keeps a record's
// timestamp through a repartition topic.
func (s Stream[V]) eventTime() []SourceOpt[V] {
	for _, r := range s.n.roots() {
		if at, ok := r.eventTime.(func(*V) time.Time); ok && at != nil {
			return []SourceOpt[V]{EventTime(at)}
		}
	}
	return nil
}
