package console

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"paynotify/model"
	"paynotify/service"
)

// webhookRoutes registers the webhook pages: the endpoints, one
// endpoint's deliveries, one delivery's attempts, and the actions the
// admin API has (each audited as the operator's).
func (c *Console) webhookRoutes() {
	if c.d.Webhooks == nil {
		return
	}
	m := c.mux
	m.HandleFunc("GET "+Prefix+"/webhooks", c.signedIn(c.webhookList))
	m.HandleFunc("GET "+Prefix+"/webhooks/{id}", c.signedIn(c.webhookEndpoint))
	m.HandleFunc("GET "+Prefix+"/webhooks/{id}/deliveries/{delivery}", c.signedIn(c.webhookDelivery))
	m.HandleFunc("GET "+Prefix+"/webhooks/{id}/delete", c.signedIn(c.confirmWebhookDelete))
	m.HandleFunc("POST "+Prefix+"/webhooks", c.changing(c.webhookCreate))
	m.HandleFunc("POST "+Prefix+"/webhooks/{id}/edit", c.changing(c.webhookEdit))
	m.HandleFunc("POST "+Prefix+"/webhooks/{id}/enabled", c.changing(c.webhookEnabled))
	m.HandleFunc("POST "+Prefix+"/webhooks/{id}/rotate", c.changing(c.webhookRotate))
	m.HandleFunc("POST "+Prefix+"/webhooks/{id}/delete", c.changing(c.webhookDelete))
	m.HandleFunc("POST "+Prefix+"/webhooks/{id}/test", c.changing(c.webhookTest))
	m.HandleFunc("POST "+Prefix+"/webhooks/{id}/resend", c.changing(c.webhookResendMany))
	m.HandleFunc("POST "+Prefix+"/webhooks/{id}/deliveries/{delivery}/resend", c.changing(c.webhookResend))
}

// endpointRow is an endpoint as the list shows it.
type endpointRow struct {
	model.WebhookEndpoint
	Pending, Failed int64
}

type webhooksData struct {
	page
	On        bool
	Endpoints []endpointRow
	Types     []model.EventType
}

// webhookList shows every endpoint with what waits for it, and the form
// that registers one.
func (c *Console) webhookList(w http.ResponseWriter, r *http.Request) {
	d := webhooksData{page: c.page(r, "Webhooks"), On: c.d.Webhooks.On(), Types: model.EventTypes}
	if d.On {
		es, err := c.d.Webhooks.Endpoints(r.Context())
		if err != nil {
			c.fail(w, r, err)
			return
		}
		stats, err := c.d.Webhooks.Stats(r.Context())
		if err != nil {
			c.fail(w, r, err)
			return
		}
		for _, e := range es {
			row := endpointRow{WebhookEndpoint: e}
			for _, s := range stats {
				if s.EndpointID == e.ID {
					switch s.State {
					case model.DeliveryPending:
						row.Pending = s.Count
					case model.DeliveryFailed:
						row.Failed = s.Count
					}
				}
			}
			d.Endpoints = append(d.Endpoints, row)
		}
	}
	c.render(w, r, http.StatusOK, "webhooks", d)
}

type webhookData struct {
	page
	Endpoint   model.WebhookEndpoint
	Deliveries []service.DeliveryView
	State      string
	Since      string
	States     []model.DeliveryState
	Types      []model.EventType
}

