package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paynotify/alipay"
	"paynotify/fakewechatpay"
	"paynotify/wechatpay"
)

var update = flag.Bool("update", false, "rewrite testdata/notify/*.form and testdata/notify/wechatpay/*.json")

// notifyCase is one QA replay file in testdata/notify, and what the dev
// service answers when the files are replayed in this order.
type notifyCase struct {
	name   string
	fields map[string]string
	// tamper changes fields after signing.
	tamper map[string]string
	answer string
}

// devTrade is a trade_no Alipay could have issued for a demo order.
func devTrade(suffix string) string { return "2026113022001488880000" + suffix }

// notify builds a TRADE_SUCCESS notification for the dev merchant, with
// the fields a real one carries (see testdata/alipay-real-samples).
func notify(sn, tradeNo, amount string, extra map[string]string) map[string]string {
	f := map[string]string{
		"app_id": devAppID, "auth_app_id": devAppID, "seller_id": devSellerID,
		"buyer_id": "2088102177846880", "buyer_logon_id": "dem***@example.com",
		"charset": "utf-8", "version": "1.0", "notify_type": "trade_status_sync",
		"notify_id":    "2026113000222" + tradeNo[len(tradeNo)-8:],
		"notify_time":  "2026-11-30 14:05:03",
		"gmt_create":   "2026-11-30 14:04:40",
		"gmt_payment":  "2026-11-30 14:05:02",
		"out_trade_no": sn, "trade_no": tradeNo, "trade_status": "TRADE_SUCCESS",
		"total_amount": amount, "receipt_amount": amount, "buyer_pay_amount": amount,
		"invoice_amount": amount, "point_amount": "0.00",
		"fund_bill_list": `[{"amount":"` + amount + `","fundChannel":"ALIPAYACCOUNT"}]`,
		"subject":        "paynotify demo " + sn,
	}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

var notifyCases = []notifyCase{
	{name: "01_pay_demo_1001", fields: notify("DEMO-1001", devTrade("1001"), "100.00", nil), answer: "success"},
	{name: "02_finished_demo_1001", fields: notify("DEMO-1001", devTrade("1001"), "100.00",
		map[string]string{"trade_status": "TRADE_FINISHED", "notify_time": "2027-02-28 14:05:03", "notify_id": "2027022800222" + "finished"}), answer: "success"},
	{name: "03_second_trade_demo_1001", fields: notify("DEMO-1001", devTrade("2001"), "100.00", nil), answer: "success"},
	{name: "04_underpay_demo_1002", fields: notify("DEMO-1002", devTrade("1002"), "0.01", nil), answer: "success"},
	{name: "05_tampered_amount_demo_1002", fields: notify("DEMO-1002", devTrade("3002"), "0.01", nil),
		tamper: map[string]string{"total_amount": "88.00"}, answer: "failure"},
	{name: "06_closed_demo_1003", fields: notify("DEMO-1003", devTrade("1003"), "59.90", nil), answer: "success"},
	{name: "07_wait_buyer_pay_demo_1004", fields: notify("DEMO-1004", devTrade("1004"), "0.01",
		map[string]string{"trade_status": "WAIT_BUYER_PAY", "gmt_payment": ""}), answer: "success"},
	{name: "08_wrong_app_demo_1004", fields: notify("DEMO-1004", devTrade("1004"), "0.01",
		map[string]string{"app_id": "2021009999999999", "auth_app_id": "2021009999999999"}), answer: "failure"},
	{name: "09_conflict_trade_demo_1004", fields: notify("DEMO-1004", devTrade("1001"), "0.01", nil), answer: "failure"},
	// Money for no order of ours: recorded UNMATCHED, for an operator to refund.
	{name: "10_unknown_order", fields: notify("NOPE-404", devTrade("0404"), "1.00", nil), answer: "success"},
	{name: "11_pay_demo_1004", fields: notify("DEMO-1004", devTrade("1004"), "0.01", nil), answer: "success"},
	// dev's second app (mobile) under the same seller: routed by its app_id.
	{name: "12_pay_mobile_demo_1005", fields: notify("DEMO-1005", devTrade("1005"), "25.00",
		map[string]string{"app_id": devMobileAppID, "auth_app_id": devMobileAppID}), answer: "success"},
}

// body signs a case with the development "Alipay" key.
func (c notifyCase) body(t *testing.T) string {
	t.Helper()
	form := url.Values{}
	for k, v := range c.fields {
		if v != "" {
			form.Set(k, v)
		}
	}
	signed, err := alipay.SignForm(devKey("alipay_private_key.pem"), form)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.tamper {
		signed.Set(k, v)
	}
	return signed.Encode()
}

// The replay files are what the cases say, signed by the dev key.
// Regenerate with: go test -run TestNotifyForms -update .
func TestNotifyForms(t *testing.T) {
	for _, c := range notifyCases {
		path := filepath.Join("testdata", "notify", c.name+".form")
		want := c.body(t) + "\n"
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (regenerate: go test -run TestNotifyForms -update .)", err)
		}
		if string(got) != want {
			t.Errorf("%s is stale: go test -run TestNotifyForms -update .", path)
		}
	}
}

