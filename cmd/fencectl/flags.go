package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// command is one fencectl subcommand's flag set with its synopsis.
type command struct {
	name string // "fences load"
	fs   *flag.FlagSet
}

// newCommand builds a flag set whose usage is synopsis, a description and the
// flags. Flags and positional arguments may be mixed.
func newCommand(name, synopsis, description string) *command {
	fs := flag.NewFlagSet("fencectl "+name, flag.ContinueOnError)
	c := &command{name: name, fs: fs}
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: fencectl %s\n", synopsis)
		if description != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(description))
		}
		var any bool
		fs.VisitAll(func(*flag.Flag) { any = true })
		if any {
			fmt.Fprintln(w, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return c
}

// parse parses args, flags and positional arguments interleaved ("--" ends the
// flags). It returns ok=false with the exit code when the command must stop:
// 0 after --help (usage on stdout), 2 after a bad flag (error and usage on
// stderr).
func (c *command) parse(args []string, stdout, stderr io.Writer) (pos []string, code int, ok bool) {
	var buf bytes.Buffer
	c.fs.SetOutput(&buf)
	pos, err := parseInterspersed(c.fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		io.Copy(stdout, &buf)
		return nil, exitOK, false
	case err != nil:
		io.Copy(stderr, &buf)
		return nil, exitUsage, false
	}
	c.fs.SetOutput(stderr)
	return pos, exitOK, true
}

func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usageErr reports a usage error with a pointer to --help and returns exit code 2.
func (c *command) usageErr(stderr io.Writer, format string, args ...any) int {
	return usageError(stderr, "fencectl "+c.name, format, args...)
}

// fail reports a failure and returns exit code 1.
func (c *command) fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "fencectl %s: %v\n", c.name, err)
	return exitFailure
}

func usageError(stderr io.Writer, name, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\nRun \"%s --help\" for usage.\n", name, fmt.Sprintf(format, args...), name)
	return exitUsage
}

// kafkaFlags are the connection flags of commands that talk to a broker.
type kafkaFlags struct {
	cl      cluster.Config
	timeout time.Duration
}

func (k *kafkaFlags) register(fs *flag.FlagSet) {
	k.cl.ClientID = "fencectl"
	k.cl.RegisterFlags(fs)
	fs.DurationVar(&k.timeout, "timeout", 10*time.Second, "how long to wait for the broker to answer")
}

// validate reports flags that cannot work (a usage error).
func (k *kafkaFlags) validate() error {
	if err := k.cl.Validate(); err != nil {
		return fmt.Errorf("%w (set --brokers or FENCESTREAM_BROKERS)", err)
	}
	if k.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %v", k.timeout)
	}
	return nil
}

func (k *kafkaFlags) brokers() string { return strings.Join(k.cl.Brokers, ",") }

// connect opens a franz-go client and proves the broker answers within the
// timeout, so an unreachable broker is one clear error instead of a hang.
func (k *kafkaFlags) connect(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, *kadm.Client, error) {
	kopts, err := k.cl.Kgo()
	if err != nil {
		return nil, nil, err
	}
	kopts = append(kopts, kgo.DialTimeout(k.timeout))
	kc, err := kgo.NewClient(append(kopts, extra...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to %s: %w", k.brokers(), err)
	}
	adm := kadm.NewClient(kc)
	cctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	if _, err := adm.BrokerMetadata(cctx); err != nil {
		kc.Close()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		dctx, cancel := context.WithTimeout(ctx, k.timeout)
		defer cancel()
		if derr := cluster.Diagnose(dctx, k.cl); derr != nil && !errors.Is(derr, cluster.ErrUnreachable) {
			return nil, nil, derr // authentication, mechanism or TLS: not "unreachable"
		}
		return nil, nil, fmt.Errorf("broker %s unreachable (no answer within --timeout %v): %w", k.brokers(), k.timeout, err)
	}
	return kc, adm, nil
}

// requestCtx bounds one round of broker requests by the timeout.
func (k *kafkaFlags) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, k.timeout)
}

// partitionsFlag registers --partitions, the partition count of the keyed topics.
func partitionsFlag(fs *flag.FlagSet) *int {
	return fs.Int("partitions", int(topology.DefaultPartitions), "partition count of the keyed topics (permanent once created)")
}

func checkPartitions(n int) error {
	if n <= 0 || n > 1<<20 {
		return fmt.Errorf("--partitions must be between 1 and %d, got %d", 1<<20, n)
	}
	return nil
}
