package service

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// seenNotice is a notification as handler.parseQuery leaves it: every
// string a slice of body.
func seenNotice(body string, i int) (model.Observation, model.Payment) {
	field := func(name string) string {
		_, v, _ := strings.Cut(body, "&"+name+"=")
		v, _, _ = strings.Cut(v, "&")
		return v
	}
	at := time.Now().UTC()
	n := model.Observation{Provider: model.ProviderAlipay, TradeNo: field("trade_no"), OutTradeNo: field("out_trade_no"),
		Amount: decimal.RequireFromString(field("total_amount")), PaidAt: &at, Ref: field("notify_id"),
		Account: field("seller_id"), App: field("app_id"), Status: field("trade_status")}
	pay := model.Payment{Provider: n.Provider, Account: n.Account, App: n.App, TradeNo: n.TradeNo, OrderID: int64(i),
		OutTradeNo: n.OutTradeNo, Amount: n.Amount, State: model.PaymentApplied, NotifyID: n.Ref, PaidAt: n.PaidAt,
		CreateTime: at, UpdateTime: at}
	return n, pay
}

func seenBody(i int) string {
	return fmt.Sprintf("gmt_create=2026-12-07+10%%3A00%%3A00&charset=utf-8&seller_id=2088000000000001&app_id=2021000000000001"+
		"&trade_no=20261207220014%014d&out_trade_no=S32a%09d&total_amount=%d.%02d&notify_id=2026120700222100000%015d"+
		"&trade_status=TRADE_SUCCESS&sign_type=RSA2&sign=%s&end=1", i, i, 1+i%999, i%100, i, strings.Repeat("A", 344))
}

// A remembered trade keeps none of the request body its strings were
// sliced from.
func TestSeenKeepsNoRequestBody(t *testing.T) {
	s := newSeen(10)
	body := seenBody(1)
	n, pay := seenNotice(body, 1)
	s.add(n, pay)
	got, ok := s.answer(n)
	if !ok {
		t.Fatal("the trade added is not answered")
	}
	from, to := uintptr(unsafe.Pointer(unsafe.StringData(body))), uintptr(unsafe.Pointer(unsafe.StringData(body)))+uintptr(len(body))
	e, _ := s.trades.Peek(ledgerKey{n.Provider, n.TradeNo})
	for name, v := range map[string]string{"key's trade_no": s.trades.Keys()[0].tradeNo, "app": e.app.Value(), "status": e.status.Value(),
		"account": got.Account, "out_trade_no": got.OutTradeNo} {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(v))); v == "" || p >= from && p < to {
			t.Errorf("%s %q is a slice of the request body", name, v)
		}
	}
	if got.PaidAt == pay.PaidAt || !got.PaidAt.Equal(*pay.PaidAt) {
		t.Errorf("paid_at %v, want a copy of %v", got.PaidAt, pay.PaidAt)
	}
	if got.OrderID != pay.OrderID || !got.Amount.Equal(pay.Amount) || got.State != pay.State || got.App != pay.App || got.Provider != pay.Provider {
		t.Errorf("answered %+v, want the payment added %+v", got, pay)
	}
}

// What an entry costs: the figure DefaultDuplicateCacheSize's comment
// gives. Each body is garbage once its trade is added, so an entry that
// kept its body alive would count it too.
func TestSeenEntrySize(t *testing.T) {
	const entries = 20_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := newSeen(entries)
	for i := range entries {
		n, pay := seenNotice(seenBody(i), i)
		s.add(n, pay)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / entries
	t.Logf("%d bytes of heap an entry, %.0f MiB for %d", per, float64(per)*DefaultDuplicateCacheSize/(1<<20), DefaultDuplicateCacheSize)
	if per > 500 {
		t.Errorf("%d bytes an entry, want at most 500", per)
	}
	runtime.KeepAlive(s)
}
