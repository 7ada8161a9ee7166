package main

import (
	"context"
	"os"
	"runtime/pprof"

	"github.com/fencestream/fencestream/processors/bench"
)

func main() {
	f, _ := os.Create(os.Args[1])
	pprof.StartCPUProfile(f)
	_, err := bench.Run(context.Background(), bench.Config{Pings: 2000, Rates: []int{}, Triggers: 100000, TriggerDevices: 20000, Progress: os.Stderr})
	pprof.StopCPUProfile()
	if err != nil {
		panic(err)
	}
}
