package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology/cluster"
)

// RedisConfig sizes a local-versus-Redis comparison.
type RedisConfig struct {
	Cluster cluster.Config // empty Brokers: embedded (see Config.Cluster)
	// Pings through each debouncer (default 300,000).
	Pings int
	// Devices sending them (default 10,000).
	Devices int
	// Local is the local store compared (default statestore.Default).
	Local statestore.Kind
	// Rounds of both stages (default 2), in alternating order.
	Rounds     int
	Partitions int32
	Progress   io.Writer
	StateDir   string
}

// RedisResult is one comparison: the same debouncer on the same pings, its
// table in a local store and in a redis-server the bench started, in one run.
type RedisResult struct {
	CPUs         int     `json:"cpus"`
	Pings        int     `json:"pings"`
	Devices      int     `json:"devices"`
	Partitions   int32   `json:"partitions"`
	LocalStorage string  `json:"local_storage"`
	RedisVersion string  `json:"redis_version"`
	Local        []Stage `json:"local"` // one per round
	Redis        []Stage `json:"redis"`
	// LocalOverRedis is Local's mean pings/s over Redis's (the seeds claim
	// 1.7).
	LocalOverRedis float64 `json:"local_over_redis"`
	// RoundTrip is one HGET of a debouncer-sized value from this process to
	// the server, sequential (the seeds assume 200 µs).
	RoundTrip MicrosPercentiles `json:"redis_hget_round_trip"`
	// ServerCPU is redis-server's CPU (user+system, from INFO cpu) per ping
	// in each round's Redis stage, which Redis's cpu_us_per_ping (this
	// process only) leaves out.
	ServerCPU []float64 `json:"redis_server_cpu_us_per_ping"`
	// RedisKeys is how many keys the Redis stage's tables held at the end of
	// each round (one per device seen): the state was in Redis.
	RedisKeys    []int64 `json:"redis_table_keys"`
	TotalSeconds float64 `json:"total_s"`
}

// MicrosPercentiles of a duration, in microseconds.
type MicrosPercentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_us"`
	P99 float64 `json:"p99_us"`
}

// CompareRedis starts Debian's redis-server (it must be installed), then runs
// the debouncer over the same pings from a reset broker, Rounds times each:
// its table in the local store, and in Redis (statestore.Redis, one round
// trip per read and per write). Everything else (broker, changelog, kit) is
// the same.
func CompareRedis(ctx context.Context, rc RedisConfig) (*RedisResult, error) {
	start := time.Now()
	if rc.Local == "" {
		rc.Local = statestore.Default
	}
	if rc.Rounds == 0 {
		rc.Rounds = 2
	}
	if rc.Rounds < 0 {
		return nil, fmt.Errorf("rounds must be positive, got %d", rc.Rounds)
	}
	if rc.Local == statestore.Redis {
		return nil, errors.New("the local store must not be redis")
	}
	cfg := Config{Cluster: rc.Cluster, Pings: rc.Pings, Devices: rc.Devices, Rates: []int{}, Partitions: rc.Partitions, Progress: rc.Progress, StateDir: rc.StateDir, Flush: -1}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errNoRedisServer // before the broker: fail at once
	}
	e := &env{cfg: cfg, log: quietLog}
	cleanup, err := e.connect()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	srv, err := startRedis(e.dirs)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	e.redisAddr = srv.addr
	e.progress("redis-server %s on %s", srv.version, srv.addr)
	res := &RedisResult{CPUs: runtime.NumCPU(), Pings: cfg.Pings, Devices: cfg.Devices, Partitions: cfg.Partitions, LocalStorage: string(rc.Local), RedisVersion: srv.version}
	if res.RoundTrip, err = roundTrip(ctx, srv.addr); err != nil {
		return nil, err
	}
	e.progress("redis HGET round trip: p50 %.0f µs, p99 %.0f µs", res.RoundTrip.P50, res.RoundTrip.P99)
	e.progress("simulating %d pings from %d devices", cfg.Pings, cfg.Devices)
	if err := e.simulate(cfg.Pings); err != nil {
		return nil, err
	}
	// Rounds alternate the order (local first, then Redis first, ...), so
	// what a stage leaves behind (a warm page cache, a grown heap, the
	// broker's log) favours neither side.
	var localSum, redisSum float64
	for round := range rc.Rounds {
		order := []statestore.Kind{rc.Local, statestore.Redis}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, kind := range order {
			e.cfg.Storage = kind
			if err := e.fresh(ctx); err != nil {
				return nil, err
			}
			if kind == statestore.Redis {
				if err := flushRedis(ctx, srv.addr); err != nil {
					return nil, err
				}
			}
			cpu0, err := serverCPU(ctx, srv.addr)
			if err != nil {
				return nil, err
			}
			st, err := e.debouncer(ctx)
			if err != nil {
				return nil, fmt.Errorf("debouncer on %s: %w", kind, err)
			}
			e.progress("round %d, debouncer on %s: %.0f pings/s, %.1f µs CPU per ping", round+1, kind, st.PingsPerSec, st.CPUMicrosPerPing)
			if kind == statestore.Redis {
				cpu1, err := serverCPU(ctx, srv.addr)
				if err != nil {
					return nil, err
				}
				// The whole stage's server CPU (recovery and the tail
				// included) over its pings: an upper bound.
				us := float64(cpu1-cpu0) / float64(time.Microsecond) / float64(cfg.Pings)
				res.ServerCPU = append(res.ServerCPU, us)
				e.progress("round %d, redis-server: %.1f µs CPU per ping", round+1, us)
				res.Redis = append(res.Redis, st)
				redisSum += st.PingsPerSec
				n, err := tableKeys(ctx, srv.addr)
				if err != nil {
					return nil, err
				}
				res.RedisKeys = append(res.RedisKeys, n)
			} else {
				res.Local = append(res.Local, st)
				localSum += st.PingsPerSec
			}
		}
	}
	if redisSum > 0 {
		res.LocalOverRedis = localSum / redisSum
	}
	res.TotalSeconds = time.Since(start).Seconds()
	return res, nil
}

