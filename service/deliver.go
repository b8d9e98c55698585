package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"paynotify/dao"
	"paynotify/model"
	"paynotify/webhook"
)

// Sender posts one delivery (webhook.Sender does).
type Sender interface {
	Send(ctx context.Context, url, id string, secrets []string, body []byte) webhook.Result
}

// DefaultRetrySchedule is WEBHOOK_RETRY_SCHEDULE's default: the waits
// before each retry after a failure (8 attempts over about 27 hours, as
// Standard Webhooks' reference service does).
var DefaultRetrySchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// Deliverer sends the due deliveries of every enabled endpoint. Each
// endpoint has its own bound of requests in flight (Concurrency, per
// instance), so one that hangs holds its own slots and nothing else.
// Claims are leases (dao.ClaimDeliveries): two instances never hold one
// delivery, and one that dies mid-request leaves it due again when the
// lease ends, to be sent again under the same webhook-id.
//
// An endpoint's claims run ahead of its requests: a round claims for it
// as many deliveries as its slots are likely to send in a quarter of a
// lease (by how long its answers have taken: four for one that hangs,
// up to MaxClaim for a fast one) into a queue of its own, and a finished
// request starts the next from that queue without a database round. A
// claimed delivery not started within half its lease is let go unsent
// (its lease runs out and it is due again), so none is sent by a claim
// that may have ended. Finished attempts are recorded in batches, by the
// round that a filled batch, an emptying queue or the interval starts, and
// by Wait when the deliverer stops.
type Deliverer struct {
	store  *dao.Store
	keys   *webhook.Keyring
	sender Sender
	log    *slog.Logger
	// Schedule is WEBHOOK_RETRY_SCHEDULE: the wait before each retry;
	// a delivery failing once more than it has waits is FAILED.
	Schedule []time.Duration
	// Concurrency bounds each endpoint's requests in flight.
	Concurrency int
	// Lease is how long a claim keeps a delivery from other instances: at
	// least twice as long as a request may take (WEBHOOK_TIMEOUT), as a
	// delivery may wait in its endpoint's queue half of it.
	Lease time.Duration
	// MaxClaim bounds one claim of one endpoint's deliveries.
	MaxClaim int
	// DisableAfter is WEBHOOK_DISABLE_AFTER: an endpoint failing every
	// attempt that long is disabled.
	DisableAfter time.Duration
	// Interval is how long an idle deliverer waits before looking again.
	Interval time.Duration
	// OnAttempt, if set, is told each attempt's result; OnDisabled each
	// endpoint the deliverer disables.
	OnAttempt  func(endpointID int64, r model.AttemptResult)
	OnDisabled func(endpointID int64, reason string)
	now        func() time.Time

	wake chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	// lanes are the endpoints' queues and requests in flight.
	lanes map[int64]*lane
	done  []finished
	// healthy is each endpoint's failing_since as last read (true: none),
	// so an attempt that changes nothing writes nothing.
	healthy map[int64]bool
}

// recordBatch is how many finished attempts wake a round to record them.
const recordBatch = 200

// finished is an attempt waiting to be recorded.
type finished struct {
	out      dao.AttemptOutcome
	endpoint int64
	result   model.AttemptResult
}

// NewDeliverer returns a deliverer with default tuning: the default
// schedule, 4 requests in flight per endpoint, a lease of a minute, claims
// of at most 256, five days failing before an endpoint is disabled.
func NewDeliverer(store *dao.Store, keys *webhook.Keyring, sender Sender, log *slog.Logger) *Deliverer {
	return &Deliverer{store: store, keys: keys, sender: sender, log: log, Schedule: DefaultRetrySchedule, Concurrency: 4,
		Lease: time.Minute, MaxClaim: 256, DisableAfter: 5 * 24 * time.Hour, Interval: 250 * time.Millisecond, now: time.Now,
		wake: make(chan struct{}, 1), lanes: map[int64]*lane{}, healthy: map[int64]bool{}}
}

// Job is the deliverer as a background job: a round follows the interval,
// or sooner when a request finishes with its endpoint's queue running low
// or a batch of attempts to record.
func (d *Deliverer) Job() Job {
	return Job{Name: "webhook-delivery", Interval: d.Interval, RunOnce: d.RunOnce, Wake: d.wake}
}

// Forget drops what an endpoint has queued and not started: it was
// disabled or deleted (Webhooks.OnStop), so no request starts for it
// after, rather than until this deliverer's next round. Its deliveries
// are FAILED or gone with it; the requests in flight end as they will.
func (d *Deliverer) Forget(endpointID int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l := d.lanes[endpointID]; l != nil {
		l.drop()
	}
}

