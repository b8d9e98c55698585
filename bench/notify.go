package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"runtime"
	"sync"
	"time"

	"paynotify/alipay"
)

// The merchant the service runs as in the benchmark.
const (
	benchAppID    = "2021004100000042"
	benchSellerID = "2088041000000042"
)

// order is an oms_order row the tool seeds, and the trade that pays it.
type order struct {
	sn       string
	memberID int64
	amount   string // yuan, two decimals, as Alipay writes total_amount
	tradeNo  string
}

// makeOrders returns count orders whose numbers start with prefix. Amounts
// vary (0.01 to 999.99) but are deterministic.
func makeOrders(prefix string, count int) []order {
	out := make([]order, count)
	for i := range out {
		cents := 1 + (i*7919+13)%99999
		out[i] = order{
			sn:       fmt.Sprintf("%s%09d", prefix, i),
			memberID: int64(1 + i%5000),
			amount:   fmt.Sprintf("%d.%02d", cents/100, cents%100),
			// Alipay trade numbers: date, channel digits, a sequence (28 chars).
			tradeNo: fmt.Sprintf("20261130220014%s%08d", prefix[:min(len(prefix), 6)], i),
		}
	}
	return out
}

// keys are the benchmark's freshly generated RSA-2048 keys: serve refuses
// the development keys in testdata/dev.
type keys struct {
	appPrivate    string // the merchant's key (ALIPAY_APP_PRIVATE_KEY)
	alipayPrivate string // "Alipay's" key: signs the notifications
	alipayPublic  string // ALIPAY_PUBLIC_KEY
}

func newKeys() (keys, error) {
	gen := func() (string, error) {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return "", err
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})), nil
	}
	var k keys
	var err error
	if k.appPrivate, err = gen(); err != nil {
		return k, err
	}
	if k.alipayPrivate, err = gen(); err != nil {
		return k, err
	}
	k.alipayPublic, err = alipay.PublicKeyOf(k.alipayPrivate)
	return k, err
}

// notifyForm is the TRADE_SUCCESS notification Alipay sends to app appID
// when o is paid, unsigned, with the fields of the real samples in
// testdata/alipay-real-samples.
func notifyForm(appID string, o order, seq int, paid time.Time) url.Values {
	at := func(d time.Duration) string { return alipay.FormatTime(paid.Add(d)) }
	fund := fmt.Sprintf(`[{"amount":"%s","fundChannel":"ALIPAYACCOUNT"}]`, o.amount)
	return url.Values{
		"gmt_create":       {at(-20 * time.Second)},
		"charset":          {"utf-8"},
		"seller_email":     {"merchant@example.com"},
		"subject":          {"mall order " + o.sn},
		"body":             {""}, // Alipay sends empty fields; they are not signed
		"buyer_id":         {fmt.Sprintf("2088%012d", 102000000000+int64(seq%100000))},
		"invoice_amount":   {o.amount},
		"notify_id":        {fmt.Sprintf("2026113000222%09d%012d", seq, 4026431019+int64(seq))},
		"fund_bill_list":   {fund},
		"notify_type":      {"trade_status_sync"},
		"trade_status":     {string(alipay.TradeSuccess)},
		"receipt_amount":   {o.amount},
		"buyer_pay_amount": {o.amount},
		"app_id":           {appID},
		"auth_app_id":      {appID},
		"seller_id":        {benchSellerID},
		"gmt_payment":      {at(-3 * time.Second)},
		"notify_time":      {at(0)},
		"version":          {"1.0"},
		"out_trade_no":     {o.sn},
		"total_amount":     {o.amount},
		"trade_no":         {o.tradeNo},
		"buyer_logon_id":   {"152****6706"},
		"point_amount":     {"0.00"},
	}
}

// signBodies signs a first notice for every order with alipay.SignForm,
// order i in app i mod len(apps) with that app's Alipay key (the private
// half of the one the service trusts for it), and URL-encodes it, on every
// core: signing is Alipay's cost, paid before anything is measured.
func signBodies(ctx context.Context, apps []benchApp, orders []order) ([][]byte, error) {
	paid := time.Now().Add(-time.Minute)
	return onEveryCore(ctx, "sign", len(orders), func(i int) ([]byte, error) {
		app := apps[i%len(apps)]
		signed, err := alipay.SignForm(app.alipayPrivate, notifyForm(app.id, orders[i], i, paid))
		if err != nil {
			return nil, err
		}
		return []byte(signed.Encode()), nil
	})
}

// onEveryCore returns f(i) for every i below n, computed on every core
// (what the tool prepares before it measures); the error is one f
// returned, as what's, else ctx's if it ended first.
func onEveryCore[T any](ctx context.Context, what string, n int, f func(i int) (T, error)) ([]T, error) {
	out := make([]T, n)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	work := make(chan int)
	for range runtime.NumCPU() {
		wg.Go(func() {
			for i := range work {
				v, err := f(i)
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					continue
				}
				out[i] = v
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if first != nil {
		return nil, fmt.Errorf("%s: %w", what, first)
	}
	return out, ctx.Err()
}
