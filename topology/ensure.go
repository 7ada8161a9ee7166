package topology

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrMismatch is wrapped by every MismatchError.
var ErrMismatch = errors.New("broker disagrees with the declared topology")

// MismatchError says which topic differs from its declaration, how, and why that
// stops the binary.
type MismatchError struct {
	Topic    string
	Setting  string // "partitions" or "cleanup.policy" or "missing"
	Declared string
	Actual   string
}

func (e *MismatchError) Error() string {
	switch e.Setting {
	case "partitions":
		return fmt.Sprintf("topic %q has %s partitions on the broker but the topology declares %s: refusing to start, because keys would map to different partitions (murmur2 %% n changes with n), moving devices' state and breaking per-key order; recreate the topic with %s partitions or declare the new count deliberately",
			e.Topic, e.Actual, e.Declared, e.Declared)
	case "missing":
		return fmt.Sprintf("topic %q does not exist on the broker (declared with %s partitions); create it with `fencectl topology check --create` or let the runner create it", e.Topic, e.Declared)
	default:
		return fmt.Sprintf("topic %q has %s=%s on the broker but the topology declares %s: refusing to start, because a compacted table would lose state or a stream would be compacted away",
			e.Topic, e.Setting, e.Actual, e.Declared)
	}
}

func (e *MismatchError) Unwrap() error { return ErrMismatch }

// createWait bounds how long Ensure waits for topics it created to show up in
// the brokers' metadata.
const createWait = 30 * time.Second

// EnsureOpt changes Ensure/Check.
type EnsureOpt func(*ensureConfig)

type ensureConfig struct {
	create      bool
	replication int16
	createWait  time.Duration
}

// Replication sets the replication factor of created topics (default -1: the
// broker's default.replication.factor).
func Replication(rf int16) EnsureOpt { return func(c *ensureConfig) { c.replication = rf } }

// Ensure creates every declared topic that is missing, with its declared partition
// count and cleanup policy, and then checks every topic. It returns a joined error
// of MismatchErrors when the broker disagrees; the caller must not start.
func (t *Topology) Ensure(ctx context.Context, adm *kadm.Client, opts ...EnsureOpt) error {
	return t.ensure(ctx, adm, append([]EnsureOpt{func(c *ensureConfig) { c.create = true }}, opts...)...)
}

// Check compares the broker with the declarations without creating anything;
// missing topics are mismatches too.
func (t *Topology) Check(ctx context.Context, adm *kadm.Client) error {
	return t.ensure(ctx, adm)
}

func (t *Topology) ensure(ctx context.Context, adm *kadm.Client, opts ...EnsureOpt) error {
	if err := t.Validate(); err != nil {
		return err
	}
	cfg := ensureConfig{replication: -1, createWait: createWait}
	for _, o := range opts {
		o(&cfg)
	}
	names := t.TopicNames()
	details, missing, err := t.listTopics(ctx, adm, names)
	if err != nil {
		return err
	}
	if len(missing) > 0 && cfg.create {
		for _, tp := range missing {
			policy := string(tp.Cleanup)
			resp, err := adm.CreateTopic(ctx, tp.Partitions, cfg.replication, map[string]*string{"cleanup.policy": &policy}, tp.Name)
			if err == nil {
				err = resp.Err
			}
			if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				return fmt.Errorf("creating topic %s: %w", tp.Name, err)
			}
		}
		// A created topic can take a moment to appear in every broker's
		// metadata; wait for it rather than skip checking it.
		wait := time.NewTimer(0)
		defer wait.Stop()
		deadline := time.Now().Add(cfg.createWait)
		for {
			if details, missing, err = t.listTopics(ctx, adm, names); err != nil {
				return err
			}
			if len(missing) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("created topic %s but the broker does not list it after %v", missing[0].Name, cfg.createWait)
			}
			wait.Reset(100 * time.Millisecond)
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for created topics: %w", ctx.Err())
			case <-wait.C:
			}
		}
	}
	var errs []error
	for _, tp := range missing {
		errs = append(errs, &MismatchError{Topic: tp.Name, Setting: "missing", Declared: strconv.Itoa(int(tp.Partitions))})
	}
	present := make([]string, 0, len(names))
	for _, name := range names {
		d, ok := details[name]
		if !ok || d.Err != nil {
			continue
		}
		present = append(present, name)
		tp := t.MustTopic(name)
		if got := int32(len(d.Partitions)); got != tp.Partitions {
			errs = append(errs, &MismatchError{Topic: name, Setting: "partitions", Declared: strconv.Itoa(int(tp.Partitions)), Actual: strconv.Itoa(int(got))})
		}
	}
	if len(present) > 0 {
		rcs, err := adm.DescribeTopicConfigs(ctx, present...)
		if err != nil {
			return fmt.Errorf("describing topic configs: %w", err)
		}
		for _, rc := range rcs {
			if rc.Err != nil {
				return fmt.Errorf("describing config of %s: %w", rc.Name, rc.Err)
			}
			tp := t.MustTopic(rc.Name)
			policy := string(CleanupDelete) // Kafka's default when unset
			for _, c := range rc.Configs {
				if c.Key == "cleanup.policy" && c.Value != nil {
					policy = *c.Value
				}
			}
			if policy != string(tp.Cleanup) {
				errs = append(errs, &MismatchError{Topic: rc.Name, Setting: "cleanup.policy", Declared: string(tp.Cleanup), Actual: policy})
			}
		}
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

// listTopics describes the declared topics with fresh metadata. kadm's
// ListTopics answers from the client's metadata cache (up to MetadataMinAge,
// 5s by default), which would hide a topic created a moment ago and a
// partition count changed behind our back; kadm.WithAuthorizedOps makes it
// send a real Metadata request.
func (t *Topology) listTopics(ctx context.Context, adm *kadm.Client, names []string) (kadm.TopicDetails, []Topic, error) {
	details, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx), names...)
	if err != nil {
		return nil, nil, fmt.Errorf("listing topics: %w", err)
	}
	var missing []Topic
	for _, name := range names {
		d, ok := details[name]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			missing = append(missing, t.MustTopic(name))
			continue
		}
		if d.Err != nil {
			return nil, nil, fmt.Errorf("describing topic %s: %w", name, d.Err)
		}
	}
	return details, missing, nil
}
