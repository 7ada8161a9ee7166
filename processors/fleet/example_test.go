package fleet_test

import (
	"fmt"
	"time"

	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fleet"
)

func Example() {
	sim, err := fleet.New(fleet.Config{Seed: 1, Moving: 3, Parked: 2, Duration: 10 * time.Minute}, fences.Demo())
	if err != nil {
		fmt.Println(err)
		return
	}
	pings := sim.Pings()
	fmt.Println(sim.Devices())
	fmt.Println(len(pings), "pings;", sim.Ticks(), "ticks")
	fmt.Println(pings[0].GetDeviceId(), time.UnixMilli(pings[0].GetDeviceTimeMs()).UTC())
	last := pings[len(pings)-1]
	fmt.Println(last.GetDeviceId(), time.UnixMilli(last.GetDeviceTimeMs()).UTC())

	truth := sim.Truth()
	fmt.Println(len(truth.Parked), "parked;", truth.Parked["park-0001"].Inside, truth.Parked["park-0002"].Inside)
	// Output:
	// [veh-0001 veh-0002 veh-0003 park-0001 park-0002]
	// 3000 pings; 600 ticks
	// veh-0001 2026-01-01 00:00:00 +0000 UTC
	// park-0002 2026-01-01 00:09:59 +0000 UTC
	// 2 parked; true false
}

func ExampleParseKeying() {
	for _, s := range []string{"device", "fence", "pair", "round-robin", "null"} {
		k, _ := fleet.ParseKeying(s)
		fmt.Println(k)
	}
	_, err := fleet.ParseKeying("salted")
	fmt.Println(err)
	// Output:
	// device
	// fence
	// pair
	// round-robin
	// null
	// fleet: unknown keying "salted" (want device, fence, pair, round-robin or null)
}
