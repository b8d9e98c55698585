package fakewechatpay

import (
	"context"
	"net/http"
	"time"

	"paynotify/model"
	"paynotify/wechatpay"
)

// Verifier checks WeChat Pay's notifications as serve does, with
// Provider, then tells Fake of a paid transaction it did not open: in dev,
// a body sealed with the development keys (a replay file, or one made by
// paynotify sign) stands for a payment WeChat Pay took, so what the
// service later does with the transaction finds it there.
type Verifier struct {
	Provider *wechatpay.Provider
	Fake     *Server
}

// Notice is the service's check of a notification
// (handler.WeChatPayVerifier).
func (d Verifier) Notice(ctx context.Context, h http.Header, body []byte) (model.Notice, error) {
	n, err := d.Provider.Notice(ctx, h, body)
	if err != nil || n.Payment.TradeNo == "" {
		return n, err
	}
	fen, err := wechatpay.Fen(n.Payment.Amount)
	if err != nil {
		return n, nil // the ledger refuses it
	}
	paidAt := time.Now()
	if n.Payment.PaidAt != nil {
		paidAt = *n.Payment.PaidAt
	}
	d.Fake.AddPaidTrade(n.Payment.OutTradeNo, n.Payment.TradeNo, fen, paidAt)
	return n, nil
}
