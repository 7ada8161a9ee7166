package streams_test

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
)

// Windowed stream-stream joins: an ad's impressions left-joined with its
// clicks up to ten minutes later, a minute of grace. A click pairs with its
// impression at once; an impression nobody clicked comes out alone once its
// window and grace have closed (here when a later impression moves stream
// time and the driver fires the join's timers). Each value is its event time.
func Example_windowedJoin() {
	at := func(v *num) time.Time { return time.UnixMilli(v.GetValue()) }
	hhmm := func(v *num) string { return at(v).UTC().Format("15:04") }
	b := streams.New(joinTopology(), "ads", nil)
	impressions := b.Stream[num]("impressions", streams.EventTime(at))
	clicks := b.Stream[num]("clicks", streams.EventTime(at))
	impressions.LeftJoinWindowed(clicks, "shown-clicked", streams.JoinWindows(10*time.Minute, time.Minute).Before(0),
		func(shown, clicked *num) *str {
			if clicked == nil {
				return wrapperspb.String("shown " + hhmm(shown) + ", not clicked")
			}
			return wrapperspb.String("shown " + hhmm(shown) + ", clicked " + hhmm(clicked))
		}).To("ad-clicks")
	app, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	t := &exampleT{}
	defer t.done()
	d := streamstest.New(t, app, t0.Add(time.Hour)) // event time ahead of the wall clock would count only up to it
	shown, clicked := streamstest.InputTopic[num](d, "impressions"), streamstest.InputTopic[num](d, "clicks")
	ms := func(d time.Duration) *num { return wrapperspb.Int64(t0.Add(d).UnixMilli()) }
	shown.Pipe("ad1", ms(0))
	shown.Pipe("ad2", ms(time.Minute))
	clicked.Pipe("ad1", ms(3*time.Minute))
	shown.Pipe("ad3", ms(20*time.Minute)) // stream time 08:20: ad2's window closed at 08:12
	d.FireTimers()
	for _, r := range streamstest.OutputTopic[str](d, "ad-clicks").Read() {
		fmt.Println(r.Key, r.Value.GetValue())
	}
	// Output:
	// ad1 shown 08:00, clicked 08:03
	// ad2 shown 08:01, not clicked
}
