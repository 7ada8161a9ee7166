package topology

// Topics the kit itself writes, whatever the application: every group
// dead-letters what it cannot process, and producers record their hot-key
// decisions.
const (
	TopicDeadLetter = "deadletter"
	TopicHotKeys    = "hot-keys"
)
