package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"paynotify/dao"
	"paynotify/internal/netguard"
	"paynotify/model"
	"paynotify/webhook"
)

// Webhooks manages the endpoints merchants' systems register to hear
// every event over signed HTTP (Standard Webhooks): creating, changing,
// rotating and deleting them, resending, and the views of deliveries.
// Every change is audited in its transaction, and takes the fan-out lock
// (dao.UpdateWebhooks) after fanning out what is already committed, so
// an endpoint made or enabled gets only the events committed after it.
type Webhooks struct {
	store *dao.Store
	// keys seal the signing secrets; nil, webhooks are off.
	keys *webhook.Keyring
	// AllowPrivate is WEBHOOK_ALLOW_PRIVATE: http:// and loopback or
	// private addresses allowed (dev, tests).
	AllowPrivate bool
	// OnStop, if set, is told each endpoint disabled or deleted, once
	// committed (serve: Deliverer.Forget, so nothing queued is sent).
	OnStop func(endpointID int64)
	now    func() time.Time
	// act, if set, is the console operator these use cases act for (By).
	act *model.Act
}

// By is these use cases acting for an operator of the console: each
// change is audited under a's operator, one-time key and note, as the
// console's other actions are, instead of the admin API's.
func (w *Webhooks) By(a model.Act) *Webhooks {
	c := *w
	c.act = &a
	return &c
}

// NewWebhooks returns the webhook use cases; keys nil means webhooks are
// off (every change is model.ErrWebhooksOff).
func NewWebhooks(store *dao.Store, keys *webhook.Keyring) *Webhooks {
	return &Webhooks{store: store, keys: keys, now: time.Now}
}

// On reports whether webhooks are on (WEBHOOK_SECRET_KEY is set).
func (w *Webhooks) On() bool { return w.keys != nil }

// EndpointInput is what a client sets on an endpoint; nil fields are left
// as they are (PATCH) or take their default (POST: enabled).
type EndpointInput struct {
	URL         *string
	EventTypes  *[]string
	Description *string
	Enabled     *bool
}

// secretRotation is how long the previous secret signs too after a
// rotation.
const secretRotation = 24 * time.Hour

// maxResend is the most deliveries one resend request queues.
const maxResend = 1000

// Create registers an endpoint and answers it with its signing secret,
// which is never shown again.
func (w *Webhooks) Create(ctx context.Context, in EndpointInput) (model.WebhookEndpoint, string, error) {
	if w.keys == nil {
		return model.WebhookEndpoint{}, "", model.ErrWebhooksOff
	}
	if in.URL == nil || in.EventTypes == nil {
		return model.WebhookEndpoint{}, "", fmt.Errorf("%w: url and event_types are required", model.ErrInvalidRequest)
	}
	now := w.now().UTC().Truncate(time.Millisecond)
	e := model.WebhookEndpoint{Enabled: true, CreatedAt: now, UpdatedAt: now}
	if err := w.apply(ctx, &e, in); err != nil {
		return model.WebhookEndpoint{}, "", err
	}
	secret := webhook.NewSecret()
	e.Secret = w.keys.Seal(secret)
	err := w.store.UpdateWebhooks(ctx, func(ctx context.Context, tx *dao.WebhookTx) error {
		if err := drain(ctx, tx, now); err != nil {
			return err
		}
		id, err := tx.InsertEndpoint(ctx, e)
		if err != nil {
			return err
		}
		e.ID = id
		return tx.InsertAudit(ctx, w.audit(model.AuditWebhookCreate, id, "", summary(e), strconv.FormatInt(id, 10)))
	})
	if err != nil {
		return model.WebhookEndpoint{}, "", err
	}
	return e, secret, nil
}

