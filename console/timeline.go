package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
	"paynotify/service"
)

type searchData struct {
	page
	Q        string
	MemberID int64
	Orders   []model.Order
	Next     int64
	NotFound bool
}

// search finds what the box names and goes to its timeline; a member id
// lists the member's orders.
func (c *Console) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d := searchData{page: c.page(r, "Search"), Q: q}
	if q == "" {
		c.render(w, r, http.StatusOK, "search", d)
		return
	}
	if before, err := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64); err == nil && before > 0 {
		// The next page of a member's orders.
		id, _ := strconv.ParseInt(q, 10, 64)
		orders, err := c.d.Lookup.MemberOrders(r.Context(), id, before)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		d.MemberID, d.Orders = id, orders
		d.Next = nextBefore(orders)
		c.render(w, r, http.StatusOK, "search", d)
		return
	}
	found, err := c.d.Lookup.Search(r.Context(), q)
	switch {
	case errors.Is(err, model.ErrOrderNotFound):
		d.NotFound = true
		c.render(w, r, http.StatusNotFound, "search", d)
		return
	case err != nil:
		c.fail(w, r, err)
		return
	case found.OrderSN != "":
		http.Redirect(w, r, orderLink(found.OrderSN), http.StatusSeeOther)
		return
	case found.Payment != nil:
		http.Redirect(w, r, payLink(found.Payment.Provider, found.Payment.TradeNo), http.StatusSeeOther)
		return
	}
	d.MemberID, d.Orders = found.MemberID, found.Orders
	d.Next = nextBefore(found.Orders)
	c.render(w, r, http.StatusOK, "search", d)
}

func nextBefore(orders []model.Order) int64 {
	if len(orders) < service.MemberPage {
		return 0
	}
	return orders[len(orders)-1].ID
}

type timelineData struct {
	page
	service.Timeline
	Story []moment
	// CanRefund: the order has money an operator may refund.
	CanRefund bool
	// Deliveries are the webhook deliveries of the order's events (nil
	// when webhooks are off).
	Deliveries []service.DeliveryView
}

// moment is one line of an order's story.
type moment struct {
	At    time.Time
	Kind  string // order, attempt, payment, refund, event, audit
	Title string
	// Detail is a sentence whose ids link to their timeline.
	Detail []piece
	// State is shown as a badge; Now says it is where the thing is now,
	// not what it was at At.
	State string
	Now   bool
}

