package console

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"paynotify/model"
	"paynotify/service"
)

// queueData is one page of a queue in one state: the refunds, the
// payments and the outbox pages.
type queueData[S ~string, R any] struct {
	page
	State  S
	States []S
	Rows   []R
	Count  model.QueueCount
	// Page (from 0) and HasNext page the refund and payment queues.
	Page    int
	HasNext bool
	// After is the sequence number the outbox page starts after, and Next
	// the next page's (0: none).
	After, Next int64
}

// serveQueue serves a queue page in the state ?state= names (states[0]
// when it names none; then, if firstWithRows, the first tab that has
// rows, so the page never opens on an empty tab beside a busy one): read
// fills in the rows, the template tmpl shows them under title and the
// state's label.
func serveQueue[S ~string, R any](c *Console, w http.ResponseWriter, r *http.Request, tmpl, title, noun string, firstWithRows bool, states []S,
	read func(ctx context.Context, state S, d *queueData[S, R]) error) {
	state, ok := queueState(r, states)
	if !ok {
		c.status(w, r, http.StatusBadRequest, "Unknown "+noun+" state.")
		return
	}
	d := queueData[S, R]{State: state, States: states}
	err := read(r.Context(), state, &d)
	for _, next := range states[1:] {
		if !firstWithRows || err != nil || d.Count.Count > 0 || r.URL.Query().Get("state") != "" {
			break
		}
		d = queueData[S, R]{State: next, States: states}
		err = read(r.Context(), next, &d)
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d.page = c.page(r, title+label(d.State))
	c.render(w, r, http.StatusOK, tmpl, d)
}

// numbered reads a queue paged by ?page=, through list.
func numbered[S ~string, R any](r *http.Request, list func(context.Context, S, int) ([]R, model.QueueCount, error)) func(context.Context, S, *queueData[S, R]) error {
	return func(ctx context.Context, state S, d *queueData[S, R]) error {
		d.Page = pageParam(r, "page")
		rows, count, err := list(ctx, state, d.Page)
		d.Rows, d.Count, d.HasNext = rows, count, int64((d.Page+1)*service.QueuePage) < count.Count
		return err
	}
}

// refundQueue lists refunds in one state: failed ones (to retry or
// resolve) or those still in progress.
func (c *Console) refundQueue(w http.ResponseWriter, r *http.Request) {
	serveQueue(c, w, r, "refunds", "Refunds ", "refund", true,
		[]model.RefundState{model.RefundFailed, model.RefundRefunding, model.RefundRefunded},
		numbered(r, c.d.Queues.RefundQueue))
}

// outboxQueue lists outbox rows not yet delivered (or delivered).
func (c *Console) outboxQueue(w http.ResponseWriter, r *http.Request) {
	serveQueue(c, w, r, "outbox", "Outbox ", "outbox", true,
		[]model.OutboxState{model.OutboxFailed, model.OutboxPending, model.OutboxSent},
		func(ctx context.Context, state model.OutboxState, d *queueData[model.OutboxState, service.EventRow]) error {
			d.After, _ = strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
			rows, count, err := c.d.Queues.OutboxQueue(ctx, state, max(d.After, 0))
			d.Rows, d.Count = rows, count
			if len(rows) == service.QueuePage {
				d.Next = rows[len(rows)-1].Seq
			}
			return err
		})
}

type auditData struct {
	page
	// Filter is the operator the log is filtered by; Sessions, whether it
	// shows sign-ins and sign-outs.
	Filter   string
	Sessions bool
	Rows     []model.Audit
	Next     int64
}

// auditLog lists what operators did, newest first.
func (c *Console) auditLog(w http.ResponseWriter, r *http.Request) {
	operator := r.URL.Query().Get("operator")
	before, _ := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	// Sign-ins and sign-outs would bury the actions: shown when asked.
	sessions := r.URL.Query().Get("sessions") == "1"
	rows, err := c.d.Lookup.AuditLog(r.Context(), operator, max(before, 0), sessions)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := auditData{page: c.page(r, "Audit log"), Filter: operator, Sessions: sessions, Rows: rows}
	if len(rows) == service.QueuePage {
		d.Next = rows[len(rows)-1].ID
	}
	c.render(w, r, http.StatusOK, "audit", d)
}

// queueState reads which state a queue page lists: one of states, the
// first when none is asked for; false for anything else.
func queueState[S ~string](r *http.Request, states []S) (S, bool) {
	s := S(strings.ToUpper(r.URL.Query().Get("state")))
	if s == "" {
		return states[0], true
	}
	return s, slices.Contains(states, s)
}

// pageParam reads a page number (from 0), capped so an offset stays cheap.
func pageParam(r *http.Request, name string) int {
	n, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil || n < 0 {
		return 0
	}
	return min(n, 1000)
}
