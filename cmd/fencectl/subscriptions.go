package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery"
	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
)

func runSubscriptions(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return usageError(stderr, "fencectl subscriptions", "missing subcommand: add, list, disable or rm")
	}
	switch args[0] {
	case "add":
		return runSubscriptionsAdd(ctx, args[1:], stdout, stderr)
	case "list":
		return runSubscriptionsList(ctx, args[1:], stdout, stderr)
	case "disable":
		return runSubscriptionsChange(ctx, "disable", args[1:], stdout, stderr)
	case "rm":
		return runSubscriptionsChange(ctx, "rm", args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, "Usage: fencectl subscriptions add|list|disable|rm [flags]")
		return exitOK
	}
	return usageError(stderr, "fencectl subscriptions", "unknown subcommand %q (want add, list, disable or rm)", args[0])
}

// commaList collects a repeatable, comma-separated flag.
type commaList []string

func (l *commaList) String() string { return strings.Join(*l, ",") }
func (l *commaList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

func runSubscriptionsAdd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("subscriptions add", "subscriptions add ID --url URL --secret S [--fence F]... [--tag T]... [--group G]... [--type enter,exit,dwell] --brokers B",
		`Adds (or replaces) a webhook subscription: the delivery processor posts each matching
trigger to URL as JSON, signed with the secret (Fencestream-Signature: t=<unix>,v1=<hex
HMAC-SHA256 of "<unix>.<body>">), with the trigger id as Idempotency-Key. An empty filter
matches every trigger; a trigger matches when it passes every filter given, and a filter
of several values when it matches one of them (--tag: the fence carries the tag; --group:
the device's ping named the group).`)
	var kf kafkaFlags
	kf.register(c.fs)
	url := c.fs.String("url", "", "http:// or https:// endpoint")
	secret := c.fs.String("secret", "", "signing secret")
	var fences, types, tags, groups commaList
	c.fs.Var(&fences, "fence", "fence id to match (repeatable, or comma-separated)")
	c.fs.Var(&tags, "tag", "fence tag to match (repeatable, or comma-separated)")
	c.fs.Var(&groups, "group", "device group to match (repeatable, or comma-separated)")
	c.fs.Var(&types, "type", "trigger types to match: enter, exit, dwell (repeatable, or comma-separated)")
	disabled := c.fs.Bool("disabled", false, "add it disabled")
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return c.usageErr(stderr, "want one subscription ID, got %d arguments", len(pos))
	}
	if err := kf.validate(); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	sub := &deliverypb.Subscription{Id: pos[0], Url: *url, Secret: *secret, FenceIds: fences, FenceTags: tags, DeviceGroups: groups, Enabled: !*disabled}
	for _, t := range types {
		v, ok := pb.TriggerType_value["TRIGGER_TYPE_"+strings.ToUpper(t)]
		if !ok {
			return c.usageErr(stderr, "--type %q: want enter, exit or dwell", t)
		}
		sub.Types = append(sub.Types, pb.TriggerType(v))
	}
	if *disabled {
		sub.DisabledReason = "added disabled by fencectl"
	}
	if err := delivery.Validate(sub); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	if err := writeSubscription(ctx, kf, sub.GetId(), sub); err != nil {
		return c.fail(stderr, err)
	}
	fmt.Fprintf(stdout, "subscription %s added (enabled=%v)\n", sub.GetId(), sub.GetEnabled())
	return exitOK
}

func runSubscriptionsChange(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) int {
	what := map[string]string{"disable": "Disables subscriptions: the delivery processor stops posting to them and gives up what is queued (reason disabled).",
		"rm": "Removes subscriptions (a tombstone on the compacted subscriptions topic); what is queued for them is given up (reason removed)."}[verb]
	c := newCommand("subscriptions "+verb, "subscriptions "+verb+" ID... --brokers B", what)
	var kf kafkaFlags
	kf.register(c.fs)
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		return c.usageErr(stderr, "missing subscription ID")
	}
	if err := kf.validate(); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	cur, err := readSubscriptions(ctx, kf)
	if err != nil {
		return c.fail(stderr, err)
	}
	failed := false
	for _, id := range pos {
		i := slices.IndexFunc(cur, func(s *deliverypb.Subscription) bool { return s.GetId() == id })
		if i < 0 {
			fmt.Fprintf(stderr, "fencectl subscriptions %s: no subscription %q\n", verb, id)
			failed = true
			continue
		}
		var rec *deliverypb.Subscription // nil: a tombstone
		if verb == "disable" {
			rec = proto.Clone(cur[i]).(*deliverypb.Subscription)
			rec.Enabled, rec.DisabledReason = false, "disabled by fencectl"
		}
		if err := writeSubscription(ctx, kf, id, rec); err != nil {
			return c.fail(stderr, err)
		}
		fmt.Fprintf(stdout, "subscription %s %s\n", id, map[string]string{"disable": "disabled", "rm": "removed"}[verb])
	}
	if failed {
		return exitFailure
	}
	return exitOK
}