// Wake starts a round now if none is running (the fan-out made
// deliveries: they are due at once).
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Wait waits for the requests in flight (after the job's context ended,
// they end at once, recorded nowhere: their leases run out), records the
// attempts that finished since the last round (no round runs after the
// context ended, and one not recorded is sent again by whoever claims it
// when its lease ends: a duplicate on every stop), then lets go of the
// claims still queued, so another instance, or this one started again,
// sends them at once rather than when their leases end.
func (d *Deliverer) Wait() {
	d.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := d.record(ctx); err != nil {
		d.log.Warn("webhook attempts not recorded on stop: sent again when their leases end", "recorded", n, "err", err)
	}
	d.mu.Lock()
	byLease := map[string][]int64{}
	for _, l := range d.lanes {
		for _, q := range l.queue {
			byLease[q.dl.Lease] = append(byLease[q.dl.Lease], q.dl.ID)
		}
		l.queue = nil
	}
	d.mu.Unlock()
	for lease, ids := range byLease {
		if err := d.store.ReleaseDeliveries(ctx, lease, ids, d.now()); err != nil {
			d.log.Warn("webhook deliveries not let go: due again when their leases end", "count", len(ids), "err", err)
		}
	}
}

// RunOnce records the attempts that finished, disables endpoints that
// asked for it or failed too long, tops up each endpoint's queue and
// starts what its slots have room for. It says how many attempts it
// recorded and claimed.
func (d *Deliverer) RunOnce(ctx context.Context) (int, error) {
	recorded, err := d.record(ctx)
	if err != nil {
		return 0, err
	}
	endpoints, err := d.store.WebhookEndpoints(ctx, true)
	if err != nil {
		return recorded, err
	}
	d.mu.Lock()
	clear(d.healthy)
	enabled := map[int64]bool{}
	for _, e := range endpoints {
		d.healthy[e.ID] = e.FailingSince == nil
		enabled[e.ID] = true
	}
	for id, l := range d.lanes {
		if !enabled[id] {
			// Disabled or deleted: what it queued is let go (its leases run
			// out), what it has in flight ends as it will.
			l.drop()
			if l.inflight == 0 {
				delete(d.lanes, id)
			}
		}
	}
	d.mu.Unlock()
	claimed := 0
	var errs []error
	for _, e := range endpoints {
		now := d.now()
		if e.FailingSince != nil && d.DisableAfter > 0 && now.Sub(*e.FailingSince) >= d.DisableAfter {
			errs = append(errs, d.disable(ctx, e.ID, fmt.Sprintf("failed every attempt for %v (WEBHOOK_DISABLE_AFTER)", d.DisableAfter)))
			continue
		}
		secrets, err := d.secrets(e, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("endpoint %d: %w", e.ID, err))
			continue
		}
		d.mu.Lock()
		l := d.lanes[e.ID]
		if l == nil {
			l = &lane{}
			d.lanes[e.ID] = l
		}
		l.url, l.secrets = e.URL, secrets
		want, gen := l.want(d.Concurrency, d.MaxClaim, d.Lease), l.gen
		d.mu.Unlock()
		if want > 0 {
			ds, err := d.store.ClaimDeliveries(ctx, e.ID, now, d.Lease, uuid.NewString()[:32], want)
			if err != nil {
				// Nothing is queued: a claim that did not commit leased
				// nothing, and another instance may hold what it read.
				errs = append(errs, err)
			} else {
				claimed += len(ds)
				d.mu.Lock()
				if l.gen == gen { // else the endpoint was disabled or deleted meanwhile
					for _, dl := range ds {
						l.queue = append(l.queue, queued{dl: dl, claimed: now})
					}
				}
				d.mu.Unlock()
			}
		}
		d.fill(ctx, l)
	}
	return recorded + claimed, errors.Join(errs...)
}

// secrets opens an endpoint's signing secrets: the current one, and the
// previous one in the day after a rotation.
func (d *Deliverer) secrets(e model.WebhookEndpoint, now time.Time) ([]string, error) {
	cur, err := d.keys.Open(e.Secret)
	if err != nil {
		return nil, err
	}
	out := []string{cur}
	if e.PreviousSecret != "" && e.PreviousUntil != nil && now.Before(*e.PreviousUntil) {
		prev, err := d.keys.Open(e.PreviousSecret)
		if err != nil {
			return nil, err
		}
		out = append(out, prev)
	}
	return out, nil
}

// fill starts a request for each free slot of l that its queue can fill.
func (d *Deliverer) fill(ctx context.Context, l *lane) {
	for {
		d.mu.Lock()
		if l.inflight >= d.Concurrency {
			d.mu.Unlock()
			return
		}
		q, ok := l.pop(d.now(), d.Lease/2)
		if ok {
			l.inflight++
		}
		d.mu.Unlock()
		if !ok {
			return
		}
		d.wg.Add(1)
		go d.run(ctx, l, q)
	}
}

// run sends q, then the next of its endpoint's queue, until the queue is
// empty or the job ends.
func (d *Deliverer) run(ctx context.Context, l *lane, q queued) {
	defer d.wg.Done()
	for {
		d.mu.Lock()
		url, secrets := l.url, l.secrets
		d.mu.Unlock()
		res := d.sender.Send(ctx, url, q.dl.EventID, secrets, q.dl.Body)
		d.mu.Lock()
		if !res.Abandoned {
			d.done = append(d.done, d.decide(q.dl, res))
			l.observe(res.Duration)
		}
		if res.Kind == model.AttemptGone {
			// The endpoint asked to be disabled: what it has queued is not
			// sent (the next round disables it and fails them).
			l.drop()
		}
		next, ok := q, false
		if ctx.Err() == nil {
			next, ok = l.pop(d.now(), d.Lease/2)
		}
		if !ok {
			l.inflight--
		}
		wake := len(d.done) >= recordBatch || l.low(d.Concurrency, d.MaxClaim, d.Lease)
		d.mu.Unlock()
		if wake {
			d.Wake()
		}
		if !ok {
			return
		}
		q = next
	}
}

