package fakealipay

import (
	"context"
	"net/url"
	"time"

	"paynotify/model"
)

// Verifier verifies notifications as serve does, with Client, then tells
// Fake about the trade a verified paying notification reports: in dev, a
// form signed with the development "Alipay" key (a replay file, or one
// made by paynotify sign) stands for a payment Alipay took, so what the
// service later does with the trade — refund money it cannot apply, query,
// close — finds it there, as it would at Alipay.
type Verifier struct {
	// Client is serve's check: an *alipay.Client, or *alipay.Apps for
	// several apps.
	Client interface {
		ReadNotification(ctx context.Context, form url.Values) (model.Notice, error)
	}
	Fake *Server
}

// ReadNotification is the service's reader of notifications
// (handler.Verifier): Client's, then the fake is told of the paid trade.
func (v Verifier) ReadNotification(ctx context.Context, form url.Values) (model.Notice, error) {
	n, err := v.Client.ReadNotification(ctx, form)
	if err != nil || n.Payment.TradeNo == "" {
		return n, err // the service refuses or ignores it: no trade to know
	}
	p := n.Payment
	paidAt := time.Now()
	if p.PaidAt != nil {
		paidAt = *p.PaidAt
	}
	v.Fake.AddPaidTradeIn(p.App, p.OutTradeNo, p.TradeNo, p.Amount, paidAt) // a known trade is left as it is
	return n, nil
}