func runSubscriptionsList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("subscriptions list", "subscriptions list --brokers B",
		"Lists the subscriptions topic's subscriptions: id, enabled, URL and filters (secrets are not shown).")
	var kf kafkaFlags
	kf.register(c.fs)
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return c.usageErr(stderr, "unexpected arguments %q", pos)
	}
	if err := kf.validate(); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	subs, err := readSubscriptions(ctx, kf)
	if err != nil {
		return c.fail(stderr, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tENABLED\tURL\tFENCES\tTAGS\tGROUPS\tTYPES\tNOTE")
	for _, s := range subs {
		var types []string
		for _, t := range s.GetTypes() {
			types = append(types, strings.ToLower(strings.TrimPrefix(t.String(), "TRIGGER_TYPE_")))
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t%s\t%s\t%s\n", s.GetId(), s.GetEnabled(), s.GetUrl(), orAll(s.GetFenceIds()), orAll(s.GetFenceTags()), orAll(s.GetDeviceGroups()), orAll(types), s.GetDisabledReason())
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d subscriptions\n", len(subs))
	return exitOK
}

func orAll(l []string) string {
	if len(l) == 0 {
		return "*"
	}
	return strings.Join(l, ",")
}

// writeSubscription writes sub (nil: a tombstone) under id.
func writeSubscription(ctx context.Context, kf kafkaFlags, id string, sub *deliverypb.Subscription) error {
	kc, adm, err := kf.connect(ctx, kgo.RecordRetries(5))
	if err != nil {
		return err
	}
	defer kc.Close()
	if err := requireTopic(ctx, adm, kf, delivery.TopicSubscriptions); err != nil {
		return err
	}
	rec := &kgo.Record{Topic: delivery.TopicSubscriptions, Key: []byte(id)}
	if sub != nil {
		if rec.Value, err = codecs.For[deliverypb.Subscription]().Marshal(sub); err != nil {
			return err
		}
	}
	pctx, cancel := kf.requestCtx(ctx)
	defer cancel()
	return kc.ProduceSync(pctx, rec).FirstErr()
}

// readSubscriptions reads the compacted subscriptions topic to its end: the
// latest valid record per id, by id.
func readSubscriptions(ctx context.Context, kf kafkaFlags) ([]*deliverypb.Subscription, error) {
	kc, adm, err := kf.connect(ctx, kgo.ConsumeTopics(delivery.TopicSubscriptions), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer kc.Close()
	if err := requireTopic(ctx, adm, kf, delivery.TopicSubscriptions); err != nil {
		return nil, err
	}
	rctx, cancel := kf.requestCtx(ctx)
	ends, err := adm.ListEndOffsets(rctx, delivery.TopicSubscriptions)
	cancel()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", delivery.TopicSubscriptions, err)
	}
	target := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { target[o.Partition] = o.Offset })
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range target {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	latest := map[string]*deliverypb.Subscription{}
	codec := codecs.For[deliverypb.Subscription]()
	fctx, cancel := context.WithTimeout(ctx, 6*kf.timeout)
	defer cancel()
	for !done() {
		fetches := kc.PollFetches(fctx)
		if fctx.Err() != nil {
			return nil, fmt.Errorf("reading %s: %w", delivery.TopicSubscriptions, fctx.Err())
		}
		var errs []error
		fetches.EachError(func(t string, p int32, err error) { errs = append(errs, fmt.Errorf("%s/%d: %w", t, p, err)) })
		if len(errs) > 0 {
			return nil, fmt.Errorf("reading %s: %w", delivery.TopicSubscriptions, errors.Join(errs...))
		}
		fetches.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			delete(latest, string(r.Key))
			if len(r.Value) == 0 {
				return
			}
			if s, err := codec.Unmarshal(r.Value); err == nil && s.GetId() == string(r.Key) {
				latest[string(r.Key)] = s
			}
		})
	}
	out := make([]*deliverypb.Subscription, 0, len(latest))
	for _, s := range latest {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *deliverypb.Subscription) int { return strings.Compare(a.GetId(), b.GetId()) })
	return out, nil
}
