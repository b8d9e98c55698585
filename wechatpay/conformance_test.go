package wechatpay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"paynotify/fakewechatpay"
	"paynotify/internal/devkey"
	"paynotify/model"
	"paynotify/service"
	"paynotify/service/providertest"
	"paynotify/wechatpay"
)

// The WeChat Pay adapter, which reads its own notifications, passes the
// provider conformance suite against fakewechatpay.
func TestConformance(t *testing.T) {
	e := newEnv(t, nil)
	p := wechatpay.NewProvider(e.client, e.recv.srv.URL)
	// What only WeChat Pay has, the service finds by type assertion.
	if _, ok := any(p).(service.BillKeeper); !ok {
		t.Error("the WeChat Pay adapter is no service.BillKeeper: runs of days past its three months would be claimed")
	}
	if _, ok := any(p).(service.BillPublisher); !ok {
		t.Error("the WeChat Pay adapter is no service.BillPublisher: the daily run would fetch the bill before 10:00")
	}
	providertest.Test(t, providertest.Harness{
		Name:     model.ProviderWechatpay,
		Provider: p,
		Notices:  p,
		Fake: wechatFake{e.fake, devkey.Read(t, "wechatpay_private_key.pem"),
			devkey.Read(t, "wechatpay_merchant_private_key.pem")},
		Method:  model.PayNative,
		Account: mchID, App: appID,
	})
}

// wechatFake is fakewechatpay as the conformance suite drives it.
type wechatFake struct {
	*fakewechatpay.Server
	// wechatKey is WeChat Pay's (the fake's) key of publicKeyID;
	// merchantKey is the merchant's, so what it signs is forged.
	wechatKey, merchantKey string
}

// Notice is the last notification of outTradeNo's payment the fake
// posted, edited by f.
func (w wechatFake) Notice(_ context.Context, outTradeNo string, f providertest.Forgery) (http.Header, []byte, error) {
	var found *fakewechatpay.Notification
	for _, n := range w.Notifications() {
		var res struct {
			OutTradeNo string `json:"out_trade_no"`
		}
		if n.EventType == "TRANSACTION.SUCCESS" && json.Unmarshal(n.Resource, &res) == nil && res.OutTradeNo == outTradeNo {
			found = &n
		}
	}
	if found == nil {
		return nil, nil, fmt.Errorf("fakewechatpay sent no notification of %s's payment", outTradeNo)
	}
	h, body := found.Header.Clone(), found.Body
	// reseal is the notification with its resource edited, sealed with
	// the merchant's APIv3 key as WeChat Pay would.
	reseal := func(from, to string) ([]byte, error) {
		res := bytes.Replace(found.Resource, []byte(from), []byte(to), 1)
		if bytes.Equal(res, found.Resource) {
			return nil, fmt.Errorf("the resource of %s has no %s", outTradeNo, from)
		}
		return fakewechatpay.Body{ID: found.ID, EventType: found.EventType, Summary: "支付成功", CreateTime: time.Now(),
			OriginalType: "transaction", Nonce: "forged000001", Resource: res}.Seal(apiV3Key)
	}
	var err error
	switch f {
	case providertest.BadSignature:
		err = sign(h, w.merchantKey, body)
	case providertest.TamperedAmount:
		// Resealed with the amount changed, the signature WeChat Pay made
		// over the body it sent kept.
		body, err = reseal(`"total":1000`, `"total":1`)
	case providertest.WrongApp:
		if body, err = reseal(`"appid":"`+appID+`"`, `"appid":"wx9999999999999999"`); err == nil {
			err = sign(h, w.wechatKey, body)
		}
	}
	return h, body, err
}

// sign sets on h the Wechatpay-* headers of body signed with key under
// publicKeyID, now.
func sign(h http.Header, key string, body []byte) error {
	g, err := fakewechatpay.SignNotification(key, publicKeyID, time.Now(), body)
	if err != nil {
		return err
	}
	g.Set(h)
	return nil
}
