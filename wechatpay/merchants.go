package wechatpay

import (
	"context"
	"errors"
	"net/http"

	"paynotify/model"
)

// Merchants are several merchants' providers as one check of WeChat Pay's
// notifications, which all arrive at one URL: a notice is taken by the
// merchant whose keys verify it (Wechatpay-Serial picks the key, so a
// merchant that does not know the serial refuses at once) and open it (the
// AEAD tag tells whose APIv3 key sealed it), and whose mchid it names.
// Refused by all, the answer is that no merchant configured takes it
// (model.ErrUnknownApp) when one opened it, else the first merchant's.
type Merchants []*Provider

// Notice is the notification as the merchant that takes it reads it.
func (ms Merchants) Notice(ctx context.Context, h http.Header, body []byte) (model.Notice, error) {
	var first, unknown error
	for _, p := range ms {
		n, err := p.Notice(ctx, h, body)
		if err == nil {
			return n, nil
		}
		if first == nil {
			first = err
		}
		if unknown == nil && errors.Is(err, model.ErrUnknownApp) {
			unknown = err
		}
	}
	if unknown != nil {
		return model.Notice{}, unknown
	}
	if first == nil {
		first = errors.New("wechatpay: no merchant configured")
	}
	return model.Notice{}, first
}
