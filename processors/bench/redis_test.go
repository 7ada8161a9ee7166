package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/bench"
)

// TestCompareRedisRunsBoth runs the local-versus-Redis comparison small on an
// embedded broker and a redis-server it starts: both debouncers process
// every ping, and the Redis one's state is in Redis.
func TestCompareRedisRunsBoth(t *testing.T) {
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const pings, devices = 3_000, 300
	res, err := bench.CompareRedis(ctx, bench.RedisConfig{Pings: pings, Devices: devices, Partitions: 4, StateDir: t.TempDir(), Progress: &progress})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if len(res.Local) != 2 || len(res.Redis) != 2 || len(res.RedisKeys) != 2 {
		t.Fatalf("want two rounds of each: %+v", res)
	}
	for name, stages := range map[string][]bench.Stage{"local": res.Local, "redis": res.Redis} {
		for _, s := range stages {
			if s.Pings < pings || s.PingsPerSec <= 0 {
				t.Errorf("%s = %+v", name, s)
			}
		}
	}
	if len(res.ServerCPU) != 2 || res.ServerCPU[0] <= 0 {
		t.Errorf("redis-server CPU per ping = %v", res.ServerCPU)
	}
	for _, n := range res.RedisKeys {
		if n < devices/2 || n > devices {
			t.Errorf("Redis tables hold %d keys, want one per device seen (%d devices)", n, devices)
		}
	}
	if res.LocalOverRedis <= 0 || res.RoundTrip.P50 <= 0 || res.RedisVersion == "" {
		t.Errorf("result = %+v", res)
	}
	t.Logf("%+v", res)
}

// TestCompareRedisNamesThePackage: without redis-server the bench fails at
// once, saying which package to install.
func TestCompareRedisNamesThePackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := bench.CompareRedis(context.Background(), bench.RedisConfig{Pings: 10, Devices: 1})
	if err == nil || !strings.Contains(err.Error(), "redis-server package") {
		t.Fatalf("err = %v; want one naming Debian's redis-server package", err)
	}
}
