package dao

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"paynotify/model"
)

// ClaimDeliveries claims up to limit due PENDING deliveries of one
// endpoint, oldest due first: it reads their keys, locks them by primary
// key (FOR UPDATE SKIP LOCKED: a row another instance is claiming is
// left to it) with the condition again, and writes the claim — lease as
// the token, the next attempt a lease away — before committing. Two
// instances never both hold one delivery; one that dies holding it leaves
// it due again when the lease ends, to be sent again under the same
// webhook-id. A claim that fails, COMMIT included, returns no deliveries:
// none is leased, and another instance may claim them.
func (s *Store) ClaimDeliveries(ctx context.Context, endpointID int64, now time.Time, lease time.Duration, token string, limit int) ([]model.WebhookDelivery, error) {
	var out []model.WebhookDelivery
	err := s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		out = nil // a try that collided and is run again starts afresh
		var ids []int64
		if err := tx.db.WithContext(ctx).Table(webhookDeliveryTable).
			Where("endpoint_id = ? AND state = ? AND next_attempt_at <= ?", endpointID, model.DeliveryPending, now.UTC()).
			Order("endpoint_id, state, next_attempt_at").Limit(limit).Pluck("id", &ids).Error; err != nil || len(ids) == 0 {
			return mapErr(err)
		}
		var recs []webhookDeliveryRecord
		if err := tx.db.WithContext(ctx).Where("id IN ? AND state = ? AND next_attempt_at <= ?", ids, model.DeliveryPending, now.UTC()).
			Clauses(ForUpdateSkipLocked.clause()).Find(&recs).Error; err != nil || len(recs) == 0 {
			return mapErr(err)
		}
		claimed := make([]int64, len(recs))
		for i, r := range recs {
			claimed[i] = r.ID
		}
		if err := tx.db.WithContext(ctx).Model(&webhookDeliveryRecord{}).Where("id IN ?", claimed).
			Updates(map[string]any{"next_attempt_at": now.Add(lease).UTC(), "lease": token}).Error; err != nil {
			return mapErr(err)
		}
		out = make([]model.WebhookDelivery, len(recs))
		for i, r := range recs {
			r.Lease = token
			out[i] = r.delivery()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReleaseDeliveries lets go of a claim's deliveries that were never sent:
// due again at now, for any instance (compare-and-set on the lease: one
// another claim took meanwhile is left alone).
func (s *Store) ReleaseDeliveries(ctx context.Context, lease string, ids []int64, now time.Time) error {
	if len(ids) == 0 || lease == "" {
		return nil
	}
	return mapErr(s.db.WithContext(ctx).Model(&webhookDeliveryRecord{}).
		Where("id IN ? AND lease = ? AND state = ?", ids, lease, model.DeliveryPending).
		Updates(map[string]any{"next_attempt_at": now.UTC(), "lease": ""}).Error)
}

// AttemptOutcome is one attempt to record and what it makes of its
// delivery.
type AttemptOutcome struct {
	Attempt model.WebhookAttempt
	// Lease is the claim's token: a delivery another claim took meanwhile
	// (the lease ran out) is not changed, though the attempt is logged.
	Lease string
	State model.DeliveryState
	Next  time.Time
}

// RecordAttempts logs attempts and moves their deliveries on, in one
// transaction: one more attempt and try, the state and next attempt
// decided, the claim let go (compare-and-set on the lease).
func (s *Store) RecordAttempts(ctx context.Context, outs []AttemptOutcome, now time.Time) error {
	if len(outs) == 0 {
		return nil
	}
	return s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		recs := make([]webhookAttemptRecord, len(outs))
		for i, o := range outs {
			a := o.Attempt
			recs[i] = webhookAttemptRecord{
				DeliveryID: a.DeliveryID, EndpointID: a.EndpointID, EventID: a.EventID, Attempt: a.Attempt,
				AttemptedAt: a.At.UTC(), DurationMs: int(a.Duration.Milliseconds()), Status: a.Status,
				Body: model.Truncate(a.Body, 1024), Error: model.Truncate(a.Error, 500),
			}
		}
		if err := tx.db.WithContext(ctx).CreateInBatches(&recs, 200).Error; err != nil {
			return mapErr(err)
		}
		// Deliveries answered 2xx move alike: one statement for each
		// status and claim, compare-and-set on the lease as the single ones
		// (a claim's deliveries share its token).
		type group struct {
			status int
			lease  string
		}
		delivered := map[group][]int64{}
		for _, o := range outs {
			if o.State == model.DeliveryDelivered && o.Attempt.Error == "" {
				g := group{o.Attempt.Status, o.Lease}
				delivered[g] = append(delivered[g], o.Attempt.DeliveryID)
			}
		}
		for g, ids := range delivered {
			if err := tx.db.WithContext(ctx).Model(&webhookDeliveryRecord{}).Where("id IN ? AND lease = ?", ids, g.lease).
				Updates(map[string]any{
					"state": model.DeliveryDelivered, "attempts": gorm.Expr("attempts + 1"), "tries": gorm.Expr("tries + 1"),
					"next_attempt_at": now.UTC(), "lease": "", "last_status": g.status, "last_error": "", "update_time": now.UTC(),
				}).Error; err != nil {
				return mapErr(err)
			}
		}
		for _, o := range outs {
			if o.State == model.DeliveryDelivered && o.Attempt.Error == "" {
				continue // above
			}
			if err := tx.db.WithContext(ctx).Model(&webhookDeliveryRecord{}).Where("id = ? AND lease = ?", o.Attempt.DeliveryID, o.Lease).
				Updates(map[string]any{
					"state": o.State, "attempts": gorm.Expr("attempts + 1"), "tries": gorm.Expr("tries + 1"),
					"next_attempt_at": o.Next.UTC(), "lease": "", "last_status": o.Attempt.Status,
					"last_error": model.Truncate(o.Attempt.Error, 500), "update_time": now.UTC(),
				}).Error; err != nil {
				return mapErr(err)
			}
		}
		return nil
	})
}