// timeline shows everything recorded about an order, in time order.
func (c *Console) timeline(w http.ResponseWriter, r *http.Request) {
	t, err := c.d.Lookup.Timeline(r.Context(), r.PathValue("sn"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	var deliveries []service.DeliveryView
	if c.d.Webhooks != nil && c.d.Webhooks.On() {
		if deliveries, err = c.d.Webhooks.OrderDeliveries(r.Context(), t.Order.ID); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	c.render(w, r, http.StatusOK, "order", timelineData{page: c.page(r, "Order "+t.Order.OrderSN), Timeline: t,
		Story: story(t, c.page(r, "").loc), CanRefund: c.d.Refunds != nil && t.Refundable.IsPositive(), Deliveries: deliveries})
}

// story merges what each table recorded into one list, oldest first.
// Times inside the words are in loc, the operator's zone.
func story(t service.Timeline, loc *time.Location) []moment {
	o := t.Order
	placed := "pays " + money(o.PayAmount)
	if len(t.Items) > 0 {
		placed += fmt.Sprintf(" for %d item(s) worth %s", len(t.Items), money(o.TotalAmount))
	}
	if o.CouponID != nil {
		placed += fmt.Sprintf("; coupon #%d −%s", *o.CouponID, money(o.CouponAmount))
	}
	if o.Integration > 0 {
		placed += fmt.Sprintf("; %d points −%s", o.Integration, money(o.IntegrationAmount))
	}
	s := []moment{{At: o.CreateTime, Kind: "order", Title: "Order placed", Detail: say(placed+"; member ", memberRef(o.MemberID))}}
	for _, a := range t.Attempts {
		s = append(s, moment{At: a.CreateTime, Kind: "attempt", Title: fmt.Sprintf("Pay attempt #%d opened", a.AttemptNo),
			Detail: say(string(a.Method)+", out_trade_no ", searchRef(a.OutTradeNo), ", "+money(a.Amount))})
		if a.State != model.AttemptOpen {
			s = append(s, moment{At: a.UpdateTime, Kind: "attempt", Title: fmt.Sprintf("Pay attempt #%d %s", a.AttemptNo, strings.ToLower(string(a.State))),
				Detail: say("out_trade_no ", searchRef(a.OutTradeNo)), State: string(a.State)})
		}
	}
	for _, p := range t.Payments {
		detail := say(p.Provider.Name()+" trade_no ", tradeRef(p.Provider, p.TradeNo), ", "+money(p.Amount))
		if p.Reason != model.RefundNone {
			detail = append(detail, say(", why: "+label(p.Reason))...)
		}
		if p.PaidAt != nil {
			// No-break spaces: a date never wraps inside itself.
			detail = append(detail, say(", paid at "+p.Provider.Name()+" "+p.PaidAt.In(loc).Format("2006-01-02\u00a015:04:05\u00a0MST"))...)
		}
		// The title says what was decided when it came; the badge, where
		// the payment is now ("now refunded").
		s = append(s, moment{At: p.CreateTime, Kind: "payment", Title: "Payment recorded, decided: " + label(model.OutcomeOf(p.State, p.Reason)),
			Detail: detail, State: string(p.State), Now: true})
	}
	s = append(s, refundStory(t.Refunds, t.RefundChanges, t.Audit)...)
	for _, e := range t.Events {
		state := string(e.State)
		detail := eventDetail(e.Event)
		if e.State != model.OutboxSent && e.LastError != "" {
			detail = append(detail, say(fmt.Sprintf(" — %d attempts, last error: %s", e.Attempts, e.LastError))...)
		}
		s = append(s, moment{At: e.Event.OccurredAt, Kind: "event", Title: "Event " + string(e.Event.Type), Detail: detail, State: state})
	}
	for _, it := range t.Recon {
		detail := it.Detail
		if it.BillAmount != nil || it.LedgerAmount != nil {
			detail += fmt.Sprintf(" (bill %s, ledger %s)", optMoney(it.BillAmount), optMoney(it.LedgerAmount))
		}
		state := "OPEN"
		if it.ResolvedAt != nil {
			state = "RESOLVED"
		}
		s = append(s, moment{At: it.CreateTime, Kind: "recon", Title: fmt.Sprintf("Reconciliation of %s: %s", it.BillDate, it.Outcome),
			Detail: say(detail), State: state})
	}
	for _, a := range t.Audit {
		detail := words(a.Before) + " → " + words(a.After)
		if a.Note != "" {
			detail += ": " + a.Note
		}
		s = append(s, moment{At: a.CreateTime, Kind: "audit", Title: fmt.Sprintf("%s by %s", a.Action, a.Operator), Detail: say(detail)})
	}
	// Within one instant, cause before effect: a payment before its event.
	rank := map[string]int{"order": 0, "attempt": 1, "payment": 2, "refund": 3, "event": 4, "recon": 5, "audit": 6}
	sort.SliceStable(s, func(i, j int) bool {
		if !s[i].At.Equal(s[j].At) {
			return s[i].At.Before(s[j].At)
		}
		return rank[s[i].Kind] < rank[s[j].Kind]
	})
	return s
}

// optMoney shows an amount that may be missing.
func optMoney(d *decimal.Decimal) string {
	if d == nil {
		return "—"
	}
	return money(*d)
}

// eventDetail summarises an event's data in a few words.
func eventDetail(ev model.Event) []piece {
	var d map[string]any
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return nil
	}
	var out []piece
	for _, k := range []string{"trade_no", "out_request_no", "amount", "state", "reason", "out_trade_no"} {
		v, ok := d[k]
		if !ok || v == "" {
			continue
		}
		sep := ""
		if len(out) > 0 {
			sep = ", "
		}
		val := any(fmt.Sprint(v))
		switch k {
		case "trade_no":
			val = searchRef(fmt.Sprint(v)) // the audit row names no provider: the search finds it
		case "out_request_no", "out_trade_no":
			val = searchRef(fmt.Sprint(v))
		}
		out = append(out, say(sep+k+" ", val)...)
	}
	return out
}

type paymentData struct {
	page
	Payment service.PaymentRow
	Audit   []model.Audit
}

// payment shows a payment that has no order to show it with.
func (c *Console) payment(w http.ResponseWriter, r *http.Request) {
	p, audit, err := c.d.Lookup.Payment(r.Context(), paymentKey(r), r.PathValue("trade_no"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "payment", paymentData{page: c.page(r, "Payment "+p.TradeNo), Payment: p, Audit: audit})
}
