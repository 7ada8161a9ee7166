// Package delivery posts triggers to webhooks: the first part of issue 30
// ("Triggers that reach people").
//
// A subscription (deliverypb.Subscription: id, URL, secret, filters on fence
// ids and trigger types, enabled) is a record of the compacted subscriptions
// topic, written by fencectl subscriptions. Every instance of the delivery
// group reads that topic whole (like the fence catalogue) and matches each
// trigger of fence-triggers against it.
//
// Group delivery, keyed by device_id like its triggers, keeps per device a
// queue per subscription (deliverypb.DeviceDeliveries). Only a queue's head
// is attempted, so one device's triggers reach one subscription in order; a
// device has at most MaxPending triggers queued, more are given up
// (queue-full). A request is JSON (Payload), with Idempotency-Key = the
// trigger id and Fencestream-Signature "t=<unix>,v1=<hex HMAC-SHA256 of
// "<unix>.<body>">" keyed by the subscription's secret (Sign, Verify).
//
// Where attempts run: a handler call starts one per subscription in
// parallel, each bounded by AttemptTimeout, and waits for their answers
// at most AttemptWait (100 ms); after a success the queue's next
// trigger goes at once, for at most 32 rounds or one attempt timeout spent,
// the rest on the timer. An attempt not answered within the wait goes on in
// the background, its answer held in memory per (device, subscription,
// trigger); the device's wall-clock timer, about one attempt wait later,
// applies it in the key's own callback (only a queue's head is ever in
// flight, so device order holds). So a slow endpoint that answers within
// the attempt timeout delays no other endpoint (TestEndToEndKill9: a
// receiver answering after 2 s, the healthy one's p99 well under 1 s). An
// answer held when the process dies is lost, and the trigger is sent again
// (at least once, same Idempotency-Key); losing the partition cancels the
// request (not counted as an attempt), and an answer never picked up (its
// key moved, its queue dropped) is dropped after a minute. A failure is
// retried later by the device's wall-clock timer (group timers: stored with
// the state, so a kill -9 loses no pending attempt). An endpoint (URL origin) has a circuit
// breaker and a concurrency cap in each process: while its breaker is open,
// or its cap is reached, its attempts are scheduled, not sent; the cap also
// bounds the attempts in flight in the background.
//
// Which clock: retries wait on the wall clock (group.WallClock timers), not
// on stream time. They wait for the endpoint to recover, which happens in
// real time; a partition's stream time stops when its triggers stop, and a
// retry must not wait for the next trigger. Rule 14 still holds for what is
// written: the body and the records (outcomes, dead letters) carry the
// trigger's event time; the wall clock decides only when an attempt runs
// and whether a trigger is too old (MaxAge, from its first attempt).
// Two wall-clock values are observations, not derived data, and are
// labelled so: the signature's timestamp (the sending time, for the
// receiver's replay check) and Outcome.observed_ms (when an attempt was
// answered, for the status's last success and last error).
//
// Delivery is at least once: a crash after a request and before the
// handler's commit sends it again (same Idempotency-Key). A retry after
// failures is exponential (Backoff) with jitter, at least Retry-After.
// After MaxAttempts failures, or MaxAge, a trigger is given up:
// written to delivery-dead with the reason (attempts, max-age, queue-full,
// gone, disabled, removed). A 410 Gone disables the subscription (the
// group writes it back, enabled=false) and gives up its queue; the record
// written is the subscription as this instance held it, so an operator's
// change to it in the same moment may be overwritten (last writer wins).
// A subscription's fence_tags filter matches a trigger whose fence_tags
// (the fence's, at the trigger's catalogue version) hold one of them; its
// device_groups filter one whose device_groups (from the device's ping)
// hold one of them.
//
// example/receiver is a receiver to start from: it prints each request and
// checks its signature with Verify.
//
// Group delivery-status adds the outcomes (delivery-outcomes, keyed by
// subscription: a declared boundary) up per subscription; the route GET
// /v1/subscriptions/{id} serves it (delivered, failed attempts, given up,
// pending, last success, last error), and the instance holding a
// subscription's status sets its fencestream_delivery_pending and
// fencestream_delivery_last_success_timestamp_seconds gauges.
package delivery
