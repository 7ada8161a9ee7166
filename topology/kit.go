package topology

// Topics the kit itself writes, whatever the application: every group
// dead-letters what it cannot process, and producers record their hot-key
// decisions.
const (
	TopicDeadLetter = "deadletter"
	TopicHotKeys    = "hot-keys"
)

// Metadata reports whether topic carries records about keys rather than the
// data itself (the hot-key decisions): writing to it is not a flow of the
// data, so it is never a re-key and derived flows leave it out.
func Metadata(topic string) bool { return topic == TopicHotKeys }