// webhookEndpoint shows one endpoint and its deliveries, newest first,
// filtered by state and since (a date or an RFC 3339 time).
func (c *Console) webhookEndpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := c.pathID(w, r, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	e, err := c.d.Webhooks.Endpoint(r.Context(), id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	state := model.DeliveryState(q.Get("state"))
	switch state {
	case "", model.DeliveryPending, model.DeliveryDelivered, model.DeliveryFailed:
	default:
		c.fail(w, r, errors.Join(model.ErrInvalidRequest, errors.New("state must be PENDING, DELIVERED or FAILED")))
		return
	}
	since, err := parseSince(q.Get("since"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ds, err := c.d.Webhooks.Deliveries(r.Context(), id, state, since, 100)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := webhookData{page: c.page(r, "Webhook endpoint "+strconv.FormatInt(id, 10)),
		Endpoint: e, Deliveries: ds, State: string(state), Since: q.Get("since"),
		States: []model.DeliveryState{model.DeliveryPending, model.DeliveryDelivered, model.DeliveryFailed}, Types: model.EventTypes}
	if n, err := strconv.Atoi(q.Get("n")); err == nil && q.Get("done") == "webhook-resent-many" {
		d.Flash = strconv.Itoa(n) + " failed deliveries queued again: the deliverer sends them now, under their own webhook-ids."
	}
	c.render(w, r, http.StatusOK, "webhook", d)
}

// parseSince reads a since filter: empty, a date (its midnight UTC) or
// an RFC 3339 time.
func parseSince(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, errors.Join(model.ErrInvalidRequest, errors.New("since must be a date (2026-12-01) or an RFC 3339 time"))
	}
	return t, nil
}

type deliveryData struct {
	page
	Endpoint model.WebhookEndpoint
	Delivery service.DeliveryView
}

// webhookDelivery shows one delivery's attempts.
func (c *Console) webhookDelivery(w http.ResponseWriter, r *http.Request) {
	id, ok := c.pathID(w, r, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	did, ok := c.pathID(w, r, "delivery", model.ErrDeliveryNotFound)
	if !ok {
		return
	}
	e, err := c.d.Webhooks.Endpoint(r.Context(), id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	dv, err := c.d.Webhooks.Delivery(r.Context(), id, did)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "delivery", deliveryData{page: c.page(r, "Delivery "+strconv.FormatInt(did, 10)), Endpoint: e, Delivery: dv})
}

// pathID reads a positive numeric path value; anything else fails the
// request as notFound.
func (c *Console) pathID(w http.ResponseWriter, r *http.Request, name string, notFound error) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || id <= 0 {
		c.fail(w, r, notFound)
		return 0, false
	}
	return id, true
}

type secretData struct {
	page
	Endpoint model.WebhookEndpoint
	Secret   string
	Rotated  bool
}

// showSecret shows a signing secret, the one time it is shown.
func (c *Console) showSecret(w http.ResponseWriter, r *http.Request, e model.WebhookEndpoint, secret string, rotated bool) {
	c.render(w, r, http.StatusOK, "secret", secretData{page: c.page(r, "Signing secret of endpoint "+strconv.FormatInt(e.ID, 10)),
		Endpoint: e, Secret: secret, Rotated: rotated})
}

// eventTypes is the form's event types: the ticked boxes, or every type.
func eventTypes(r *http.Request) []string {
	if r.PostFormValue("all") != "" {
		return []string{"*"}
	}
	return r.PostForm["event_types"]
}

func (c *Console) webhookCreate(w http.ResponseWriter, r *http.Request) {
	url, types, desc := strings.TrimSpace(r.PostFormValue("url")), eventTypes(r), r.PostFormValue("description")
	e, secret, err := c.d.Webhooks.By(act(r)).Create(r.Context(), service.EndpointInput{URL: &url, EventTypes: &types, Description: &desc})
	if err != nil {
		c.done(w, r, err, Prefix+"/webhooks", "")
		return
	}
	c.showSecret(w, r, e, secret, false)
}

func (c *Console) webhookEdit(w http.ResponseWriter, r *http.Request) {
	id, ok := c.pathID(w, r, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	types, desc := eventTypes(r), r.PostFormValue("description")
	_, err := c.d.Webhooks.By(act(r)).Update(r.Context(), id, service.EndpointInput{EventTypes: &types, Description: &desc})
	c.done(w, r, err, webhookLink(id), "webhook-updated")
}

func (c *Console) webhookEnabled(w http.ResponseWriter, r *http.Request) {
	id, ok := c.pathID(w, r, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	on := r.PostFormValue("enabled") == "true"
	_, err := c.d.Webhooks.By(act(r)).Update(r.Context(), id, service.EndpointInput{Enabled: &on})
	flash := "webhook-disabled"
	if on {
		flash = "webhook-enabled"
	}
	c.done(w, r, err, webhookLink(id), flash)
}

func (c *Console) webhookRotate(w http.ResponseWriter, r *http.Request) {
	id, ok := c.pathID(w, r, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	hooks := c.d.Webhooks.By(act(r))
	rotate := hooks.Rotate
	if r.PostFormValue("immediate") == "true" {
		rotate = hooks.RotateImmediately
	}
	e, secret, err := rotate(r.Context(), id)
	if err != nil {
		c.done(w, r, err, webhookLink(id), "")
		return
	}
	c.showSecret(w, r, e, secret, true)
}

// confirmWebhookDelete asks before an endpoint and its log go.
func (c *Console) confirmWebhookDelete(w http.ResponseWriter, r *http.Request) {
	id, ok := c.pathID(w, r, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	e, err := c.d.Webhooks.Endpoint(r.Context(), id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.confirm(w, r, confirmData{
		Heading: "Delete webhook endpoint " + strconv.FormatInt(id, 10),
		Facts:   [][2]string{{"URL", e.URL}, {"events", strings.Join(e.EventTypes, ", ")}, {"description", e.Description}},
		Warning: "This deletes the endpoint, its deliveries and their attempts: nothing more is sent to it, and its log is gone.",
		Action:  webhookLink(id) + "/delete", Fields: map[string]string{"confirm": "yes"}, Button: "Delete the endpoint", Cancel: webhookLink(id),
	})
}

func (c *Console) webhookDelete(w http.ResponseWriter, r *http.Request) {
	id, ok := c.pathID(w, r, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	err := c.d.Webhooks.By(act(r)).Delete(r.Context(), id)
	c.done(w, r, err, Prefix+"/webhooks", "webhook-deleted")
}

func (c *Console) webhookTest(w http.ResponseWriter, r *http.Request) {
	id, ok := c.pathID(w, r, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	_, err := c.d.Webhooks.By(act(r)).Test(r.Context(), id)
	c.done(w, r, err, webhookLink(id), "webhook-tested")
}

func (c *Console) webhookResend(w http.ResponseWriter, r *http.Request) {
	id, ok := c.pathID(w, r, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	did, ok := c.pathID(w, r, "delivery", model.ErrDeliveryNotFound)
	if !ok {
		return
	}
	_, err := c.d.Webhooks.By(act(r)).Resend(r.Context(), id, did)
	c.done(w, r, err, back(r, webhookLink(id)), "webhook-resent")
}

// webhookResendMany queues again an endpoint's FAILED deliveries made
// since a time, at most 1,000, and says how many.
func (c *Console) webhookResendMany(w http.ResponseWriter, r *http.Request) {
	id, ok := c.pathID(w, r, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	since, err := parseSince(r.PostFormValue("since"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	n, err := c.d.Webhooks.By(act(r)).ResendMany(r.Context(), id, model.DeliveryFailed, since, "")
	if errors.Is(err, model.ErrAlreadyDone) {
		c.done(w, r, err, webhookLink(id), "")
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, webhookLink(id)+"?done=webhook-resent-many&n="+strconv.Itoa(n), http.StatusSeeOther)
}

// webhookLink is an endpoint's page.
func webhookLink(id int64) string { return Prefix + "/webhooks/" + strconv.FormatInt(id, 10) }
