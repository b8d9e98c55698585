package handler

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// parseQuery must read every body as url.ParseQuery does: the same values,
// and an error exactly when ParseQuery has one.
func TestParseQueryIsParseQuery(t *testing.T) {
	for _, q := range parseQueryCases {
		checkParseQuery(t, q)
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, q := range parseQueryCases {
		f.Add(q)
	}
	f.Fuzz(checkParseQuery)
}

var parseQueryCases = []string{
	"", "&", "&&a=1&&", "a", "a=", "=1", "=", "a=1&b=2", "a=1&a=2&a=3&b=4&a=5",
	"a=%20%2B+b&c%3D=d%3D", "a=%zz", "%zz=1", "a=1;b=2", "a=1&b=2;", "a=测试&测=试",
	"sign=abc%2Bdef%2F%3D%3D&fund_bill_list=%5B%7B%22amount%22%3A%22100.00%22%7D%5D&gmt_payment=2026-11-30+14%3A00%3A05",
	strings.Repeat("a=1&", maxFormParams-1) + "a=1",
	strings.Repeat("a=1&", maxFormParams) + "a=1",
}

func checkParseQuery(t *testing.T, q string) {
	want, wantErr := url.ParseQuery(q)
	got, err := parseQuery(q)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("parseQuery(%.80q): error %v, ParseQuery's %v", q, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("parseQuery(%.80q) = %v, ParseQuery's %v", q, got, want)
	}
	// Values of one key are the key's own: appending to one never
	// changes another's.
	for k := range got {
		got[k] = append(got[k], "x")
	}
	for k, vs := range got {
		if vs[len(vs)-1] != "x" || len(vs) != len(want[k])+1 && err == nil {
			t.Fatalf("parseQuery(%.80q): %s = %q after appending to every key", q, k, vs)
		}
	}
}

func BenchmarkParseQuery(b *testing.B) {
	body := "app_id=2021000000000001&auth_app_id=2021000000000001&buyer_id=2088102177846875&buyer_logon_id=tes%2A%2A%2A%40example.com&buyer_pay_amount=100.00&charset=utf-8&fund_bill_list=%5B%7B%22amount%22%3A%22100.00%22%2C%22fundChannel%22%3A%22ALIPAYACCOUNT%22%7D%5D&gmt_create=2026-11-30+13%3A59%3A50&gmt_payment=2026-11-30+14%3A00%3A05&invoice_amount=100.00&notify_id=2026113000222140005012345678901234&notify_time=2026-11-30+14%3A00%3A06&notify_type=trade_status_sync&out_trade_no=N-1&point_amount=0.00&receipt_amount=100.00&seller_email=shop%40example.com&seller_id=2088000000000001&subject=order&total_amount=100.00&trade_no=2026113022001400000000000001&trade_status=TRADE_SUCCESS&version=1.0&body=&sign_type=RSA2&sign=" + strings.Repeat("AbCd", 86) + "%2B%3D%3D"
	b.Run("net/url", func(b *testing.B) {
		for b.Loop() {
			_, _ = url.ParseQuery(body)
		}
	})
	b.Run("parseQuery", func(b *testing.B) {
		for b.Loop() {
			_, _ = parseQuery(body)
		}
	})
}
