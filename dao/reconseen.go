package dao

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"paynotify/model"
)

// RecordSeen records bill lines matched to the ledger, under the
// account whose bill they are, in one transaction
// with the event that books their fees: only lines not recorded before are
// recorded, and newEvent (if it returns an event) is given just those.
// The first try assumes every line is new (one INSERT, the common case of
// a first run); if some were recorded before (a re-run), it rolls back and
// reads which first. Two runs recording one line at once cannot both
// record it: the second finds the first's row and rolls back as
// model.ErrRetryable.
func (s *Store) RecordSeen(ctx context.Context, provider model.Provider, account, billDate string, lines []model.SeenLine, newEvent func(recorded []model.SeenLine) (*model.Event, error)) ([]model.SeenLine, error) {
	if len(lines) == 0 {
		return nil, nil
	}
	fresh, err := s.recordSeen(ctx, provider, account, billDate, lines, false, newEvent)
	if errors.Is(err, errSeenBefore) {
		fresh, err = s.recordSeen(ctx, provider, account, billDate, lines, true, newEvent)
	}
	return fresh, err
}

// errSeenBefore rolls back an optimistic RecordSeen that met lines
// recorded before.
var errSeenBefore = errors.New("dao: bill lines recorded before")

// recordSeen is one try of RecordSeen: lookFirst reads which lines are
// recorded already and leaves them out.
func (s *Store) recordSeen(ctx context.Context, provider model.Provider, account, billDate string, lines []model.SeenLine, lookFirst bool, newEvent func([]model.SeenLine) (*model.Event, error)) ([]model.SeenLine, error) {
	var fresh []model.SeenLine
	err := s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		fresh = fresh[:0]
		type key struct{ kind, ref string }
		known := map[key]bool{}
		if lookFirst {
			var pays, refunds []string
			for _, l := range lines {
				if l.Kind == model.BillRefund {
					refunds = append(refunds, l.Ref)
				} else {
					pays = append(pays, l.Ref)
				}
			}
			for kind, refs := range map[model.BillKind][]string{model.BillPayment: pays, model.BillRefund: refunds} {
				if len(refs) == 0 {
					continue
				}
				var got []string
				if err := tx.db.WithContext(ctx).Table(seenTable).Where("provider = ? AND kind = ? AND ref IN ?", provider, kind, refs).
					Pluck("ref", &got).Error; err != nil {
					return mapErr(err)
				}
				for _, r := range got {
					known[key{string(kind), r}] = true
				}
			}
		}
		now := time.Now().UTC()
		var q strings.Builder
		args := make([]any, 0, len(lines)*9)
		q.WriteString("INSERT INTO recon_seen (provider, account, kind, ref, bill_date, trade_no, amount, fee, create_time) VALUES ")
		for _, l := range lines {
			k := key{string(l.Kind), l.Ref}
			if known[k] {
				continue
			}
			known[k] = true // a line twice in one batch is recorded once
			if len(fresh) > 0 {
				q.WriteString(",")
			}
			fresh = append(fresh, l)
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, provider, account, string(l.Kind), l.Ref, billDate, l.TradeNo, l.Amount.StringFixed(2), l.Fee.StringFixed(2), now)
		}
		if len(fresh) == 0 {
			return nil
		}
		// A row recorded before is kept, not an error; the count tells.
		if s.driver == DriverMySQL {
			q.WriteString(" ON DUPLICATE KEY UPDATE ref = ref")
		} else {
			q.WriteString(" ON CONFLICT (provider, kind, ref) DO NOTHING")
		}
		res := tx.db.WithContext(ctx).Exec(q.String(), args...)
		if res.Error != nil {
			return mapErr(res.Error)
		}
		if int(res.RowsAffected) != len(fresh) {
			if !lookFirst {
				return errSeenBefore
			}
			return fmt.Errorf("%w: bill lines recorded meanwhile by another run", errRetryable)
		}
		if newEvent == nil {
			return nil
		}
		ev, err := newEvent(fresh)
		if err != nil || ev == nil {
			return err
		}
		return tx.insertEvents(ctx, *ev)
	})
	return fresh, err
}
