package console

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"paynotify/model"
	"paynotify/service"
)

type refundQueueData struct {
	page
	State   model.RefundState
	States  []model.RefundState
	Rows    []service.RefundRow
	Count   model.QueueCount
	Page    int
	HasNext bool
}

// refundQueue lists refunds in one state: failed ones (to retry or
// resolve) or those still in progress.
func (c *Console) refundQueue(w http.ResponseWriter, r *http.Request) {
	states := []model.RefundState{model.RefundFailed, model.RefundRefunding, model.RefundRefunded}
	state, ok := queueState(r, states)
	if !ok {
		c.status(w, r, http.StatusBadRequest, "Unknown refund state.")
		return
	}
	pageNo := pageParam(r, "page")
	rows, count, err := c.d.Queues.RefundQueue(r.Context(), state, pageNo)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "refunds", refundQueueData{page: c.page(r, "Refunds "+string(state)), State: state,
		States: states, Rows: rows, Count: count, Page: pageNo, HasNext: int64((pageNo+1)*service.QueuePage) < count.Count})
}

type outboxQueueData struct {
	page
	State  model.OutboxState
	States []model.OutboxState
	Rows   []service.EventRow
	Count  model.QueueCount
	After  int64
	Next   int64
}

// outboxQueue lists outbox rows not yet delivered (or delivered).
func (c *Console) outboxQueue(w http.ResponseWriter, r *http.Request) {
	states := []model.OutboxState{model.OutboxFailed, model.OutboxPending, model.OutboxSent}
	state, ok := queueState(r, states)
	if !ok {
		c.status(w, r, http.StatusBadRequest, "Unknown outbox state.")
		return
	}
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	rows, count, err := c.d.Queues.OutboxQueue(r.Context(), state, max(after, 0))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := outboxQueueData{page: c.page(r, "Outbox "+string(state)), State: state,
		States: states, Rows: rows, Count: count,
		After: after}
	if len(rows) == service.QueuePage {
		d.Next = rows[len(rows)-1].Seq
	}
	c.render(w, r, http.StatusOK, "outbox", d)
}

type auditData struct {
	page
	// Filter is the operator the log is filtered by.
	Filter string
	Rows   []model.Audit
	Next   int64
}

// auditLog lists what operators did, newest first.
func (c *Console) auditLog(w http.ResponseWriter, r *http.Request) {
	operator := r.URL.Query().Get("operator")
	before, _ := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	rows, err := c.d.Lookup.AuditLog(r.Context(), operator, max(before, 0))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := auditData{page: c.page(r, "Audit log"), Filter: operator, Rows: rows}
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
