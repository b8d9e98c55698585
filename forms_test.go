package main

import (
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"paynotify/alipay"
)

var update = flag.Bool("update", false, "rewrite testdata/notify/*.form")

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
	{name: "pay_demo_1001", fields: notify("DEMO-1001", devTrade("1001"), "100.00", nil), answer: "success"},
	{name: "finished_demo_1001", fields: notify("DEMO-1001", devTrade("1001"), "100.00",
		map[string]string{"trade_status": "TRADE_FINISHED", "notify_time": "2027-02-28 14:05:03", "notify_id": "2027022800222" + "finished"}), answer: "success"},
	{name: "second_trade_demo_1001", fields: notify("DEMO-1001", devTrade("2001"), "100.00", nil), answer: "success"},
	{name: "underpay_demo_1002", fields: notify("DEMO-1002", devTrade("1002"), "0.01", nil), answer: "success"},
	{name: "tampered_amount_demo_1002", fields: notify("DEMO-1002", devTrade("3002"), "0.01", nil),
		tamper: map[string]string{"total_amount": "88.00"}, answer: "failure"},
	{name: "closed_demo_1003", fields: notify("DEMO-1003", devTrade("1003"), "59.90", nil), answer: "success"},
	{name: "wait_buyer_pay_demo_1004", fields: notify("DEMO-1004", devTrade("1004"), "0.01",
		map[string]string{"trade_status": "WAIT_BUYER_PAY", "gmt_payment": ""}), answer: "success"},
	{name: "wrong_app_demo_1004", fields: notify("DEMO-1004", devTrade("1004"), "0.01",
		map[string]string{"app_id": "2021009999999999", "auth_app_id": "2021009999999999"}), answer: "failure"},
	{name: "conflict_trade_demo_1004", fields: notify("DEMO-1004", devTrade("1001"), "0.01", nil), answer: "failure"},
	// Money for no order of ours: recorded UNMATCHED, for an operator to refund.
	{name: "unknown_order", fields: notify("NOPE-404", devTrade("0404"), "1.00", nil), answer: "success"},
	{name: "pay_demo_1004", fields: notify("DEMO-1004", devTrade("1004"), "0.01", nil), answer: "success"},
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
