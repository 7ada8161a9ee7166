package fenceview_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fenceview"
)

// The handler runs over any sources; here empty fakes, asking which
// partition of 6 the pinned partitioner gives a key.
func ExampleNewServer() {
	srv, err := fenceview.NewServer(fenceview.Sources{
		Devices:   &fakeDevices{},
		Occupancy: &fakeOccupancy{},
		Fences:    fences.New(),
		Ready:     fenceview.ReadyFunc(func() (bool, string) { return true, "" }),
		Feed:      fenceview.NewFeed(0),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	for _, path := range []string{"/v1/partition?key=user-1&partitions=6", "/v1/devices/nobody"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(body))
	}
	// Output:
	// 200 {"key":"user-1","partitions":6,"partition":2,"murmur2":"53b136cc","murmur2_positive":"53b136cc","rule":"(murmur2(utf8 key) & 0x7fffffff) % partitions"}
	// 404 {"error":"device \"nobody\" is unknown: no ping of it has been applied","status":404}
}