// Update changes an endpoint. Disabling it fails its pending deliveries;
// enabling it delivers only what is committed after.
func (w *Webhooks) Update(ctx context.Context, id int64, in EndpointInput) (model.WebhookEndpoint, error) {
	if w.keys == nil {
		return model.WebhookEndpoint{}, model.ErrWebhooksOff
	}
	now := w.now().UTC().Truncate(time.Millisecond)
	var out model.WebhookEndpoint
	err := w.store.UpdateWebhooks(ctx, func(ctx context.Context, tx *dao.WebhookTx) error {
		if err := drain(ctx, tx, now); err != nil {
			return err
		}
		e, err := tx.EndpointForUpdate(ctx, id)
		if err != nil {
			return err
		}
		before, was := summary(e), e.Enabled
		if err := w.apply(ctx, &e, in); err != nil {
			return err
		}
		switch {
		case was && !e.Enabled:
			if _, err := tx.FailPending(ctx, id, "endpoint disabled", now); err != nil {
				return err
			}
		case !was && e.Enabled:
			e.DisabledReason, e.FailingSince = "", nil
		}
		e.UpdatedAt = now
		if err := tx.SaveEndpoint(ctx, e); err != nil {
			return err
		}
		out = e
		return tx.InsertAudit(ctx, w.audit(model.AuditWebhookUpdate, id, before, summary(e), strconv.FormatInt(id, 10), uuid.NewString()))
	})
	if err == nil && !out.Enabled {
		w.stopped(id)
	}
	return out, err
}

// stopped tells OnStop an endpoint takes no more deliveries.
func (w *Webhooks) stopped(id int64) {
	if w.OnStop != nil {
		w.OnStop(id)
	}
}

// Rotate gives an endpoint a new signing secret and answers it; the
// previous one still signs every delivery for 24 hours. A second rotation
// within those hours is model.ErrNotActionable: it would stop at once the
// secret the receiver may still hold (the one the first replaced, or the
// first's own, its answer lost), so it waits for the overlap to end, or
// is RotateImmediately.
func (w *Webhooks) Rotate(ctx context.Context, id int64) (model.WebhookEndpoint, string, error) {
	return w.rotate(ctx, id, false)
}

// RotateImmediately gives an endpoint a new signing secret that alone
// signs from now on, whatever overlap is under way: for a secret that
// leaked, every older one stops at once.
func (w *Webhooks) RotateImmediately(ctx context.Context, id int64) (model.WebhookEndpoint, string, error) {
	return w.rotate(ctx, id, true)
}

func (w *Webhooks) rotate(ctx context.Context, id int64, immediate bool) (model.WebhookEndpoint, string, error) {
	if w.keys == nil {
		return model.WebhookEndpoint{}, "", model.ErrWebhooksOff
	}
	now := w.now().UTC().Truncate(time.Millisecond)
	secret := webhook.NewSecret()
	var out model.WebhookEndpoint
	err := w.store.UpdateWebhooks(ctx, func(ctx context.Context, tx *dao.WebhookTx) error {
		e, err := tx.EndpointForUpdate(ctx, id)
		if err != nil {
			return err
		}
		// A secret this key cannot open (sealed under an earlier
		// WEBHOOK_SECRET_KEY) signs nothing: it is not kept as previous.
		_, unreadable := w.keys.Open(e.Secret)
		overlap := e.PreviousUntil != nil && e.PreviousUntil.After(now)
		after := "new secret; every previous one stopped"
		if !immediate && unreadable == nil {
			after = "new secret; the previous one signs too until " + now.Add(secretRotation).Format(time.RFC3339)
		}
		// The audit row first: a console action sent again is
		// model.ErrAlreadyDone before anything else is said of it.
		if err := tx.InsertAudit(ctx, w.audit(model.AuditWebhookRotate, id, "secret", after, strconv.FormatInt(id, 10), uuid.NewString())); err != nil {
			return err
		}
		switch {
		case immediate || unreadable != nil:
			e.PreviousSecret, e.PreviousUntil = "", nil
		case overlap:
			return fmt.Errorf("%w: endpoint %d was rotated and its previous secret signs until %s: rotating again now would stop the secret its receiver may still hold; rotate after that, or immediately (every older secret stops at once)",
				model.ErrNotActionable, id, e.PreviousUntil.UTC().Format(time.RFC3339))
		default:
			until := now.Add(secretRotation)
			e.PreviousSecret, e.PreviousUntil = e.Secret, &until
		}
		e.Secret, e.UpdatedAt = w.keys.Seal(secret), now
		if err := tx.SaveEndpoint(ctx, e); err != nil {
			return err
		}
		out = e
		return nil
	})
	return out, secret, err
}

