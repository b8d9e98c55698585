package service

import (
	"context"
	"time"

	"paynotify/model"
)

// missing records the ledger's payments and refunds of [from, to) that no
// bill line matched — all of them, a page at a time. It changes nothing
// else: the money may never have moved, and only an operator can tell.
// The first maxMissingLogs of each side are logged one by one, the rest
// in one line.
func (m *matcher) missing(ctx context.Context, from, to time.Time) error {
	r := m.r
	page := max(r.Batch, 1)
	n := 0
	for after := ""; ; {
		pays, err := r.store.UnseenPayments(ctx, r.Provider, from, to, after, page)
		if err != nil {
			return err
		}
		items := make([]model.ReconItem, 0, len(pays))
		for _, p := range pays {
			if n++; n <= maxMissingLogs {
				r.log.Warn("payment in our ledger is missing from Alipay's bill", "trade_no", p.TradeNo, "state", p.State, "amount", p.Amount)
			}
			items = append(items, model.ReconItem{Outcome: model.ReconMissingAtAlipay, Ref: p.TradeNo, TradeNo: p.TradeNo,
				OutTradeNo: p.OutTradeNo, LedgerAmount: amountPtr(p.Amount),
				Detail: "our ledger has this payment as " + string(p.State) + "; Alipay's bill does not"})
		}
		if err := m.save(ctx, items); err != nil {
			return err
		}
		if len(pays) < page {
			break
		}
		after = pays[len(pays)-1].TradeNo
	}
	if n > maxMissingLogs {
		r.log.Warn("payments in our ledger missing from Alipay's bill, in all", "bill_date", m.date, "count", n)
	}
	n = 0
	for after := ""; ; {
		refunds, err := r.store.UnseenRefunds(ctx, r.Provider, from, to, after, page)
		if err != nil {
			return err
		}
		items := make([]model.ReconItem, 0, len(refunds))
		for _, f := range refunds {
			if n++; n <= maxMissingLogs {
				r.log.Warn("refund we hold as REFUNDED is missing from Alipay's bill", "out_request_no", f.OutRequestNo, "amount", f.Amount)
			}
			items = append(items, model.ReconItem{Outcome: model.ReconRefundMissingAtAlipay, Ref: f.OutRequestNo, TradeNo: f.TradeNo,
				OutTradeNo: f.OutTradeNo, OutRequestNo: f.OutRequestNo, LedgerAmount: amountPtr(f.Amount),
				Detail: "we hold this refund as REFUNDED; Alipay's bill has no such refund"})
		}
		if err := m.save(ctx, items); err != nil {
			return err
		}
		if len(refunds) < page {
			break
		}
		after = refunds[len(refunds)-1].OutRequestNo
	}
	if n > maxMissingLogs {
		r.log.Warn("refunds we hold as REFUNDED missing from Alipay's bill, in all", "bill_date", m.date, "count", n)
	}
	return nil
}

// maxMissingLogs is how many missing payments (and refunds) a run logs
// one by one; every one of them is an item all the same.
const maxMissingLogs = 100
