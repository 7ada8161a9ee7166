package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/topology/embedded"
)

// runBroker runs the embedded broker as a process of its own, so processors in
// other processes (tests that kill them, a shell session) share one cluster.
func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("broker", "broker --data DIR [--listen 127.0.0.1:PORT]",
		`Runs the embedded Kafka-protocol broker (kfake) with its log in DIR until SIGINT or
SIGTERM, then closes it cleanly (the log is flushed). Once it accepts connections
it prints its address, host:port, as the only line on stdout (use it as --brokers);
logs go to stderr. Running it again with the same DIR resumes the same cluster
(topics, offsets, groups and cluster id). It listens on 127.0.0.1 only.
With --tls-cert/--tls-key it serves TLS only; with --sasl-user it requires SASL.
The users given are the only ones accepted (none is stored in DIR), and a DIR
once served with users refuses to start without them unless --drop-sasl says
to open it.`)
	var logs host.LogFlags
	logs.Register(c.fs)
	data := c.fs.String("data", "", "directory of the broker's log (required; created if missing)")
	listen := c.fs.String("listen", "127.0.0.1:0", "address to listen on: 127.0.0.1:PORT (port 0: any free port)")
	tlsCert := c.fs.String("tls-cert", "", "serve TLS with this PEM certificate (chain) file; needs --tls-key")
	tlsKey := c.fs.String("tls-key", "", "PEM private key of --tls-cert")
	dropSASL := c.fs.Bool("drop-sasl", false, "start with no SASL user although DIR was served with some: the broker accepts anyone (without it such a start is refused)")
	var users []embedded.Opt
	c.fs.Func("sasl-user", "require SASL and accept MECHANISM:USER:PASSWORD (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512); repeat for more users or mechanisms; each is a superuser (kfake enforces no ACLs for them). Env FENCECTL_BROKER_SASL_USERS: the same, comma-separated", func(v string) error {
		o, err := saslUser(v)
		users = append(users, o)
		return err
	})
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return c.usageErr(stderr, "unexpected arguments %q", pos)
	}
	if *data == "" {
		return c.usageErr(stderr, "--data is required")
	}
	port, err := loopbackPort(*listen)
	if err != nil {
		return c.usageErr(stderr, "--listen %q: %v", *listen, err)
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	opts := []embedded.Opt{embedded.DataDir(*data), embedded.Port(port)}
	if len(users) == 0 {
		for _, v := range strings.Split(os.Getenv("FENCECTL_BROKER_SASL_USERS"), ",") {
			if v = strings.TrimSpace(v); v == "" {
				continue
			}
			o, err := saslUser(v)
			if err != nil {
				return c.usageErr(stderr, "FENCECTL_BROKER_SASL_USERS: %v", err)
			}
			users = append(users, o)
		}
	}
	opts = append(opts, users...)
	if *dropSASL {
		if len(users) > 0 {
			return c.usageErr(stderr, "--drop-sasl and --sasl-user (or FENCECTL_BROKER_SASL_USERS) contradict each other")
		}
		opts = append(opts, embedded.DropSASL())
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return c.usageErr(stderr, "--tls-cert and --tls-key go together")
	}
	if *tlsCert != "" {
		o, err := embedded.TLSFiles(*tlsCert, *tlsKey)
		if err != nil {
			return c.usageErr(stderr, "--tls-cert/--tls-key: %v", err)
		}
		opts = append(opts, o)
	}
	b, err := embedded.Start(opts...)
	if errors.Is(err, embedded.ErrUsersMissing) {
		return c.fail(stderr, fmt.Errorf("%w: give them again (--sasl-user or FENCECTL_BROKER_SASL_USERS), or --drop-sasl to accept anyone", err))
	}
	if err != nil {
		return c.fail(stderr, err)
	}
	addr := strings.Join(b.Addrs(), ",")
	log.Info("embedded broker listening", "addr", addr, "data", b.DataDir(), "tls", *tlsCert != "", "sasl_users", len(users))
	fmt.Fprintln(stdout, addr)
	<-ctx.Done()
	b.Close()
	log.Info("embedded broker stopped", "data", b.DataDir())
	return exitOK
}

// loopbackPort is the port of addr, whose host must be 127.0.0.1, localhost or
// empty: kfake binds 127.0.0.1 only, and a broker reachable from elsewhere is
// not what this command is for.
func loopbackPort(addr string) (int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	if host != "" && host != "127.0.0.1" && host != "localhost" {
		return 0, fmt.Errorf("the embedded broker listens on 127.0.0.1 only, not %s", host)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return 0, fmt.Errorf("port %q is not a port number", p)
	}
	return port, nil
}

func saslUser(v string) (embedded.Opt, error) {
	u, err := embedded.ParseUser(v)
	if err != nil {
		return nil, err
	}
	return u.Opt(), nil
}