// weChatCase is one WeChat Pay QA replay body in testdata/notify/wechatpay
// (sealed with the development APIv3 key; `sign -provider wechatpay`
// signs it when replayed), and the HTTP status the dev service answers
// when the bodies are replayed in this order.
type weChatCase struct {
	name     string
	event    string
	resource map[string]any
	status   int
}

// devTransaction is a transaction_id WeChat Pay could have issued for a
// demo order.
func devTransaction(suffix string) string { return "420000202611300000000000" + suffix }

// weChatPaid is a TRANSACTION.SUCCESS resource for the dev merchant, with
// the fields a real one carries.
func weChatPaid(sn, transactionID string, fen int64, extra map[string]any) map[string]any {
	m := map[string]any{
		"appid": devWeChatAppID, "mchid": devWeChatMchID, "out_trade_no": sn, "transaction_id": transactionID,
		"trade_type": "NATIVE", "trade_state": "SUCCESS", "trade_state_desc": "支付成功", "bank_type": "OTHERS",
		"attach": "", "success_time": "2026-11-30T14:05:02+08:00",
		"payer":  map[string]string{"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},
		"amount": map[string]any{"total": fen, "payer_total": fen, "currency": "CNY", "payer_currency": "CNY"},
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

var weChatCases = []weChatCase{
	{name: "01_pay_demo_1001", resource: weChatPaid("DEMO-1001", devTransaction("1001"), 10000, nil), status: 204},
	{name: "02_second_trade_demo_1001", resource: weChatPaid("DEMO-1001", devTransaction("2001"), 10000, nil), status: 204},
	{name: "03_underpay_demo_1002", resource: weChatPaid("DEMO-1002", devTransaction("1002"), 1, nil), status: 204},
	// 直连商户 take CNY only; the ledger has no currency: refused, resent.
	{name: "04_usd_demo_1002", resource: weChatPaid("DEMO-1002", devTransaction("3002"), 8800,
		map[string]any{"amount": map[string]any{"total": 8800, "payer_total": 8800, "currency": "USD", "payer_currency": "USD"}}), status: 400},
	{name: "05_closed_demo_1003", resource: weChatPaid("DEMO-1003", devTransaction("1003"), 5990, nil), status: 204},
	{name: "06_notpay_demo_1004", resource: weChatPaid("DEMO-1004", devTransaction("1004"), 1,
		map[string]any{"trade_state": "NOTPAY", "trade_state_desc": "未支付"}), status: 400},
	{name: "07_wrong_mchid_demo_1004", resource: weChatPaid("DEMO-1004", devTransaction("1004"), 1,
		map[string]any{"mchid": "1900009999"}), status: 400},
	{name: "08_wrong_appid_demo_1004", resource: weChatPaid("DEMO-1004", devTransaction("1004"), 1,
		map[string]any{"appid": "wxd999999999999999"}), status: 400},
	{name: "09_conflict_trade_demo_1004", resource: weChatPaid("DEMO-1004", devTransaction("1001"), 1, nil), status: 409},
	// Money for no order of ours: recorded UNMATCHED, for an operator to refund.
	{name: "10_unknown_order", resource: weChatPaid("NOPE-404", devTransaction("0404"), 100, nil), status: 204},
	{name: "11_pay_demo_1004", resource: weChatPaid("DEMO-1004", devTransaction("1004"), 1, nil), status: 204},
	// A refund's outcome only hurries the refund worker: never a payment.
	{name: "12_refund_success_demo_1001", event: "REFUND.SUCCESS", resource: map[string]any{
		"mchid": devWeChatMchID, "out_trade_no": "DEMO-1001", "transaction_id": devTransaction("2001"),
		"out_refund_no": "RF-DEMO-1001", "refund_id": "50300002026113000000000001001", "refund_status": "SUCCESS",
		"success_time": "2026-11-30T15:00:00+08:00", "user_received_account": "支付用户零钱",
		"amount": map[string]any{"total": 10000, "refund": 10000, "payer_total": 10000, "payer_refund": 10000},
	}, status: 204},
	// The merchant's second appid: its keys are the merchant's.
	{name: "13_pay_second_app_demo_1006", resource: weChatPaid("DEMO-1006", devTransaction("1006"), 1250,
		map[string]any{"appid": devWeChatSecondAppID}), status: 204},
}

// body seals a case with the development APIv3 key, with a nonce and an
// id of its own name so regenerating gives the same bytes.
func (c weChatCase) body(t *testing.T) []byte {
	t.Helper()
	plain, err := json.Marshal(c.resource)
	if err != nil {
		t.Fatal(err)
	}
	b := fakewechatpay.Body{
		ID: "EV-" + c.name, EventType: c.event, Summary: "支付成功", OriginalType: "transaction",
		CreateTime: time.Date(2026, 11, 30, 6, 5, 3, 0, time.UTC), Resource: plain,
		Nonce: fmt.Sprintf("%012x", crc32.ChecksumIEEE([]byte(c.name)))[:12],
	}
	if b.EventType == "" {
		b.EventType = wechatpay.EventTransactionSuccess
	}
	if strings.HasPrefix(b.EventType, "REFUND.") {
		b.Summary, b.OriginalType = "退款成功", "refund"
	}
	body, err := b.Seal(devWeChatAPIv3Key)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// The WeChat Pay replay bodies are what the cases say, sealed with the dev
// APIv3 key, and each verifies (once signed) and decrypts as its case says.
// Regenerate with: go test -run TestWeChatPayNotifyBodies -update .
func TestWeChatPayNotifyBodies(t *testing.T) {
	client, err := wechatpay.New(wechatpay.Config{
		MchID: devWeChatMchID, AppID: devWeChatAppID, AppIDs: []string{devWeChatSecondAppID}, APIv3Key: devWeChatAPIv3Key,
		MerchantPrivateKey: devKey("wechatpay_merchant_private_key.pem"), MerchantSerial: devWeChatMerchantSerial,
		PublicKey: devKey("wechatpay_public_key.pem"), PublicKeyID: devWeChatPublicKeyID,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range weChatCases {
		path := filepath.Join("testdata", "notify", "wechatpay", c.name+".json")
		want := append(c.body(t), '\n')
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (regenerate: go test -run TestWeChatPayNotifyBodies -update .)", err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: go test -run TestWeChatPayNotifyBodies -update .", path)
			continue
		}
		body := bytes.TrimSpace(got)
		g, err := fakewechatpay.SignNotification(devKey("wechatpay_private_key.pem"), devWeChatPublicKeyID, time.Now(), body)
		if err != nil {
			t.Fatal(err)
		}
		h := make(http.Header)
		g.Set(h)
		n, err := client.VerifyNotification(context.Background(), h, body)
		if c.status == 204 && (err != nil || (n.Payment == nil) == (n.Refund == nil)) {
			t.Errorf("%s: %+v %v, want a payment or a refund hint", c.name, n, err)
		}
		if c.status != 204 && c.status != 409 && err == nil {
			t.Errorf("%s verified, want refused", c.name)
		}
	}
}
