package fakewechatpay

import (
	"context"
	"html/template"
	"net/http"
)

// cashierPage is the whole cashier: the trade, a Pay button while it waits
// for the buyer.
var cashierPage = template.Must(template.New("cashier").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Fake WeChat Pay cashier</title></head>
<body>
<h1>Fake WeChat Pay</h1>
<p><small>paynotify's stand-in for WeChat Pay, for development: no money moves.</small></p>
{{with .Error}}<p role="alert">{{.}}</p>{{end}}
{{if .PrepayID}}
<p>{{.Description}}</p>
<p><strong>¥{{.Amount}}</strong></p>
<p>Order {{.OutTradeNo}} · {{.TradeType}} · {{.State}}{{with .TransactionID}} · transaction {{.}}{{end}}</p>
{{if .CanPay}}
<form method="post" action="pay">
<input type="hidden" name="prepay_id" value="{{.PrepayID}}">
<button type="submit">Pay</button>
</form>
{{else if .Paid}}
<p>paid</p>
{{end}}
{{end}}
</body>
</html>
`))

// cashierView is what cashierPage shows.
type cashierView struct {
	Description, Amount, OutTradeNo, TradeType, State, PrepayID, TransactionID string
	CanPay, Paid                                                               bool
	Error                                                                      string
}

// cashier serves GET /cashier/{prepay_id}, where code_url and h5_url lead.
func (s *Server) cashier(w http.ResponseWriter, r *http.Request) {
	t, ok := s.byPrepayID(r.PathValue("prepay_id"))
	if !ok {
		render(w, http.StatusNotFound, cashierView{Error: "ORDER_NOT_EXIST: 订单不存在"})
		return
	}
	render(w, http.StatusOK, view(t))
}

// cashierPay serves the Pay button: the buyer pays and the merchant is
// notified before the page answers.
func (s *Server) cashierPay(w http.ResponseWriter, r *http.Request) {
	t, ok := s.byPrepayID(r.PostFormValue("prepay_id"))
	if !ok {
		render(w, http.StatusNotFound, cashierView{Error: "ORDER_NOT_EXIST: 订单不存在"})
		return
	}
	// WeChat Pay notifies whether or not the buyer waits for the page.
	payErr := s.Pay(context.WithoutCancel(r.Context()), t.OutTradeNo)
	t, _ = s.byPrepayID(t.PrepayID)
	v := view(t)
	if payErr != nil {
		v.Error = payErr.Error()
	}
	render(w, http.StatusOK, v)
}

// byPrepayID returns the trade of a prepay_id.
func (s *Server) byPrepayID(id string) (Trade, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byPrepay[id]
	if !ok {
		return Trade{}, false
	}
	return *t, true
}

// view is the cashier for t.
func view(t Trade) cashierView {
	return cashierView{
		Description: t.Description, Amount: yuan(t.Total), OutTradeNo: t.OutTradeNo, TradeType: t.TradeType,
		State: string(t.State), PrepayID: t.PrepayID, TransactionID: t.TransactionID,
		CanPay: t.State == "NOTPAY", Paid: t.State.Paid(),
	}
}

// render writes the cashier page.
func render(w http.ResponseWriter, status int, v cashierView) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	// A failed write means the browser went away; nobody is left to tell.
	_ = cashierPage.Execute(w, v)
}