// MarkEndpointHealth records an endpoint's latest attempt: a delivered
// one clears failing_since, a failed one sets it unless set.
func (s *Store) MarkEndpointHealth(ctx context.Context, id int64, delivered bool, at time.Time) error {
	q := s.db.WithContext(ctx).Model(&webhookEndpointRecord{}).Where("id = ?", id)
	if delivered {
		return mapErr(q.Where("failing_since IS NOT NULL").Update("failing_since", nil).Error)
	}
	return mapErr(q.Where("failing_since IS NULL").Update("failing_since", at.UTC()).Error)
}

// WebhookDeliveries lists an endpoint's deliveries, newest first: in a
// state (any if empty), made since (any time if zero), at most limit.
func (s *Store) WebhookDeliveries(ctx context.Context, endpointID int64, state model.DeliveryState, since time.Time, limit int) ([]model.WebhookDelivery, error) {
	q := s.db.WithContext(ctx).Where("endpoint_id = ?", endpointID)
	if state != "" {
		q = q.Where("state = ?", state)
	}
	if !since.IsZero() {
		q = q.Where("create_time >= ?", since.UTC())
	}
	var recs []webhookDeliveryRecord
	err := q.Order("id DESC").Limit(limit).Find(&recs).Error
	return deliveries(recs), mapErr(err)
}

// EventDeliveries lists the deliveries of one event, to every endpoint.
func (s *Store) EventDeliveries(ctx context.Context, eventID string) ([]model.WebhookDelivery, error) {
	var recs []webhookDeliveryRecord
	err := s.db.WithContext(ctx).Where("event_id = ?", eventID).Order("id").Find(&recs).Error
	return deliveries(recs), mapErr(err)
}

// OrderDeliveries lists the deliveries of an order's events, oldest first
// (a payment's timeline).
func (s *Store) OrderDeliveries(ctx context.Context, orderID int64) ([]model.WebhookDelivery, error) {
	var recs []webhookDeliveryRecord
	err := s.db.WithContext(ctx).Where("order_id = ?", orderID).Order("id").Limit(500).Find(&recs).Error
	return deliveries(recs), mapErr(err)
}

// WebhookDelivery reads one delivery of an endpoint.
func (s *Store) WebhookDelivery(ctx context.Context, endpointID, id int64) (model.WebhookDelivery, error) {
	var rec webhookDeliveryRecord
	err := s.db.WithContext(ctx).Where("id = ? AND endpoint_id = ?", id, endpointID).Take(&rec).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return model.WebhookDelivery{}, model.ErrDeliveryNotFound
	}
	return rec.delivery(), mapErr(err)
}

// WebhookAttempts lists the attempts of deliveries, by delivery, oldest
// first.
func (s *Store) WebhookAttempts(ctx context.Context, deliveryIDs ...int64) (map[int64][]model.WebhookAttempt, error) {
	out := map[int64][]model.WebhookAttempt{}
	if len(deliveryIDs) == 0 {
		return out, nil
	}
	var recs []webhookAttemptRecord
	if err := s.db.WithContext(ctx).Where("delivery_id IN ?", deliveryIDs).Order("id").Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	for _, r := range recs {
		out[r.DeliveryID] = append(out[r.DeliveryID], r.attempt())
	}
	return out, nil
}

