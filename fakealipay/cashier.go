package fakealipay

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"

	"paynotify/alipay"
)

// cashierPage is the whole cashier: the trade, a Pay button while it waits
// for the buyer, and the way back to the merchant once paid.
var cashierPage = template.Must(template.New("cashier").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Fake Alipay cashier</title>
<style>
body { font: 16px/1.5 system-ui, sans-serif; background: #f2f5f9; color: #1d2633; margin: 0; }
main { max-width: 26rem; margin: 3rem auto; background: #fff; border-radius: 10px; padding: 1.5rem 2rem; box-shadow: 0 2px 10px #0001; }
h1 { font-size: 1.2rem; color: #1677ff; margin: 0 0 .2rem; }
.note { color: #6b7686; font-size: .85rem; margin-top: 0; }
.amount { font-size: 2rem; font-weight: 600; margin: .5rem 0; }
.ids { color: #6b7686; font-size: .85rem; } .ids code { white-space: nowrap; }
button, a.button { display: inline-block; background: #1677ff; color: #fff; border: 0; border-radius: 6px; padding: .6rem 1.6rem; font-size: 1rem; text-decoration: none; cursor: pointer; }
.paid { color: #1f8b4c; font-weight: 600; } [role=alert] { color: #b3261e; }
</style></head>
<body><main>
<h1>Fake Alipay</h1>
<p class="note">paynotify's stand-in for Alipay, for development: no money moves.</p>
{{with .Error}}<p role="alert">{{.}}</p>{{end}}
{{if .TradeNo}}
<p>{{.Subject}}</p>
<p class="amount">¥{{.Amount}}</p>
<p class="ids">Order <code>{{.OutTradeNo}}</code> · trade <code>{{.TradeNo}}</code> · {{.Status}}</p>
{{if .CanPay}}
<form method="post" action="{{.Action}}">
<input type="hidden" name="trade_no" value="{{.TradeNo}}">
<button type="submit">Pay</button>
</form>
{{else if .Paid}}
<p class="paid">paid</p>
{{if .ReturnURL}}<p><a class="button" href="{{.ReturnURL}}">Back to the shop</a></p>
{{else if .BackURL}}<p><a class="button" href="{{.BackURL}}">Back to the order</a></p>{{end}}
{{end}}
{{end}}
</main></body>
</html>
`))

// cashierView is what cashierPage shows.
type cashierView struct {
	Subject, Amount, OutTradeNo, TradeNo, Status string
	CanPay, Paid                                 bool
	Action                                       string // where Pay posts, relative to the page
	ReturnURL                                    string // signed, once paid
	BackURL                                      string // Config.BackURL's, once paid, when there is no ReturnURL
	Error                                        string
}

// cashierOpen serves a page.pay or wap.pay URL, opened by the buyer's
// browser: the trade is opened as by precreate and the cashier shown.
func (s *Server) cashierOpen(w http.ResponseWriter, r *http.Request, c *call, f fault) {
	if ref := s.authenticate(c); ref != nil {
		render(w, http.StatusBadRequest, cashierView{Error: problem(ref.answer)})
		return
	}
	if f.kind == faultFail {
		render(w, http.StatusOK, cashierView{Error: problem(failure(f.code, f.subCode))})
		return
	}
	o, err := c.order()
	var t Trade
	if err == nil {
		t, err = s.create(o)
	}
	if f.kind == faultTimeout {
		s.bg.Sleep(r.Context(), f.delay)
	}
	// A trade already paid or closed is shown as it is.
	if err != nil && !errors.Is(err, errTradeHasSuccess) && !errors.Is(err, errTradeHasClose) {
		render(w, http.StatusBadRequest, cashierView{Error: problem(failureOf(err))})
		return
	}
	render(w, http.StatusOK, s.view(t, "cashier/pay"))
}

// cashier serves GET /cashier/{trade_no}, where a precreate QR code leads.
func (s *Server) cashier(w http.ResponseWriter, r *http.Request) {
	t, err := s.lookup("", "", r.PathValue("trade_no"))
	if err != nil {
		render(w, http.StatusNotFound, cashierView{Error: problem(failureOf(err))})
		return
	}
	render(w, http.StatusOK, s.view(t, "pay"))
}

// cashierPay serves the Pay button: the buyer pays and the merchant is
// notified before the page answers.
func (s *Server) cashierPay(w http.ResponseWriter, r *http.Request) {
	tradeNo := r.PostFormValue("trade_no")
	// Alipay notifies whether or not the buyer waits for the page.
	payErr := s.pay(context.WithoutCancel(r.Context()), "", tradeNo)
	t, err := s.lookup("", "", tradeNo)
	if err != nil {
		render(w, http.StatusNotFound, cashierView{Error: problem(failureOf(err))})
		return
	}
	v := s.view(t, "pay")
	if payErr != nil {
		v.Error = problem(failureOf(payErr))
	}
	render(w, http.StatusOK, v)
}

// view is the cashier for t, its Pay form posting to action.
func (s *Server) view(t Trade, action string) cashierView {
	return cashierView{
		Subject:    t.Subject,
		Amount:     t.TotalAmount.StringFixed(2),
		OutTradeNo: t.OutTradeNo,
		TradeNo:    t.TradeNo,
		Status:     string(t.Status),
		CanPay:     t.Status == alipay.TradeWaitBuyerPay,
		Paid:       !t.Paid.IsZero(),
		Action:     action,
		ReturnURL:  s.returnURL(t),
		BackURL:    s.backURL(t),
	}
}

// backURL is the way back from a paid trade without a return_url: BackURL
// with its out_trade_no, or "".
func (s *Server) backURL(t Trade) string {
	if s.cfg.BackURL == "" || t.Paid.IsZero() {
		return ""
	}
	return s.cfg.BackURL + url.QueryEscape(t.OutTradeNo)
}

// returnURL is the trade's return_url with the signed parameters Alipay
// adds when it sends the buyer back; "" if there is none or it is unpaid.
func (s *Server) returnURL(t Trade) string {
	if t.ReturnURL == "" || t.Paid.IsZero() {
		return ""
	}
	u, err := url.Parse(t.ReturnURL)
	if err != nil {
		return ""
	}
	q := u.Query()
	for k, vs := range s.returnForm(t) {
		q[k] = vs
	}
	signed, err := alipay.SignForm(s.cfg.PrivateKey, q)
	if err != nil {
		return ""
	}
	u.RawQuery = signed.Encode()
	return u.String()
}

// problem words a failure for the page, as Alipay's error page does.
func problem(r result) string {
	return r.SubCode + ": " + r.SubMsg
}

// render writes the cashier page.
func render(w http.ResponseWriter, status int, v cashierView) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	// A failed write means the browser went away; nobody is left to tell.
	_ = cashierPage.Execute(w, v)
}
