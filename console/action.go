package console

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"paynotify/model"
	"paynotify/service"
)

// actionRoutes registers the forms that change something. Each posts the
// session's anti-forgery token and the one-time key of the page that
// showed it; whatever moves money is posted from a confirmation page.
func (c *Console) actionRoutes() {
	m := c.mux
	m.HandleFunc("GET "+Prefix+"/queues/payments", c.signedIn(c.paymentQueue))
	m.HandleFunc("POST "+Prefix+"/outbox/{seq}/requeue", c.changing(c.requeue))
	m.HandleFunc("GET "+Prefix+"/queues/reconciliation", c.signedIn(c.reconQueue))
	if len(c.d.BillReconcilers) > 0 {
		m.HandleFunc("POST "+Prefix+"/reconciliation/items/{id}/resolve", c.changing(c.resolveItem))
		m.HandleFunc("POST "+Prefix+"/reconciliations/{provider}/{date}/run", c.changing(c.runDay))
	}
	if c.d.Refunds == nil {
		return
	}
	m.HandleFunc("GET "+Prefix+"/refunds/{no}/retry", c.signedIn(c.confirmRetry))
	m.HandleFunc("POST "+Prefix+"/refunds/{no}/retry", c.changing(c.retry))
	m.HandleFunc("POST "+Prefix+"/refunds/{no}/resolve", c.changing(c.resolve))
	m.HandleFunc("GET "+Prefix+"/payments/{trade_no}/refund", c.signedIn(c.confirmPaymentRefund))
	m.HandleFunc("POST "+Prefix+"/payments/{trade_no}/refund", c.changing(c.paymentRefund))
	m.HandleFunc("GET "+Prefix+"/payments/{provider}/{trade_no}/refund", c.signedIn(c.confirmPaymentRefund))
	m.HandleFunc("POST "+Prefix+"/payments/{provider}/{trade_no}/refund", c.changing(c.paymentRefund))
	m.HandleFunc("GET "+Prefix+"/orders/{sn}/refund", c.signedIn(c.orderRefundForm))
	m.HandleFunc("POST "+Prefix+"/orders/{sn}/refund", c.changing(c.orderRefund))
}

// act is the operator's action from a posted form.
func act(r *http.Request) model.Act {
	return model.Act{Operator: session(r).Operator, Key: r.PostFormValue("key"), Note: strings.TrimSpace(r.PostFormValue("note"))}
}

