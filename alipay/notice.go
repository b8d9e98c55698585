package alipay

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"

	"paynotify/model"
)

// ReadNotification verifies form (VerifyNotification) and says it in the
// ledger's terms (Notification.Notice): what the notify path takes.
func (c *Client) ReadNotification(ctx context.Context, form url.Values) (model.Notice, error) {
	if err := c.VerifyNotification(ctx, form); err != nil {
		return model.Notice{}, err
	}
	n, err := ParseNotification(form.Get)
	if err != nil {
		return model.Notice{}, err
	}
	return n.Notice(), nil
}

// ReadNotification is Client.ReadNotification with the key of the app
// form names (see VerifyNotification).
func (a *Apps) ReadNotification(ctx context.Context, form url.Values) (model.Notice, error) {
	c, err := a.route(form)
	if err != nil {
		return model.Notice{}, err
	}
	return c.ReadNotification(ctx, form)
}

// Notice reads a notification as posted (its header and form body) as
// ReadNotification does, as wechatpay.Provider.Notice reads WeChat Pay's.
// A body that is not a form is refused as unsigned.
func (a *Apps) Notice(ctx context.Context, h http.Header, body []byte) (model.Notice, error) {
	form := url.Values{}
	if ct, _, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil && ct == "application/x-www-form-urlencoded" {
		var err error
		if form, err = url.ParseQuery(string(body)); err != nil {
			return model.Notice{}, fmt.Errorf("%w: the body is not a form: %v", model.ErrInvalidNotification, err)
		}
	}
	return a.ReadNotification(ctx, form)
}
