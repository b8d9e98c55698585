package dao

import (
	"context"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"

	"paynotify/model"
)

// Webhooks' storage: endpoints, deliveries and attempts (service.Webhooks,
// service.Fanout, service.Deliverer).
//
// Fan-out is lossless by a flag, not a cursor: every outbox row is written
// with webhook_pending = 1 (the column's default: the notify transaction
// runs no statement of ours), and only the transaction that writes a row's
// deliveries sets it to 0. Outbox ids are not commit order, so a cursor
// could step over a row still uncommitted; a flag cannot. Every fan-out
// and every endpoint change first locks the one webhook_fanout row, so
// they follow one another: an endpoint change fans out what is committed
// and pending before it changes the endpoint (UpdateWebhooks' callbacks
// call FanOut first), so an endpoint made or enabled gets exactly the
// events fanned out after it — those committed after it, but for one
// committed while its transaction ran.

const (
	webhookEndpointTable = "webhook_endpoint"
	webhookDeliveryTable = "webhook_delivery"
	webhookAttemptTable  = "webhook_attempt"
	webhookFanoutTable   = "webhook_fanout"
)

type webhookEndpointRecord struct {
	ID                   int64 `gorm:"primaryKey"`
	URL                  string
	EventTypes           string
	Description          string
	Enabled              bool
	DisabledReason       string
	SecretSealed         string
	PreviousSecretSealed string
	PreviousUntil        *time.Time
	FailingSince         *time.Time
	CreateTime           time.Time
	UpdateTime           time.Time
}

func (webhookEndpointRecord) TableName() string { return webhookEndpointTable }

func (r webhookEndpointRecord) endpoint() model.WebhookEndpoint {
	var types []string
	if r.EventTypes != "" {
		types = strings.Split(r.EventTypes, ",")
	}
	return model.WebhookEndpoint{
		ID: r.ID, URL: r.URL, EventTypes: types, Description: r.Description, Enabled: r.Enabled,
		DisabledReason: r.DisabledReason, Secret: r.SecretSealed, PreviousSecret: r.PreviousSecretSealed,
		PreviousUntil: utcPtr(r.PreviousUntil), FailingSince: utcPtr(r.FailingSince),
		CreatedAt: r.CreateTime.UTC(), UpdatedAt: r.UpdateTime.UTC(),
	}
}

