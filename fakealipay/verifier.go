package fakealipay

import (
	"context"
	"net/url"
	"time"

	"paynotify/alipay"
	"paynotify/model"
)

// Verifier verifies notifications as serve does, with Client, then tells
// Fake about the trade a verified paying notification reports: in dev, a
// form signed with the development "Alipay" key (a replay file, or one
// made by paynotify sign) stands for a payment Alipay took, so what the
// service later does with the trade — refund money it cannot apply, query,
// close — finds it there, as it would at Alipay.
type Verifier struct {
	Client *alipay.Client
	Fake   *Server
}

// VerifyNotification is the service's verifier (handler.Verifier).
func (v Verifier) VerifyNotification(ctx context.Context, form url.Values) error {
	if err := v.Client.VerifyNotification(ctx, form); err != nil {
		return err
	}
	n, err := model.ParseNotification(form.Get)
	if err != nil || !n.TradeStatus.Paid() || n.IsRefund() {
		return nil // the service refuses or ignores it: no trade to know
	}
	paidAt := time.Now()
	if n.GmtPayment != nil {
		paidAt = *n.GmtPayment
	}
	v.Fake.AddPaidTrade(n.OutTradeNo, n.TradeNo, n.TotalAmount, paidAt) // a known trade is left as it is
	return nil
}
