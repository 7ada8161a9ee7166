package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/fencestream/fencestream/cmd/daemon"
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
(topics, offsets, groups and cluster id). It listens on 127.0.0.1 only.`)
	var logs daemon.LogFlags
	logs.Register(c.fs)
	data := c.fs.String("data", "", "directory of the broker's log (required; created if missing)")
	listen := c.fs.String("listen", "127.0.0.1:0", "address to listen on: 127.0.0.1:PORT (port 0: any free port)")
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
	b, err := embedded.Start(embedded.DataDir(*data), embedded.Port(port))
	if err != nil {
		return c.fail(stderr, err)
	}
	addr := strings.Join(b.Addrs(), ",")
	log.Info("embedded broker listening", "addr", addr, "data", b.DataDir())
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