func endpointRecord(e model.WebhookEndpoint) webhookEndpointRecord {
	return webhookEndpointRecord{
		ID: e.ID, URL: e.URL, EventTypes: strings.Join(e.EventTypes, ","), Description: model.Truncate(e.Description, 500),
		Enabled: e.Enabled, DisabledReason: model.Truncate(e.DisabledReason, 200), SecretSealed: e.Secret,
		PreviousSecretSealed: e.PreviousSecret, PreviousUntil: utcPtr(e.PreviousUntil), FailingSince: utcPtr(e.FailingSince),
		CreateTime: e.CreatedAt.UTC(), UpdateTime: e.UpdatedAt.UTC(),
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

type webhookDeliveryRecord struct {
	ID            int64 `gorm:"primaryKey"`
	EndpointID    int64
	EventID       string
	EventType     string
	OrderID       int64
	Body          string
	State         string
	Attempts      int
	Tries         int
	NextAttemptAt time.Time
	Lease         string
	LastStatus    int
	LastError     string
	CreateTime    time.Time
	UpdateTime    time.Time
}

func (webhookDeliveryRecord) TableName() string { return webhookDeliveryTable }

func (r webhookDeliveryRecord) delivery() model.WebhookDelivery {
	return model.WebhookDelivery{
		ID: r.ID, EndpointID: r.EndpointID, EventID: r.EventID, EventType: r.EventType, OrderID: r.OrderID,
		Body: []byte(r.Body), State: model.DeliveryState(r.State), Attempts: r.Attempts, Tries: r.Tries,
		NextAttemptAt: r.NextAttemptAt.UTC(), LastStatus: r.LastStatus, LastError: r.LastError,
		CreatedAt: r.CreateTime.UTC(), UpdatedAt: r.UpdateTime.UTC(), Lease: r.Lease,
	}
}

type webhookAttemptRecord struct {
	ID          int64 `gorm:"primaryKey"`
	DeliveryID  int64
	EndpointID  int64
	EventID     string
	Attempt     int
	AttemptedAt time.Time
	DurationMs  int
	Status      int
	Body        string
	Error       string
}

func (webhookAttemptRecord) TableName() string { return webhookAttemptTable }

func (r webhookAttemptRecord) attempt() model.WebhookAttempt {
	return model.WebhookAttempt{
		ID: r.ID, DeliveryID: r.DeliveryID, EndpointID: r.EndpointID, EventID: r.EventID, Attempt: r.Attempt,
		At: r.AttemptedAt.UTC(), Duration: time.Duration(r.DurationMs) * time.Millisecond, Status: r.Status,
		Body: r.Body, Error: r.Error,
	}
}

func deliveries(recs []webhookDeliveryRecord) []model.WebhookDelivery {
	out := make([]model.WebhookDelivery, len(recs))
	for i, r := range recs {
		out[i] = r.delivery()
	}
	return out
}

// UpdateWebhooks runs fn in one transaction that first locks the
// webhook_fanout row (FOR UPDATE): fan-outs and endpoint changes, one at a
// time across every instance. Deadlocks retry as in UpdateOrder.
func (s *Store) UpdateWebhooks(ctx context.Context, fn func(ctx context.Context, tx *WebhookTx) error) error {
	return s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		var ids []int64
		if err := tx.db.WithContext(ctx).Table(webhookFanoutTable).Where("id = 1").
			Clauses(ForUpdate.clause()).Pluck("id", &ids).Error; err != nil {
			return mapErr(err)
		}
		if len(ids) != 1 {
			return errors.New("webhook_fanout has no row: migration 00014 not applied")
		}
		return fn(ctx, &WebhookTx{s: tx})
	})
}

// WebhookTx is a transaction holding the fan-out lock.
type WebhookTx struct{ s *Store }

// PendingEvents locks (FOR UPDATE, by primary key) up to limit committed
// outbox rows still to be fanned out, lowest id first. The keys are read
// first without a lock and then locked one by one by primary key, so no
// range of the outbox index is locked and no notification's insert waits
// on a fan-out.
func (tx *WebhookTx) PendingEvents(ctx context.Context, limit int) ([]model.OutboxRow, error) {
	ids, err := tx.pendingIDs(ctx, limit)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	var recs []outboxRecord
	if err := tx.s.db.WithContext(ctx).Where("id IN ? AND webhook_pending = 1", ids).Order("id").
		Clauses(ForUpdate.clause()).Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.OutboxRow, 0, len(recs))
	for _, r := range recs {
		row, err := r.row()
		if err != nil {
			// Not an event any receiver could read: it is the relay's
			// to mark FAILED; fan-out lets it go with no deliveries.
			row = model.OutboxRow{Seq: r.ID}
		}
		out = append(out, row)
	}
	return out, nil
}

// pendingIDs reads, without a lock, the ids of up to limit committed
// outbox rows still to be fanned out, lowest first.
func (tx *WebhookTx) pendingIDs(ctx context.Context, limit int) ([]int64, error) {
	var ids []int64
	err := tx.s.db.WithContext(ctx).Table(outboxTable).Where("webhook_pending = 1").Order("webhook_pending, id").
		Limit(limit).Pluck("id", &ids).Error
	return ids, mapErr(err)
}

// ClearPending clears the pending flag of up to limit committed outbox
// rows, lowest id first, without reading their payloads: what a fan-out
// to no endpoint does. It says how many rows it cleared (the fan-out lock
// keeps them pending between the read and the update).
func (tx *WebhookTx) ClearPending(ctx context.Context, limit int) (int, error) {
	ids, err := tx.pendingIDs(ctx, limit)
	if err != nil {
		return 0, err
	}
	return len(ids), tx.MarkFannedOut(ctx, ids)
}