// roundTrip times sequential HGETs of a 300-byte value (a debouncer envelope's
// size) from one client.
func roundTrip(ctx context.Context, addr string) (MicrosPercentiles, error) {
	c := newRedisClient(addr)
	defer c.Close()
	if err := c.HSet(ctx, "bench-rtt", "k", bytes.Repeat([]byte("x"), 300)).Err(); err != nil {
		return MicrosPercentiles{}, fmt.Errorf("redis: %w", err)
	}
	const n = 2000
	d := make([]time.Duration, n)
	for i := range d {
		t0 := time.Now()
		if err := c.HGet(ctx, "bench-rtt", "k").Err(); err != nil {
			return MicrosPercentiles{}, fmt.Errorf("redis: %w", err)
		}
		d[i] = time.Since(t0)
	}
	slices.Sort(d)
	us := func(x time.Duration) float64 { return float64(x) / float64(time.Microsecond) }
	return MicrosPercentiles{N: n, P50: us(d[n/2]), P99: us(d[n*99/100])}, c.Del(ctx, "bench-rtt").Err()
}

// serverCPU is the server's CPU time so far (INFO cpu).
func serverCPU(ctx context.Context, addr string) (time.Duration, error) {
	c := newRedisClient(addr)
	defer c.Close()
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("redis info cpu: %w", err)
	}
	var sum float64
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := strconv.ParseFloat(infoField(info, f), 64)
		if err != nil {
			return 0, fmt.Errorf("redis info cpu: %s: %w", f, err)
		}
		sum += v
	}
	return time.Duration(sum * float64(time.Second)), nil
}

// flushRedis empties the server, so a Redis stage starts from empty tables as
// a local one does from a new state directory.
func flushRedis(ctx context.Context, addr string) error {
	c := newRedisClient(addr)
	defer c.Close()
	if err := c.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("redis flushall: %w", err)
	}
	return nil
}

// tableKeys sums the fields of every table hash on the server.
func tableKeys(ctx context.Context, addr string) (int64, error) {
	c := newRedisClient(addr)
	defer c.Close()
	var n int64
	iter := c.Scan(ctx, 0, "bench-*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if strings.HasSuffix(k, ":offset") {
			continue
		}
		l, err := c.HLen(ctx, k).Result()
		if err != nil {
			return 0, fmt.Errorf("redis hlen %s: %w", k, err)
		}
		n += l
	}
	return n, iter.Err()
}

func newRedisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
}

// redisServer is a redis-server the bench started.
type redisServer struct {
	addr    string
	version string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// errNoRedisServer names the package to install.
var errNoRedisServer = errors.New("redis-server not found in PATH: install Debian's redis-server package (apt-get install -y redis-server)")

// startRedis starts redis-server on 127.0.0.1 at a free port, without
// persistence, its files under dir, and waits until it answers.
func startRedis(dir string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoRedisServer
	}
	var last error
	// A port found free can be taken before redis-server binds it: try again.
	for range 5 {
		s, err := tryRedis(bin, dir)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func tryRedis(bin, dir string) (*redisServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), exited: make(chan struct{})}
	var out bytes.Buffer
	s.cmd = exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "")
	s.cmd.Stdout, s.cmd.Stderr = &out, &out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone if the bench dies
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	c := newRedisClient(s.addr)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("redis-server exited before answering on %s: %s", s.addr, strings.TrimSpace(out.String()))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			s.version = infoField(info, "redis_version")
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server not answering on %s after 10 s: %v", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the server's start, bounded by the deadline
	}
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// stop terminates the server (SIGTERM, SIGKILL after 10 s) and waits for it.
func (s *redisServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}
