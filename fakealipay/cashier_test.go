package fakealipay_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	smartwalle "github.com/smartwalle/alipay/v3"

	"paynotify/alipay"
	"paynotify/fakealipay"
)

// get fetches a page and returns its status and body.
func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// pressPay submits the cashier's Pay form, as the buyer's browser would.
func pressPay(t *testing.T, page, body string) (int, string) {
	t.Helper()
	m := regexp.MustCompile(`<form method="post" action="([^"]+)">\s*<input type="hidden" name="trade_no" value="([0-9]+)">`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no Pay form in:\n%s", body)
	}
	base, _ := url.Parse(page)
	action, err := base.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return postPay(t, action.String(), m[2])
}

// postPay posts the Pay form for tradeNo to action.
func postPay(t *testing.T, action, tradeNo string) (int, string) {
	t.Helper()
	resp, err := http.PostForm(action, url.Values{"trade_no": {tradeNo}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestPagePay(t *testing.T) {
	tests := []struct {
		name string
		url  func(*smartwalle.Client, smartwalle.Trade) (*url.URL, error)
	}{
		{name: "Page", url: func(c *smartwalle.Client, tr smartwalle.Trade) (*url.URL, error) {
			return c.TradePagePay(smartwalle.TradePagePay{Trade: tr})
		}},
		{name: "Wap", url: func(c *smartwalle.Client, tr smartwalle.Trade) (*url.URL, error) {
			return c.TradeWapPay(smartwalle.TradeWapPay{Trade: tr})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			u, err := tt.url(e.sdk, smartwalle.Trade{
				Subject: "Pour-over kettle <b>", OutTradeNo: "ORD-1", TotalAmount: "259.00",
				NotifyURL: e.recv.srv.URL, ReturnURL: "https://shop.example/orders/ORD-1?from=alipay",
			})
			if err != nil {
				t.Fatal(err)
			}
			status, body := get(t, u.String())
			if status != http.StatusOK || !strings.Contains(body, "259.00") || !strings.Contains(body, "Pour-over kettle &lt;b&gt;") {
				t.Fatalf("cashier page: %d\n%s", status, body)
			}
			tr, ok := e.fake.Trade("ORD-1")
			if !ok || tr.Status != alipay.TradeWaitBuyerPay {
				t.Fatalf("opening the page did not open the trade: %+v", tr)
			}
			// Opening it again shows the same trade.
			if status, _ := get(t, u.String()); status != http.StatusOK {
				t.Fatalf("reopened page: %d", status)
			}

			status, body = pressPay(t, u.String(), body)
			if status != http.StatusOK || !strings.Contains(body, "paid") {
				t.Fatalf("after Pay: %d\n%s", status, body)
			}
			if tr, _ := e.fake.Trade("ORD-1"); tr.Status != alipay.TradeSuccess {
				t.Fatalf("status %q after Pay", tr.Status)
			}
			if got := len(e.recv.Forms()); got != 1 {
				t.Fatalf("received %d notifications, want 1", got)
			}

			back := regexp.MustCompile(`<a class="button" href="([^"]+)">Back to the shop</a>`).FindStringSubmatch(body)
			if back == nil {
				t.Fatalf("no way back in:\n%s", body)
			}
			ret, err := url.Parse(html.UnescapeString(back[1]))
			if err != nil {
				t.Fatal(err)
			}
			q := ret.Query()
			if ret.Host != "shop.example" || q.Get("from") != "alipay" || q.Get("out_trade_no") != "ORD-1" || q.Get("total_amount") != "259.00" {
				t.Fatalf("return link %s", ret)
			}
			if err := e.alipay.VerifyNotification(context.Background(), q); err != nil {
				t.Errorf("return parameters do not verify: %v", err)
			}

			// Pressing Pay again changes nothing.
			status, body = postPay(t, e.gw.URL+"/cashier/pay", tr.TradeNo)
			if status != http.StatusOK || !strings.Contains(body, "ACQ.TRADE_STATUS_ERROR") || len(e.recv.Forms()) != 1 {
				t.Errorf("second Pay: %d\n%s", status, body)
			}
		})
	}
}

func TestPrecreateQRCode(t *testing.T) {
	e := newEnv(t, nil)
	pre := e.precreate(t, "ORD-1", "12.50")
	status, body := get(t, pre.QRCode)
	if status != http.StatusOK || !strings.Contains(body, "12.50") {
		t.Fatalf("QR code page: %d\n%s", status, body)
	}
	if status, body := pressPay(t, pre.QRCode, body); status != http.StatusOK || !strings.Contains(body, "paid") {
		t.Fatalf("after Pay: %d\n%s", status, body)
	}
	if tr, _ := e.fake.Trade("ORD-1"); tr.Status != alipay.TradeSuccess {
		t.Fatalf("status %q after Pay", tr.Status)
	}
	if status, _ := get(t, e.gw.URL+"/cashier/2026010122001000000000000000"); status != http.StatusNotFound {
		t.Errorf("unknown trade page: %d, want 404", status)
	}
}

func TestPagePayRefused(t *testing.T) {
	e := newEnv(t, nil)
	u, err := e.sdk.TradePagePay(smartwalle.TradePagePay{Trade: smartwalle.Trade{Subject: "x", OutTradeNo: "ORD-1", TotalAmount: "1.00"}})
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("app_id", "2021000000000999")
	u.RawQuery = q.Encode()
	if status, body := get(t, u.String()); status != http.StatusBadRequest || !strings.Contains(body, "isv.invalid-app-id") {
		t.Fatalf("page for another app: %d\n%s", status, body)
	}
	if _, ok := e.fake.Trade("ORD-1"); ok {
		t.Fatal("a refused page opened a trade")
	}
}

// A trade without a return_url still has a way back once paid: the
// BackURL the fake was given (dev: its console), with the order's number;
// and the page is styled, not bare HTML.
func TestCashierWayBack(t *testing.T) {
	e := newEnv(t, func(c *fakealipay.Config) { c.BackURL = "http://127.0.0.1:8080/console/search?q=" })
	pre := e.precreate(t, "ORD-2", "12.50")
	status, body := get(t, pre.QRCode)
	if status != http.StatusOK || !strings.Contains(body, "<style>") {
		t.Fatalf("cashier page: %d, unstyled:\n%s", status, body)
	}
	if strings.Contains(body, "Back to the order") {
		t.Fatalf("a way back before paying:\n%s", body)
	}
	status, body = pressPay(t, pre.QRCode, body)
	if status != http.StatusOK || !strings.Contains(body, `href="http://127.0.0.1:8080/console/search?q=ORD-2">Back to the order</a>`) {
		t.Fatalf("after Pay, no way back: %d\n%s", status, body)
	}
}