// MarkFannedOut clears the pending flag of outbox rows whose deliveries
// this transaction wrote.
func (tx *WebhookTx) MarkFannedOut(ctx context.Context, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	return mapErr(tx.s.db.WithContext(ctx).Table(outboxTable).Where("id IN ?", seqs).
		Update("webhook_pending", 0).Error)
}

// Endpoints lists every endpoint (enabled only, if so), by id.
func (tx *WebhookTx) Endpoints(ctx context.Context, enabledOnly bool) ([]model.WebhookEndpoint, error) {
	return tx.s.webhookEndpoints(ctx, enabledOnly)
}

// InsertDeliveries writes deliveries (each due at its NextAttemptAt).
func (tx *WebhookTx) InsertDeliveries(ctx context.Context, ds []model.WebhookDelivery) error {
	return tx.s.insertDeliveries(ctx, ds)
}

func (s *Store) insertDeliveries(ctx context.Context, ds []model.WebhookDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	recs := make([]webhookDeliveryRecord, len(ds))
	for i, d := range ds {
		recs[i] = deliveryRecord(d)
	}
	return mapErr(s.db.WithContext(ctx).CreateInBatches(&recs, 200).Error)
}

// deliveryRecord is a new delivery's row: PENDING, due at NextAttemptAt.
func deliveryRecord(d model.WebhookDelivery) webhookDeliveryRecord {
	return webhookDeliveryRecord{
		EndpointID: d.EndpointID, EventID: d.EventID, EventType: d.EventType, OrderID: d.OrderID, Body: string(d.Body),
		State: string(model.DeliveryPending), NextAttemptAt: d.NextAttemptAt.UTC(), CreateTime: d.CreatedAt.UTC(),
		UpdateTime: d.CreatedAt.UTC(),
	}
}

// InsertEndpoint writes a new endpoint and returns its id.
func (tx *WebhookTx) InsertEndpoint(ctx context.Context, e model.WebhookEndpoint) (int64, error) {
	rec := endpointRecord(e)
	rec.ID = 0
	err := tx.s.db.WithContext(ctx).Create(&rec).Error
	return rec.ID, mapErr(err)
}

// EndpointForUpdate reads and locks one endpoint.
func (tx *WebhookTx) EndpointForUpdate(ctx context.Context, id int64) (model.WebhookEndpoint, error) {
	var rec webhookEndpointRecord
	err := tx.s.db.WithContext(ctx).Clauses(ForUpdate.clause()).Where("id = ?", id).Take(&rec).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return model.WebhookEndpoint{}, model.ErrEndpointNotFound
	}
	return rec.endpoint(), mapErr(err)
}

// SaveEndpoint writes every field of an endpoint read in this transaction.
func (tx *WebhookTx) SaveEndpoint(ctx context.Context, e model.WebhookEndpoint) error {
	rec := endpointRecord(e)
	return mapErr(tx.s.db.WithContext(ctx).Model(&webhookEndpointRecord{}).Where("id = ?", e.ID).
		Select("*").Omit("id", "create_time").Updates(&rec).Error)
}

// DeleteEndpoint deletes an endpoint with its deliveries and their
// attempts.
func (tx *WebhookTx) DeleteEndpoint(ctx context.Context, id int64) error {
	db := tx.s.db.WithContext(ctx)
	if err := db.Where("endpoint_id = ?", id).Delete(&webhookAttemptRecord{}).Error; err != nil {
		return mapErr(err)
	}
	if err := db.Where("endpoint_id = ?", id).Delete(&webhookDeliveryRecord{}).Error; err != nil {
		return mapErr(err)
	}
	return mapErr(db.Where("id = ?", id).Delete(&webhookEndpointRecord{}).Error)
}

