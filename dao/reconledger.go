package dao

import (
	"context"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"

	"paynotify/model"
)

// PaymentsByTradeNo reads, without locking, the payments recorded under
// any of tradeNos.
func (s *Store) PaymentsByTradeNo(ctx context.Context, provider model.Provider, tradeNos []string) (map[string]model.Payment, error) {
	out := make(map[string]model.Payment, len(tradeNos))
	if len(tradeNos) == 0 {
		return out, nil
	}
	var ps []model.Payment
	err := s.db.WithContext(ctx).Table(paymentTable).Select(paymentColumns).
		Where("provider = ? AND trade_no IN ?", provider, tradeNos).Find(&ps).Error
	for _, p := range ps {
		out[p.TradeNo] = p
	}
	return out, mapErr(err)
}

// RefundsByRequestNo reads, without locking, the refunds recorded under
// any of outRequestNos.
func (s *Store) RefundsByRequestNo(ctx context.Context, outRequestNos []string) (map[string]model.Refund, error) {
	out := make(map[string]model.Refund, len(outRequestNos))
	if len(outRequestNos) == 0 {
		return out, nil
	}
	var recs []refundRecord
	err := s.db.WithContext(ctx).Where("out_request_no IN ?", outRequestNos).Find(&recs).Error
	for _, r := range recs {
		out[r.OutRequestNo] = r.refund()
	}
	return out, mapErr(err)
}

// UnseenPayments lists up to limit payments of provider paid in [from, to)
// that no bill line has matched — money our ledger says moved and Alipay's
// bills do not show — by trade_no, from the first after after ("" for
// the start): a caller pages through them all. With accounts, only the
// payments of those accounts (a bill covers one).
func (s *Store) UnseenPayments(ctx context.Context, provider model.Provider, accounts []string, from, to time.Time, after string, limit int) ([]model.Payment, error) {
	var ps []model.Payment
	err := inAccounts(s.db.WithContext(ctx).Table(paymentTable+" p").Select(paymentColumns), "p.account", accounts).
		Where("p.provider = ? AND p.paid_at >= ? AND p.paid_at < ? AND p.trade_no > ?", provider, from.UTC(), to.UTC(), after).
		Where("NOT EXISTS (SELECT 1 FROM recon_seen s WHERE s.provider = p.provider AND s.kind = ? AND s.ref = p.trade_no)", model.BillPayment).
		Order("p.trade_no").Limit(limit).Find(&ps).Error
	return ps, mapErr(err)
}

// UnseenRefunds lists up to limit refunds of provider we finished as
// REFUNDED in [from, to) that no bill line has matched, by out_request_no,
// from the first after after ("" for the start). Refunds recorded from
// the bill itself (console refunds) are left out. With accounts, only the
// refunds of those accounts.
func (s *Store) UnseenRefunds(ctx context.Context, provider model.Provider, accounts []string, from, to time.Time, after string, limit int) ([]model.Refund, error) {
	var recs []refundRecord
	err := inAccounts(s.db.WithContext(ctx).Table(refundTable+" r"), "r.account", accounts).
		Where("r.provider = ? AND r.state = ? AND r.kind <> ? AND r.update_time >= ? AND r.update_time < ? AND r.out_request_no > ?",
			provider, model.RefundRefunded, model.RefundConsole, from.UTC(), to.UTC(), after).
		Where("NOT EXISTS (SELECT 1 FROM recon_seen s WHERE s.provider = r.provider AND s.kind = ? AND s.ref = r.out_request_no)", model.BillRefund).
		Order("r.out_request_no").Limit(limit).Find(&recs).Error
	out := make([]model.Refund, len(recs))
	for i, r := range recs {
		out[i] = r.refund()
	}
	return out, mapErr(err)
}

// LedgerTotals counts and sums provider's payments paid in [from, to) and
// its refunds finished REFUNDED in it (with accounts, those accounts'
// only). SQLite keeps money as text, which SUM would read as floats: it
// sums cents as integers instead.
func (s *Store) LedgerTotals(ctx context.Context, provider model.Provider, accounts []string, from, to time.Time) (model.LedgerTotals, error) {
	sum := "COALESCE(SUM(amount), 0)"
	if s.driver == DriverSQLite {
		sum = "COALESCE(SUM(CAST(REPLACE(amount, '.', '') AS INTEGER)), 0)"
	}
	var t model.LedgerTotals
	var pays, refunds int64
	var paySum, refundSum decimal.Decimal
	row := inAccounts(s.db.WithContext(ctx).Table(paymentTable).Select("COUNT(*), "+sum), "account", accounts).
		Where("provider = ? AND paid_at >= ? AND paid_at < ?", provider, from.UTC(), to.UTC()).Row()
	if err := row.Scan(&pays, &paySum); err != nil {
		return t, mapErr(err)
	}
	row = inAccounts(s.db.WithContext(ctx).Table(refundTable).Select("COUNT(*), "+sum), "account", accounts).
		Where("provider = ? AND state = ? AND update_time >= ? AND update_time < ?", provider, model.RefundRefunded, from.UTC(), to.UTC()).Row()
	if err := row.Scan(&refunds, &refundSum); err != nil {
		return t, mapErr(err)
	}
	if s.driver == DriverSQLite {
		paySum, refundSum = paySum.Shift(-2), refundSum.Shift(-2)
	}
	return model.LedgerTotals{Payments: int(pays), PaymentAmount: paySum, Refunds: int(refunds), RefundAmount: refundSum}, nil
}

// inAccounts limits q to rows whose column is one of accounts; none, no
// limit.
func inAccounts(q *gorm.DB, column string, accounts []string) *gorm.DB {
	if len(accounts) == 0 {
		return q
	}
	return q.Where(column+" IN ?", accounts)
}