// decide says what an attempt makes of its delivery.
func (d *Deliverer) decide(dl model.WebhookDelivery, res webhook.Result) finished {
	a := model.WebhookAttempt{DeliveryID: dl.ID, EndpointID: dl.EndpointID, EventID: dl.EventID, Attempt: dl.Attempts + 1,
		At: res.At, Duration: res.Duration, Status: res.Status, Body: res.Body}
	if res.Err != nil {
		a.Error = res.Err.Error()
	}
	out := dao.AttemptOutcome{Attempt: a, Lease: dl.Lease, State: model.DeliveryDelivered, Next: res.At}
	switch tries := dl.Tries + 1; {
	case res.Kind == model.AttemptDelivered:
	case res.Kind == model.AttemptGone || tries > len(d.Schedule):
		out.State = model.DeliveryFailed
	default:
		out.State, out.Next = model.DeliveryPending, d.now().Add(d.Schedule[tries-1])
	}
	return finished{out: out, endpoint: dl.EndpointID, result: res.Kind}
}

// record writes the finished attempts and the endpoints' health.
func (d *Deliverer) record(ctx context.Context) (int, error) {
	d.mu.Lock()
	done := d.done
	d.done = nil
	d.mu.Unlock()
	if len(done) == 0 {
		return 0, nil
	}
	outs := make([]dao.AttemptOutcome, len(done))
	for i, f := range done {
		outs[i] = f.out
	}
	if err := d.store.RecordAttempts(ctx, outs, d.now()); err != nil {
		d.mu.Lock()
		d.done = append(done, d.done...) // again next round (the leases hold them)
		d.mu.Unlock()
		return 0, err
	}
	// The latest attempt per endpoint says whether it is failing.
	latest := map[int64]finished{}
	var gone []int64
	for _, f := range done {
		if d.OnAttempt != nil {
			d.OnAttempt(f.endpoint, f.result)
		}
		if l, ok := latest[f.endpoint]; !ok || f.out.Attempt.At.After(l.out.Attempt.At) {
			latest[f.endpoint] = f
		}
		if f.result == model.AttemptGone {
			gone = append(gone, f.endpoint)
		}
		if f.out.State == model.DeliveryFailed {
			d.log.Warn("webhook delivery failed", "endpoint_id", f.endpoint, "event_id", f.out.Attempt.EventID,
				"attempts", f.out.Attempt.Attempt, "status", f.out.Attempt.Status, "err", f.out.Attempt.Error)
		}
	}
	var errs []error
	for id, f := range latest {
		ok := f.result == model.AttemptDelivered
		d.mu.Lock()
		known, seen := d.healthy[id]
		d.mu.Unlock()
		if seen && known == ok {
			continue // failing_since already says so
		}
		err := d.store.MarkEndpointHealth(ctx, id, ok, f.out.Attempt.At)
		if err == nil {
			d.mu.Lock()
			d.healthy[id] = ok
			d.mu.Unlock()
		}
		errs = append(errs, err)
	}
	for _, id := range gone {
		errs = append(errs, d.disable(ctx, id, "answered 410 Gone"))
	}
	return len(done), errors.Join(errs...)
}

// disable disables an endpoint the service gave up on, fails its pending
// deliveries, and audits it as paynotify's own act.
func (d *Deliverer) disable(ctx context.Context, id int64, reason string) error {
	now := d.now().UTC()
	disabled := false
	err := d.store.UpdateWebhooks(ctx, func(ctx context.Context, tx *dao.WebhookTx) error {
		e, err := tx.EndpointForUpdate(ctx, id)
		if errors.Is(err, model.ErrEndpointNotFound) {
			return nil
		}
		if err != nil || !e.Enabled {
			return err
		}
		before := summary(e)
		e.Enabled, e.DisabledReason, e.UpdatedAt = false, reason, now
		if err := tx.SaveEndpoint(ctx, e); err != nil {
			return err
		}
		if _, err := tx.FailPending(ctx, id, "endpoint disabled: "+reason, now); err != nil {
			return err
		}
		disabled = true
		return tx.InsertAudit(ctx, model.Audit{Key: apiKey(model.AuditWebhookUpdate, fmt.Sprint(id), "disable", uuid.NewString()),
			Operator: model.OperatorService, Action: model.AuditWebhookUpdate, TargetKind: model.TargetWebhook,
			TargetID: fmt.Sprint(id), Before: before, After: "disabled: " + reason})
	})
	if err == nil && disabled {
		d.Forget(id)
		d.log.Error("webhook endpoint disabled", "endpoint_id", id, "reason", reason)
		if d.OnDisabled != nil {
			d.OnDisabled(id, reason)
		}
	}
	return err
}