// done answers an action: back to where the operator was, with what
// happened. A form posted twice did its work the first time: say so.
func (c *Console) done(w http.ResponseWriter, r *http.Request, err error, back, flash string) {
	if errors.Is(err, model.ErrAlreadyDone) {
		flash, err = "already", nil
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	sep := "?"
	if strings.Contains(back, "?") {
		sep = "&"
	}
	http.Redirect(w, r, back+sep+"done="+flash, http.StatusSeeOther)
}

// back is where the form says to return (inside the console), else def.
func back(r *http.Request, def string) string {
	if next := r.PostFormValue("next"); next != "" {
		return safeNext(dropDone(next))
	}
	return def
}

// dropDone removes an earlier done= from a return address.
func dropDone(u string) string {
	path, query, ok := strings.Cut(u, "?")
	if !ok {
		return u
	}
	var keep []string
	for _, kv := range strings.Split(query, "&") {
		if !strings.HasPrefix(kv, "done=") {
			keep = append(keep, kv)
		}
	}
	if len(keep) == 0 {
		return path
	}
	return path + "?" + strings.Join(keep, "&")
}

type confirmData struct {
	page
	Heading string
	// Facts are shown as a list of label → value.
	Facts   [][2]string
	Warning string
	Action  string
	Fields  map[string]string
	Button  string
	Cancel  string
}

func (c *Console) confirm(w http.ResponseWriter, r *http.Request, d confirmData) {
	d.page = c.page(r, d.Heading)
	c.render(w, r, http.StatusOK, "confirm", d)
}

// confirmRetry asks before a failed refund goes to Alipay again.
func (c *Console) confirmRetry(w http.ResponseWriter, r *http.Request) {
	f, err := c.d.Lookup.Refund(r.Context(), r.PathValue("no"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if f.State != model.RefundFailed || f.ResolvedTime != nil {
		c.fail(w, r, errors.Join(model.ErrNotActionable, errors.New("refund "+f.OutRequestNo+" is "+string(f.State)+", not an unresolved failure")))
		return
	}
	c.confirm(w, r, confirmData{
		Heading: "Retry refund " + f.OutRequestNo,
		Facts: [][2]string{{"order", f.OrderSN}, {"provider", f.Provider.Name()}, {"trade_no", f.TradeNo}, {"amount", money(f.Amount)}, {"kind", string(f.Kind)},
			{f.Provider.Name() + " said", f.LastError}},
		Warning: "This asks " + f.Provider.Name() + " again to pay " + money(f.Amount) + " back to the buyer, under the same out_request_no (" +
			f.Provider.Name() + " refunds it at most once).",
		Action: Prefix + "/refunds/" + pathEscape(f.OutRequestNo) + "/retry",
		Button: "Retry the refund of " + money(f.Amount), Cancel: orderLink(f.OrderSN),
	})
}

func (c *Console) retry(w http.ResponseWriter, r *http.Request) {
	_, err := c.d.Refunds.Retry(r.Context(), act(r), r.PathValue("no"))
	c.done(w, r, err, c.refundBack(r), "retried")
}

func (c *Console) resolve(w http.ResponseWriter, r *http.Request) {
	_, err := c.d.Refunds.Resolve(r.Context(), act(r), r.PathValue("no"))
	c.done(w, r, err, back(r, c.refundBack(r)), "resolved")
}

// refundBack is the timeline of the order of the refund a form names.
func (c *Console) refundBack(r *http.Request) string {
	row, err := c.d.Lookup.Refund(r.Context(), r.PathValue("no"))
	if err != nil || row.OrderSN == "" {
		return Prefix + "/queues/refunds"
	}
	return orderLink(row.OrderSN)
}

// confirmPaymentRefund asks before a payment owed back is refunded now.
func (c *Console) confirmPaymentRefund(w http.ResponseWriter, r *http.Request) {
	p, _, err := c.d.Lookup.Payment(r.Context(), paymentKey(r), r.PathValue("trade_no"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if p.State != model.PaymentRefundPending && p.State != model.PaymentUnmatched {
		c.failAbout(w, r, errors.Join(model.ErrNotActionable, errors.New("payment "+p.TradeNo+" is "+string(p.State)+", not owed back")),
			payLink(p.Provider, p.TradeNo), "the payment")
		return
	}
	why, order := string(p.Reason), p.OrderSN
	if p.State == model.PaymentUnmatched {
		why, order = "no order has its out_trade_no (UNMATCHED)", "none"
	}
	heading, warning, button := "Queue the refund of payment "+p.TradeNo,
		"This queues a refund of "+money(p.Amount)+" to the buyer, in full: the payment is REFUNDING at once, the refund worker "+
			"asks "+p.Provider.Name()+" on its next round, and it is REFUNDED when "+p.Provider.Name()+" confirms.", "Queue refund of "+money(p.Amount)
	if p.State == model.PaymentUnmatched {
		heading, warning, button = "Refund payment "+p.TradeNo,
			"This queues a refund of "+money(p.Amount)+" to the buyer, in full, for money no order of ours has: the refund "+
				"worker asks "+p.Provider.Name()+" on its next round.", "Refund "+money(p.Amount)
	}
	c.confirm(w, r, confirmData{
		Heading: heading,
		Facts: [][2]string{{"order", order}, {"provider", p.Provider.Name()}, {"trade_no", p.TradeNo}, {"out_trade_no", p.OutTradeNo}, {"amount", money(p.Amount)},
			{"why it is owed back", why}},
		Warning: warning,
		Action:  payLink(p.Provider, p.TradeNo) + "/refund", Button: button, Cancel: payLink(p.Provider, p.TradeNo),
	})
}

// paymentRefund refunds a payment owed back now, or an UNMATCHED one
// (through the refund of payments without an order, as the admin API).
func (c *Console) paymentRefund(w http.ResponseWriter, r *http.Request) {
	provider, tradeNo := paymentKey(r), r.PathValue("trade_no")
	p, _, err := c.d.Lookup.Payment(r.Context(), provider, tradeNo)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if p.State == model.PaymentUnmatched {
		_, err = c.d.Refunds.RefundUnmatchedAs(r.Context(), act(r), provider, tradeNo)
	} else {
		_, err = c.d.Refunds.RefundPayment(r.Context(), act(r), provider, tradeNo)
	}
	if err != nil && !errors.Is(err, model.ErrAlreadyDone) {
		c.failAbout(w, r, err, payLink(provider, tradeNo), "the payment")
		return
	}
	c.done(w, r, err, payLink(provider, tradeNo), "refunded")
}

type refundFormData struct {
	page
	Timeline service.Timeline
	Amount   string
	Note     string
	Error    string
}

// orderRefundForm asks how much of an order to refund.
func (c *Console) orderRefundForm(w http.ResponseWriter, r *http.Request) {
	t, err := c.d.Lookup.Timeline(r.Context(), r.PathValue("sn"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.refundForm(w, r, http.StatusOK, t, t.Refundable.StringFixed(2), "", "")
}

func (c *Console) refundForm(w http.ResponseWriter, r *http.Request, status int, t service.Timeline, amount, note, msg string) {
	c.render(w, r, status, "refund", refundFormData{page: c.page(r, "Refund order "+t.Order.OrderSN), Timeline: t, Amount: amount,
		Note: note, Error: msg})
}

// orderRefund refunds part or all of a paid order: the first post shows
// what will happen, the confirmed one does it (the same caps as the admin
// API: never more than paid minus refunded).
func (c *Console) orderRefund(w http.ResponseWriter, r *http.Request) {
	sn := r.PathValue("sn")
	t, err := c.d.Lookup.Timeline(r.Context(), sn)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	// The admin API's one amount rule, as it is typed: " 10" is refused
	// there, so it is here.
	amount, a := r.PostFormValue("amount"), act(r)
	amt, perr := model.ParseAmount(amount)
	switch {
	case perr != nil:
		c.refundForm(w, r, http.StatusUnprocessableEntity, t, amount, a.Note, "The amount must be positive, as digits with at most two decimals and no spaces or leading zeros (such as 10 or 10.50).")
		return
	case a.Note == "":
		c.refundForm(w, r, http.StatusUnprocessableEntity, t, amount, a.Note, "Say why in the note: it is the refund's reason.")
		return
	case utf8.RuneCountInString(a.Note) > model.MaxRefundReason:
		c.refundForm(w, r, http.StatusUnprocessableEntity, t, amount, a.Note, "The note is the refund's reason: at most "+strconv.Itoa(model.MaxRefundReason)+" characters.")
		return
	case amt.GreaterThan(t.Refundable) && r.PostFormValue("confirm") != "yes":
		// A confirmed form goes to the service, which knows a second post
		// of it (nothing left then) from a refund too large.
		c.refundForm(w, r, http.StatusUnprocessableEntity, t, amount, a.Note, "At most "+money(t.Refundable)+" is left to refund.")
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		c.confirm(w, r, confirmData{
			Heading: "Refund " + money(amt) + " of order " + sn,
			Facts: [][2]string{{"order", sn}, {"paid", money(t.Order.PayAmount)}, {"left to refund", money(t.Refundable)},
				{"refund", money(amt)}, {"reason", a.Note}},
			Warning: "This pays " + money(amt) + " back to the buyer through " + appliedBy(t) + ".",
			Action:  orderLink(sn) + "/refund", Fields: map[string]string{"amount": amt.StringFixed(2), "note": a.Note, "confirm": "yes"},
			Button: "Refund " + money(amt), Cancel: orderLink(sn),
		})
		return
	}
	_, err = c.d.Refunds.RequestAs(r.Context(), a, sn, amt.StringFixed(2))
	c.done(w, r, err, orderLink(sn), "refunded")
}

func (c *Console) requeue(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq <= 0 {
		c.fail(w, r, model.ErrEventNotFound)
		return
	}
	err = c.d.Queues.RequeueEvent(r.Context(), act(r), seq)
	c.done(w, r, err, back(r, Prefix+"/queues/outbox"), "requeued")
}

// paymentQueue lists payments owed back (REFUND_PENDING) or on their way
// back, to refund now rather than on the worker's next round.
func (c *Console) paymentQueue(w http.ResponseWriter, r *http.Request) {
	serveQueue(c, w, r, "payments", "Payments owed back · ", "payment", false,
		[]model.PaymentState{model.PaymentRefundPending, model.PaymentUnmatched, model.PaymentRefunding, model.PaymentRefundFailed},
		numbered(r, c.d.Queues.PaymentQueue))
}

// appliedBy names the provider of the payment that paid t's order: the
// one an after-sale refund goes back through.
func appliedBy(t service.Timeline) string {
	for _, p := range t.Payments {
		if p.State == model.PaymentApplied {
			return p.Provider.Name()
		}
	}
	return "the provider that took the money"
}