// InsertDelivery writes one delivery outside any fan-out (a webhook.test)
// and returns its id.
func (s *Store) InsertDelivery(ctx context.Context, d model.WebhookDelivery) (int64, error) {
	rec := deliveryRecord(d)
	err := s.db.WithContext(ctx).Create(&rec).Error
	return rec.ID, mapErr(err)
}

// DeliveryStats counts PENDING and FAILED deliveries per endpoint.
func (s *Store) DeliveryStats(ctx context.Context) ([]model.DeliveryStat, error) {
	var rows []struct {
		EndpointID int64
		State      string
		N          int64
		Oldest     string // MIN over a DATETIME is text on SQLite (parseDBTime)
	}
	err := s.db.WithContext(ctx).Table(webhookDeliveryTable).
		Select("endpoint_id, state, COUNT(*) AS n, MIN(create_time) AS oldest").
		Where("state IN ?", []model.DeliveryState{model.DeliveryPending, model.DeliveryFailed}).
		Group("endpoint_id, state").Scan(&rows).Error
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.DeliveryStat, len(rows))
	for i, r := range rows {
		oldest, err := parseDBTime(r.Oldest)
		if err != nil {
			return nil, err
		}
		out[i] = model.DeliveryStat{EndpointID: r.EndpointID, State: model.DeliveryState(r.State), Count: r.N, Oldest: oldest}
	}
	return out, nil
}

// PurgeWebhookAttempts deletes up to limit attempts logged before cutoff
// (idx_webhook_attempt_at), by primary key, and says how many.
func (s *Store) PurgeWebhookAttempts(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	var ids []int64
	err := s.db.WithContext(ctx).Table(webhookAttemptTable).Where("attempted_at < ?", cutoff.UTC()).
		Order("attempted_at").Limit(limit).Pluck("id", &ids).Error
	if err != nil || len(ids) == 0 {
		return 0, mapErr(err)
	}
	return s.statement(ctx, func(db *gorm.DB) *gorm.DB {
		return db.Table(webhookAttemptTable).Where("id IN ? AND attempted_at < ?", ids, cutoff.UTC()).Delete(nil)
	})
}

// PurgeWebhookDeliveries deletes up to limit DELIVERED or FAILED
// deliveries last changed before cutoff (idx_webhook_delivery_state_update),
// by primary key, and says how many. A PENDING one is never deleted.
func (s *Store) PurgeWebhookDeliveries(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	deleted := 0
	for _, st := range []model.DeliveryState{model.DeliveryDelivered, model.DeliveryFailed} {
		var ids []int64
		err := s.db.WithContext(ctx).Table(webhookDeliveryTable).Where("state = ? AND update_time < ?", st, cutoff.UTC()).
			Order("state, update_time").Limit(limit-deleted).Pluck("id", &ids).Error
		if err != nil {
			return deleted, mapErr(err)
		}
		if len(ids) == 0 {
			continue
		}
		n, err := s.statement(ctx, func(db *gorm.DB) *gorm.DB {
			return db.Table(webhookDeliveryTable).Where("id IN ? AND state = ? AND update_time < ?", ids, st, cutoff.UTC()).Delete(nil)
		})
		deleted += n
		if err != nil || deleted >= limit {
			return deleted, err
		}
	}
	return deleted, nil
}

// OldestWebhookAttempt is when the oldest attempt still logged was made
// (false if none is).
func (s *Store) OldestWebhookAttempt(ctx context.Context) (time.Time, bool, error) {
	var ts []time.Time
	err := s.db.WithContext(ctx).Table(webhookAttemptTable).Order("attempted_at").Limit(1).Pluck("attempted_at", &ts).Error
	if err != nil || len(ts) == 0 {
		return time.Time{}, false, mapErr(err)
	}
	return ts[0], true, nil
}

// OldestFinishedDelivery is when the finished (DELIVERED or FAILED)
// delivery changed longest ago last changed (false if none is finished).
func (s *Store) OldestFinishedDelivery(ctx context.Context) (time.Time, bool, error) {
	var oldest time.Time
	found := false
	for _, st := range []model.DeliveryState{model.DeliveryDelivered, model.DeliveryFailed} {
		var ts []time.Time
		err := s.db.WithContext(ctx).Table(webhookDeliveryTable).Where("state = ?", st).Order("state, update_time").Limit(1).
			Pluck("update_time", &ts).Error
		if err != nil {
			return time.Time{}, false, mapErr(err)
		}
		if len(ts) > 0 && (!found || ts[0].Before(oldest)) {
			oldest, found = ts[0], true
		}
	}
	return oldest, found, nil
}
