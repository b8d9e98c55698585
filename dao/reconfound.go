package dao

import (
	"context"
	"time"

	"paynotify/model"
)

// ResolveFoundElsewhere resolves, as by reconciliation with note, the open
// MISSING_AT_PROVIDER and REFUND_MISSING_AT_PROVIDER items of provider's runs
// of bill dates [fromDate, toDate] other than run runID whose line a bill
// has matched since (recon_seen) — a payment or refund recorded near
// midnight, or confirmed late, that the next or previous day's bill holds,
// when that day was reconciled after this one. It returns how many it
// resolved.
func (s *Store) ResolveFoundElsewhere(ctx context.Context, provider model.Provider, runID int64, fromDate, toDate, note string, now time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`UPDATE recon_item SET resolved_at = ?, resolved_by = ?, note = ?, update_time = ?
WHERE resolved_at IS NULL
  AND run_id IN (SELECT id FROM recon_run WHERE provider = ? AND bill_date >= ? AND bill_date <= ? AND id <> ?)
  AND ((outcome = ? AND EXISTS (SELECT 1 FROM recon_seen s WHERE s.provider = ? AND s.kind = ? AND s.ref = recon_item.ref))
    OR (outcome = ? AND EXISTS (SELECT 1 FROM recon_seen s WHERE s.provider = ? AND s.kind = ? AND s.ref = recon_item.ref)))`,
		now.UTC(), reconResolver, model.Truncate(note, 500), now.UTC(),
		provider, fromDate, toDate, runID,
		model.ReconMissingAtProvider, provider, model.BillPayment,
		model.ReconRefundMissingAtProvider, provider, model.BillRefund)
	return res.RowsAffected, mapErr(res.Error)
}

// reconResolver is who resolves the items reconciliation settles itself.
const reconResolver = "reconciliation"
