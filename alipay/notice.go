package alipay

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"

	"paynotify/model"
)

// Notice reads a notification as posted (its header and form body),
// verifies it with the key of the app it names (VerifyNotification) and
// says it in the ledger's terms, as wechatpay.Provider.Notice does: a
// paid trade's Payment, a refund's RefundNo (our out_request_no, Alipay's
// out_biz_no), or, for a trade no money moved in (WAIT_BUYER_PAY,
// TRADE_CLOSED), neither. A body that is not a form is refused as
// unsigned.
func (a *Apps) Notice(ctx context.Context, h http.Header, body []byte) (model.Notice, error) {
	form := url.Values{}
	if ct, _, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil && ct == "application/x-www-form-urlencoded" {
		var err error
		if form, err = url.ParseQuery(string(body)); err != nil {
			return model.Notice{}, fmt.Errorf("%w: the body is not a form: %v", model.ErrInvalidNotification, err)
		}
	}
	if err := a.VerifyNotification(ctx, form); err != nil {
		return model.Notice{}, err
	}
	n, err := model.ParseNotification(form.Get)
	if err != nil {
		return model.Notice{}, err
	}
	out := model.Notice{ID: n.NotifyID}
	switch {
	case n.IsRefund():
		if model.ValidID(n.OutBizNo) {
			out.RefundNo = n.OutBizNo
		}
	case n.TradeStatus.Paid():
		out.Payment = n.Observation()
	}
	return out, nil
}