// Delete deletes an endpoint, its deliveries and their attempts.
func (w *Webhooks) Delete(ctx context.Context, id int64) error {
	if w.keys == nil {
		return model.ErrWebhooksOff
	}
	err := w.store.UpdateWebhooks(ctx, func(ctx context.Context, tx *dao.WebhookTx) error {
		e, err := tx.EndpointForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if err := tx.DeleteEndpoint(ctx, id); err != nil {
			return err
		}
		return tx.InsertAudit(ctx, w.audit(model.AuditWebhookDelete, id, summary(e), "deleted", strconv.FormatInt(id, 10)))
	})
	if err == nil {
		w.stopped(id)
	}
	return err
}

// Stats counts each endpoint's PENDING and FAILED deliveries.
func (w *Webhooks) Stats(ctx context.Context) ([]model.DeliveryStat, error) {
	return w.store.DeliveryStats(ctx)
}

// Endpoints lists every endpoint.
func (w *Webhooks) Endpoints(ctx context.Context) ([]model.WebhookEndpoint, error) {
	if w.keys == nil {
		return nil, model.ErrWebhooksOff
	}
	return w.store.WebhookEndpoints(ctx, false)
}

// Endpoint reads one endpoint.
func (w *Webhooks) Endpoint(ctx context.Context, id int64) (model.WebhookEndpoint, error) {
	if w.keys == nil {
		return model.WebhookEndpoint{}, model.ErrWebhooksOff
	}
	return w.store.WebhookEndpoint(ctx, id)
}

// DeliveryView is a delivery with its attempts.
type DeliveryView struct {
	model.WebhookDelivery
	Log []model.WebhookAttempt
}

// Deliveries lists an endpoint's deliveries, newest first, in a state (any
// if empty), made since (any time if zero), at most limit, each with its
// attempts.
func (w *Webhooks) Deliveries(ctx context.Context, endpointID int64, state model.DeliveryState, since time.Time, limit int) ([]DeliveryView, error) {
	if _, err := w.Endpoint(ctx, endpointID); err != nil {
		return nil, err
	}
	ds, err := w.store.WebhookDeliveries(ctx, endpointID, state, since, limit)
	if err != nil {
		return nil, err
	}
	return w.withAttempts(ctx, ds)
}

// EventDeliveries lists an event's deliveries to every endpoint.
func (w *Webhooks) EventDeliveries(ctx context.Context, eventID string) ([]DeliveryView, error) {
	if w.keys == nil {
		return nil, model.ErrWebhooksOff
	}
	ds, err := w.store.EventDeliveries(ctx, eventID)
	if err != nil {
		return nil, err
	}
	return w.withAttempts(ctx, ds)
}

// OrderDeliveries lists the deliveries of an order's events (a payment's
// timeline); none when webhooks are off.
func (w *Webhooks) OrderDeliveries(ctx context.Context, orderID int64) ([]DeliveryView, error) {
	ds, err := w.store.OrderDeliveries(ctx, orderID)
	if err != nil {
		return nil, err
	}
	return w.withAttempts(ctx, ds)
}

// Delivery reads one delivery of an endpoint with its attempts.
func (w *Webhooks) Delivery(ctx context.Context, endpointID, id int64) (DeliveryView, error) {
	if w.keys == nil {
		return DeliveryView{}, model.ErrWebhooksOff
	}
	d, err := w.store.WebhookDelivery(ctx, endpointID, id)
	if err != nil {
		return DeliveryView{}, err
	}
	vs, err := w.withAttempts(ctx, []model.WebhookDelivery{d})
	if err != nil {
		return DeliveryView{}, err
	}
	return vs[0], nil
}