// FailPending marks every PENDING delivery of an endpoint FAILED with
// reason (it was disabled: re-enabling sends only what is committed
// after) and says how many.
func (tx *WebhookTx) FailPending(ctx context.Context, endpointID int64, reason string, now time.Time) (int, error) {
	res := tx.s.db.WithContext(ctx).Model(&webhookDeliveryRecord{}).Where("endpoint_id = ? AND state = ?", endpointID, model.DeliveryPending).
		Updates(map[string]any{"state": model.DeliveryFailed, "last_error": model.Truncate(reason, 500), "lease": "", "update_time": now.UTC()})
	return int(res.RowsAffected), mapErr(res.Error)
}

// InsertAudit records the operator action this transaction does, with it.
func (tx *WebhookTx) InsertAudit(ctx context.Context, a model.Audit) error {
	return tx.s.insertAudit(ctx, a)
}

// Requeue makes up to limit deliveries of an endpoint in state, made
// since, due again at now with their tries from zero — never one a
// deliverer holds — and says how many. A delivery with no outbox row
// behind it (a webhook.test) is resent as any other.
func (tx *WebhookTx) Requeue(ctx context.Context, endpointID int64, state model.DeliveryState, since, now time.Time, limit int) (int, error) {
	var ids []int64
	q := tx.s.db.WithContext(ctx).Table(webhookDeliveryTable).Where("endpoint_id = ? AND state = ? AND create_time >= ?", endpointID, state, since.UTC())
	if state == model.DeliveryPending {
		q = q.Where("lease = ''")
	}
	if err := q.Order("id").Limit(limit).Pluck("id", &ids).Error; err != nil || len(ids) == 0 {
		return 0, mapErr(err)
	}
	return tx.requeue(ctx, ids, now)
}

// RequeueOne makes one delivery of an endpoint due again at now, tries
// from zero, unless a deliverer holds it (model.ErrNotActionable).
func (tx *WebhookTx) RequeueOne(ctx context.Context, endpointID, id int64, now time.Time) (model.WebhookDelivery, error) {
	var rec webhookDeliveryRecord
	err := tx.s.db.WithContext(ctx).Clauses(ForUpdate.clause()).Where("id = ? AND endpoint_id = ?", id, endpointID).Take(&rec).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return model.WebhookDelivery{}, model.ErrDeliveryNotFound
	}
	if err != nil {
		return model.WebhookDelivery{}, mapErr(err)
	}
	if rec.Lease != "" {
		return rec.delivery(), model.ErrNotActionable
	}
	if _, err := tx.requeue(ctx, []int64{id}, now); err != nil {
		return model.WebhookDelivery{}, err
	}
	rec.State, rec.Tries, rec.NextAttemptAt = string(model.DeliveryPending), 0, now.UTC()
	return rec.delivery(), nil
}

func (tx *WebhookTx) requeue(ctx context.Context, ids []int64, now time.Time) (int, error) {
	res := tx.s.db.WithContext(ctx).Model(&webhookDeliveryRecord{}).Where("id IN ? AND lease = ''", ids).
		Updates(map[string]any{"state": model.DeliveryPending, "tries": 0, "next_attempt_at": now.UTC(), "update_time": now.UTC()})
	return int(res.RowsAffected), mapErr(res.Error)
}

func (s *Store) webhookEndpoints(ctx context.Context, enabledOnly bool) ([]model.WebhookEndpoint, error) {
	var recs []webhookEndpointRecord
	q := s.db.WithContext(ctx).Order("id")
	if enabledOnly {
		q = q.Where("enabled = ?", true)
	}
	if err := q.Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.WebhookEndpoint, len(recs))
	for i, r := range recs {
		out[i] = r.endpoint()
	}
	return out, nil
}

// WebhookEndpoints lists every endpoint (enabled only, if so), by id.
func (s *Store) WebhookEndpoints(ctx context.Context, enabledOnly bool) ([]model.WebhookEndpoint, error) {
	return s.webhookEndpoints(ctx, enabledOnly)
}

// WebhookEndpoint reads one endpoint.
func (s *Store) WebhookEndpoint(ctx context.Context, id int64) (model.WebhookEndpoint, error) {
	var rec webhookEndpointRecord
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&rec).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return model.WebhookEndpoint{}, model.ErrEndpointNotFound
	}
	return rec.endpoint(), mapErr(err)
}
