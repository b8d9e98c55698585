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
	err := missingSide(ctx, m,
		func(after string, limit int) ([]model.Payment, error) {
			return r.store.UnseenPayments(ctx, r.Provider, r.Accounts, from, to, after, limit)
		},
		func(p model.Payment) string { return p.TradeNo },
		func(p model.Payment) {
			r.log.Warn("payment in our ledger is missing from its provider's bill", "provider", r.Provider, "trade_no", p.TradeNo, "state", p.State, "amount", p.Amount)
		},
		func(p model.Payment) model.ReconItem {
			return model.ReconItem{Outcome: model.ReconMissingAtProvider, Ref: p.TradeNo, TradeNo: p.TradeNo,
				OutTradeNo: p.OutTradeNo, LedgerAmount: amountPtr(p.Amount),
				Detail: "our ledger has this payment as " + string(p.State) + "; " + r.Provider.Name() + "'s bill does not"}
		},
		"payments in our ledger missing from their provider's bill, in all")
	if err != nil {
		return err
	}
	return missingSide(ctx, m,
		func(after string, limit int) ([]model.Refund, error) {
			return r.store.UnseenRefunds(ctx, r.Provider, r.Accounts, from, to, after, limit)
		},
		func(f model.Refund) string { return f.OutRequestNo },
		func(f model.Refund) {
			r.log.Warn("refund we hold as REFUNDED is missing from its provider's bill", "provider", r.Provider, "out_request_no", f.OutRequestNo, "amount", f.Amount)
		},
		func(f model.Refund) model.ReconItem {
			return model.ReconItem{Outcome: model.ReconRefundMissingAtProvider, Ref: f.OutRequestNo, TradeNo: f.TradeNo,
				OutTradeNo: f.OutTradeNo, OutRequestNo: f.OutRequestNo, LedgerAmount: amountPtr(f.Amount),
				Detail: "we hold this refund as REFUNDED; its provider's bill has no such refund"}
		},
		"refunds we hold as REFUNDED missing from their provider's bill, in all")
}

// missingSide records one side of missing: it reads the rows a page
// (Batch) at a time after the last one's key, and records an item of each.
// The first maxMissingLogs rows are logged one by one (logRow), the rest
// counted in one line (summary).
func missingSide[T any](ctx context.Context, m *matcher, page func(after string, limit int) ([]T, error), key func(T) string,
	logRow func(T), item func(T) model.ReconItem, summary string) error {
	r := m.r
	limit := max(r.Batch, 1)
	n := 0
	for after := ""; ; {
		rows, err := page(after, limit)
		if err != nil {
			return err
		}
		items := make([]model.ReconItem, 0, len(rows))
		for _, row := range rows {
			if n++; n <= maxMissingLogs {
				logRow(row)
			}
			items = append(items, item(row))
		}
		if err := m.save(ctx, items); err != nil {
			return err
		}
		if len(rows) < limit {
			break
		}
		after = key(rows[len(rows)-1])
	}
	if n > maxMissingLogs {
		r.log.Warn(summary, "provider", r.Provider, "bill_date", m.date, "count", n)
	}
	return nil
}

// maxMissingLogs is how many missing payments (and refunds) a run logs
// one by one; every one of them is an item all the same.
const maxMissingLogs = 100