func (w *Webhooks) withAttempts(ctx context.Context, ds []model.WebhookDelivery) ([]DeliveryView, error) {
	ids := make([]int64, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	attempts, err := w.store.WebhookAttempts(ctx, ids...)
	if err != nil {
		return nil, err
	}
	out := make([]DeliveryView, len(ds))
	for i, d := range ds {
		out[i] = DeliveryView{WebhookDelivery: d, Log: attempts[d.ID]}
	}
	return out, nil
}

// Resend queues one delivery again at once (its tries from zero), the
// same body under the same webhook-id. One a deliverer holds now is
// model.ErrNotActionable.
func (w *Webhooks) Resend(ctx context.Context, endpointID, deliveryID int64) (model.WebhookDelivery, error) {
	if w.keys == nil {
		return model.WebhookDelivery{}, model.ErrWebhooksOff
	}
	now := w.now().UTC()
	var out model.WebhookDelivery
	err := w.store.UpdateWebhooks(ctx, func(ctx context.Context, tx *dao.WebhookTx) error {
		if err := enabled(tx.EndpointForUpdate(ctx, endpointID)); err != nil {
			return err
		}
		d, err := tx.RequeueOne(ctx, endpointID, deliveryID, now)
		if errors.Is(err, model.ErrNotActionable) {
			return fmt.Errorf("%w: delivery %d is being sent now", model.ErrNotActionable, deliveryID)
		}
		if err != nil {
			return err
		}
		out = d
		return tx.InsertAudit(ctx, w.audit(model.AuditWebhookResend, endpointID, string(d.State), "queued delivery "+strconv.FormatInt(deliveryID, 10),
			strconv.FormatInt(endpointID, 10), strconv.FormatInt(deliveryID, 10), uuid.NewString()))
	})
	return out, err
}

// ResendMany queues again at most 1,000 of an endpoint's deliveries in
// state made since, and says how many. The same idempotency key again
// queues nothing more and says how many the first request queued.
func (w *Webhooks) ResendMany(ctx context.Context, endpointID int64, state model.DeliveryState, since time.Time, key string) (int, error) {
	if w.keys == nil {
		return 0, model.ErrWebhooksOff
	}
	switch state {
	case model.DeliveryFailed, model.DeliveryDelivered, model.DeliveryPending:
	default:
		return 0, fmt.Errorf("%w: state must be FAILED, DELIVERED or PENDING", model.ErrInvalidRequest)
	}
	if w.act != nil {
		key = w.act.Key
	}
	if key == "" {
		key = uuid.NewString()
	}
	a := w.audit(model.AuditWebhookResend, endpointID, string(state)+" since "+since.UTC().Format(time.RFC3339), "",
		strconv.FormatInt(endpointID, 10), "many", key)
	now := w.now().UTC()
	n := 0
	err := w.store.UpdateWebhooks(ctx, func(ctx context.Context, tx *dao.WebhookTx) error {
		if err := enabled(tx.EndpointForUpdate(ctx, endpointID)); err != nil {
			return err
		}
		var err error
		if n, err = tx.Requeue(ctx, endpointID, state, since, now, maxResend); err != nil {
			return err
		}
		a.After = fmt.Sprintf("queued %d", n)
		return tx.InsertAudit(ctx, a)
	})
	// The same key again — the endpoint disabled since, too — is its first
	// request's answer.
	if errors.Is(err, model.ErrAlreadyDone) || errors.Is(err, model.ErrNotActionable) {
		first, rerr := w.store.AuditByKey(ctx, a.Key)
		switch {
		case rerr == nil:
			var was int
			fmt.Sscanf(first.After, "queued %d", &was)
			return was, model.ErrAlreadyDone
		case errors.Is(err, model.ErrAlreadyDone):
			return 0, rerr
		}
	}
	return n, err
}

// Test queues a webhook.test delivery to one endpoint, whatever it
// subscribes to: no outbox event, its data naming the endpoint.
func (w *Webhooks) Test(ctx context.Context, endpointID int64) (model.WebhookDelivery, error) {
	e, err := w.Endpoint(ctx, endpointID)
	if err := enabled(e, err); err != nil {
		return model.WebhookDelivery{}, err
	}
	now := w.now().UTC().Truncate(time.Millisecond)
	id, err := uuid.NewV7()
	if err != nil {
		return model.WebhookDelivery{}, err
	}
	body, err := webhook.TestBody(e.ID, e.URL, now)
	if err != nil {
		return model.WebhookDelivery{}, err
	}
	d := model.WebhookDelivery{EndpointID: e.ID, EventID: id.String(), EventType: string(model.EventWebhookTest), Body: body,
		State: model.DeliveryPending, NextAttemptAt: now, CreatedAt: now}
	d.ID, err = w.store.InsertDelivery(ctx, d)
	return d, err
}

// enabled passes on err, or refuses a disabled endpoint as
// model.ErrNotActionable: nothing is queued for one (no deliverer claims
// it, and enabled again it gets only what is committed after).
func enabled(e model.WebhookEndpoint, err error) error {
	if err == nil && !e.Enabled {
		return fmt.Errorf("%w: endpoint %d is disabled: enable it first", model.ErrNotActionable, e.ID)
	}
	return err
}

// audit is an admin-API webhook action on endpoint id, its key derived
// from parts.
func (w *Webhooks) audit(action model.AuditAction, id int64, before, after string, parts ...string) model.Audit {
	a := model.Audit{Key: apiKey(action, parts...), Operator: model.OperatorAdminAPI, Action: action,
		TargetKind: model.TargetWebhook, TargetID: strconv.FormatInt(id, 10), Before: before, After: after}
	if w.act != nil {
		a.Key, a.Operator, a.Note = w.act.Key, w.act.Operator, w.act.Note
	}
	return a
}

// summary is an endpoint as an audit row shows it.
func summary(e model.WebhookEndpoint) string {
	state := "enabled"
	if !e.Enabled {
		state = "disabled"
	}
	return fmt.Sprintf("%s %s [%s]", state, e.URL, strings.Join(e.EventTypes, ","))
}

// apply checks in and writes it onto e.
func (w *Webhooks) apply(ctx context.Context, e *model.WebhookEndpoint, in EndpointInput) error {
	if in.URL != nil {
		u, err := w.CheckURL(ctx, *in.URL)
		if err != nil {
			return err
		}
		e.URL = u
	}
	if in.EventTypes != nil {
		types, err := checkEventTypes(*in.EventTypes)
		if err != nil {
			return err
		}
		e.EventTypes = types
	}
	if in.Description != nil {
		if len(*in.Description) > 500 {
			return fmt.Errorf("%w: description is longer than 500 bytes", model.ErrInvalidRequest)
		}
		e.Description = *in.Description
	}
	if in.Enabled != nil {
		e.Enabled = *in.Enabled
	}
	return nil
}

func checkEventTypes(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: event_types is empty: name event types or [\"*\"]", model.ErrInvalidRequest)
	}
	var out []string
	for _, t := range in {
		known := t == model.WebhookAllEvents || slices.Contains(model.EventTypes, model.EventType(t))
		if !known {
			return nil, fmt.Errorf("%w: unknown event type %q", model.ErrInvalidRequest, model.Clip(t))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if slices.Contains(out, model.WebhookAllEvents) {
		out = []string{model.WebhookAllEvents}
	}
	return out, nil
}

// Policy is the address policy the endpoints' URLs are held to, when
// registered and at every dial.
func (w *Webhooks) Policy() netguard.Policy {
	if w.AllowPrivate {
		return netguard.AnyAddress
	}
	return netguard.PublicAnyPort
}

// CheckURL refuses (model.ErrURLRefused, saying why) an endpoint URL that
// is not https:// (unless AllowPrivate: http:// too), has no host, carries
// credentials, or names a host that resolves to an address the policy
// would not dial; it answers the URL as it will be used.
func (w *Webhooks) CheckURL(ctx context.Context, raw string) (string, error) {
	refuse := func(why string) (string, error) { return "", fmt.Errorf("%w: %s", model.ErrURLRefused, why) }
	if len(raw) > 2048 {
		return refuse("longer than 2048 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return refuse("not a URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && w.AllowPrivate:
	case u.Scheme == "http":
		return refuse("http:// is not allowed: use https:// (WEBHOOK_ALLOW_PRIVATE=true allows http:// in development)")
	default:
		return refuse("the scheme must be https://")
	}
	if u.Hostname() == "" {
		return refuse("no host")
	}
	if u.User != nil {
		return refuse("credentials in the URL are not allowed")
	}
	if u.Fragment != "" {
		return refuse("a fragment is not allowed")
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return refuse("bad port")
		}
		port = n
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := netguard.CheckHost(rctx, w.Policy(), u.Hostname(), port); err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			return refuse(fmt.Sprintf("host %s does not resolve", model.Clip(u.Hostname())))
		}
		if errors.Is(err, netguard.ErrRefused) {
			return refuse(fmt.Sprintf("%v (only public addresses; WEBHOOK_ALLOW_PRIVATE=true allows loopback and private ones in development)", err))
		}
		return refuse(err.Error())
	}
	return u.String(), nil
}
