package dao

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"paynotify/model"
)

// Tables of reconciliation (migration 00006).
const (
	runTable          = "recon_run"
	reconAttemptTable = "recon_attempt"
	itemTable         = "recon_item"
	seenTable         = "recon_seen"
)

type runRecord struct {
	ID                  int64 `gorm:"primaryKey"`
	Provider            string
	Account             string
	BillDate            string
	State               string
	Attempts            int
	Owner               string
	LeaseUntil          time.Time
	StartedAt           *time.Time
	FinishedAt          *time.Time
	Error               string
	BillPayments        int
	BillPaymentAmount   decimal.Decimal
	BillRefunds         int
	BillRefundAmount    decimal.Decimal
	BillFees            decimal.Decimal
	LedgerPayments      int
	LedgerPaymentAmount decimal.Decimal
	LedgerRefunds       int
	LedgerRefundAmount  decimal.Decimal
	// SeenPurge is how far the retention job has deleted the date's
	// recon_seen lines (PurgeReconciledLines): '' (kept), seenPurging,
	// seenPurged. Once not '', the date is never run again.
	SeenPurge  string
	CreateTime time.Time
	UpdateTime time.Time
}

func (runRecord) TableName() string { return runTable }

func (r runRecord) run() model.ReconRun {
	return model.ReconRun{
		ID: r.ID, Provider: model.Provider(r.Provider), Account: r.Account, BillDate: r.BillDate, State: model.ReconState(r.State),
		Attempts: r.Attempts, Owner: r.Owner, LeaseUntil: r.LeaseUntil, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		Error: r.Error,
		Bill: model.BillTotals{Payments: r.BillPayments, PaymentReceived: r.BillPaymentAmount, Refunds: r.BillRefunds,
			RefundReceived: r.BillRefundAmount, Fees: r.BillFees},
		Ledger: model.LedgerTotals{Payments: r.LedgerPayments, PaymentAmount: r.LedgerPaymentAmount,
			Refunds: r.LedgerRefunds, RefundAmount: r.LedgerRefundAmount},
		Counts: map[model.ReconOutcome]int{},
	}
}

type reconAttemptRecord struct {
	ID         int64 `gorm:"primaryKey"`
	RunID      int64
	AttemptNo  int
	Owner      string
	State      string
	Error      string
	Items      int
	Repaired   int
	StartedAt  time.Time
	FinishedAt *time.Time
}

func (reconAttemptRecord) TableName() string { return reconAttemptTable }

type itemRecord struct {
	ID           int64 `gorm:"primaryKey"`
	RunID        int64
	AttemptNo    int
	Outcome      string
	Ref          string
	TradeNo      string
	OutTradeNo   string
	OutRequestNo string
	BillAmount   *decimal.Decimal
	LedgerAmount *decimal.Decimal
	Detail       string
	ResolvedAt   *time.Time
	ResolvedBy   string
	Note         string
	CreateTime   time.Time
	UpdateTime   time.Time
}

func (itemRecord) TableName() string { return itemTable }

func (r itemRecord) item() model.ReconItem {
	return model.ReconItem{
		ID: r.ID, RunID: r.RunID, AttemptNo: r.AttemptNo, Outcome: model.ReconOutcome(r.Outcome), Ref: r.Ref,
		TradeNo: r.TradeNo, OutTradeNo: r.OutTradeNo, OutRequestNo: r.OutRequestNo, BillAmount: r.BillAmount,
		LedgerAmount: r.LedgerAmount, Detail: r.Detail, ResolvedAt: r.ResolvedAt, ResolvedBy: r.ResolvedBy, Note: r.Note,
	}
}

// runsOf limits a query of recon_run (alias "r." or "") to o's runs.
func runsOf(db *gorm.DB, alias string, o model.BillAccount) *gorm.DB {
	return db.Where(alias+"provider = ? AND "+alias+"account IN ?", o.Provider, o.RunAccounts())
}

// ClaimRun claims o's run of billDate for owner until
// now+lease — creating it if absent — unless another owner holds it with a
// lease not yet ended (model.ErrRunBusy). The claim is a compare-and-set
// on state and lease, so of two instances at once exactly one gets it. It
// counts the attempt and records it in the history, and returns the run
// and the attempt's number. An operator's ask (audit, nil for the daily
// job) is written to admin_audit in the claim's transaction: a run that
// was not claimed records nothing.
func (s *Store) ClaimRun(ctx context.Context, o model.BillAccount, billDate, owner string, now time.Time, lease time.Duration,
	audit *model.Audit) (model.ReconRun, int, error) {
	var run model.ReconRun
	provider, account := o.Provider, o.Account
	err := s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		now := now.UTC()
		if o.Legacy && account != "" {
			var own int64
			if err := tx.db.WithContext(ctx).Table(runTable).Where("provider = ? AND account = ? AND bill_date = ?", provider, account, billDate).
				Count(&own).Error; err != nil {
				return mapErr(err)
			}
			if own == 0 {
				// The date's run from before runs were kept per account is
				// this account's, and so are the bill lines it matched: they
				// become so (of two claims at once, one moves them, the other
				// finds them moved). Once the account has a run of the date,
				// a legacy one left beside it (an older binary's, during an
				// upgrade) stays as it is.
				for _, table := range []string{runTable, seenTable} {
					if err := tx.db.WithContext(ctx).Table(table).Where("provider = ? AND account = '' AND bill_date = ?", provider, billDate).
						Update("account", account).Error; err != nil {
						return mapErr(err)
					}
				}
			}
		}
		if _, err := tx.insertOrKeep(ctx, runTable, []string{"provider", "account", "bill_date"}, map[string]any{
			"provider": provider, "account": account, "bill_date": billDate, "state": model.ReconFailed, "lease_until": now,
			"create_time": now, "update_time": now,
		}); err != nil {
			return err
		}
		res := tx.db.WithContext(ctx).Table(runTable).
			Where("provider = ? AND account = ? AND bill_date = ? AND (state <> ? OR lease_until < ?) AND seen_purge = ''",
				provider, account, billDate, model.ReconRunning, now).
			Updates(map[string]any{
				"state": model.ReconRunning, "owner": owner, "lease_until": now.Add(lease), "attempts": gorm.Expr("attempts + 1"),
				"started_at": now, "finished_at": nil, "error": "", "update_time": now,
			})
		if res.Error != nil {
			return mapErr(res.Error)
		}
		// A locking read, which reads the latest committed row: the count
		// above opened this transaction's snapshot (REPEATABLE READ), maybe
		// before another instance's claim of the date committed the row
		// our insert then found, and a plain read would not see it.
		var r runRecord
		if err := tx.db.WithContext(ctx).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).
			Where("provider = ? AND account = ? AND bill_date = ?", provider, account, billDate).Take(&r).Error; err != nil {
			return mapErr(err)
		}
		if res.RowsAffected != 1 {
			if r.SeenPurge != "" {
				return fmt.Errorf("%w: %s %s", model.ErrRunPurged, provider, billDate)
			}
			return fmt.Errorf("%w: %s %s", model.ErrRunBusy, provider, billDate)
		}
		run = r.run()
		if audit != nil {
			if err := tx.insertAudit(ctx, *audit); err != nil {
				return err
			}
		}
		// An attempt still RUNNING here was abandoned: its instance died
		// (or lost its lease) without finishing, and would otherwise stay
		// RUNNING in the history forever.
		if err := tx.db.WithContext(ctx).Table(reconAttemptTable).Where("run_id = ? AND state = ?", r.ID, model.ReconRunning).
			Updates(map[string]any{"state": model.ReconAbandoned, "finished_at": now,
				"error": "abandoned: its instance stopped before finishing, and attempt " + strconv.Itoa(r.Attempts) + " took the run"}).Error; err != nil {
			return mapErr(err)
		}
		return mapErr(tx.db.WithContext(ctx).Create(&reconAttemptRecord{
			RunID: r.ID, AttemptNo: r.Attempts, Owner: owner, State: string(model.ReconRunning), StartedAt: now,
		}).Error)
	})
	return run, run.Attempts, err
}

// RenewRun extends owner's lease on a running run; model.ErrRunLost if
// another instance took it meanwhile.
func (s *Store) RenewRun(ctx context.Context, runID int64, owner string, until time.Time) error {
	res := s.db.WithContext(ctx).Table(runTable).Where("id = ? AND owner = ? AND state = ?", runID, owner, model.ReconRunning).
		Updates(map[string]any{"lease_until": until.UTC()})
	if res.Error != nil {
		return mapErr(res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	// MySQL counts a row updated to what it holds as unaffected: ask.
	var n int64
	if err := s.db.WithContext(ctx).Table(runTable).Where("id = ? AND owner = ? AND state = ?", runID, owner, model.ReconRunning).
		Count(&n).Error; err != nil {
		return mapErr(err)
	}
	if n != 1 {
		return fmt.Errorf("%w: run %d", model.ErrRunLost, runID)
	}
	return nil
}

// CountAttempt adds what an attempt has just committed to its row — items
// saved, payments repaired — so the history tells the truth even of an
// attempt that never finishes.
func (s *Store) CountAttempt(ctx context.Context, runID int64, attemptNo, items, repaired int) error {
	if items == 0 && repaired == 0 {
		return nil
	}
	return mapErr(s.db.WithContext(ctx).Table(reconAttemptTable).Where("run_id = ? AND attempt_no = ?", runID, attemptNo).
		Updates(map[string]any{"items": gorm.Expr("items + ?", items), "repaired": gorm.Expr("repaired + ?", repaired)}).Error)
}

// RunResult is how an attempt ended.
type RunResult struct {
	State    model.ReconState
	Error    string
	Bill     model.BillTotals
	Ledger   model.LedgerTotals
	Items    int
	Repaired int
}

// FinishRun records how owner's attempt attemptNo ended, if owner still
// holds the run (else model.ErrRunLost). Items of earlier attempts that
// this one did not find again, and nobody resolved, are dropped: a run
// recomputes its items.
func (s *Store) FinishRun(ctx context.Context, runID int64, owner string, attemptNo int, r RunResult, now time.Time) error {
	now = now.UTC()
	return s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		res := tx.db.WithContext(ctx).Table(runTable).Where("id = ? AND owner = ? AND state = ?", runID, owner, model.ReconRunning).
			Updates(map[string]any{
				"state": r.State, "error": model.Truncate(r.Error, 500), "finished_at": now, "lease_until": now, "update_time": now,
				"bill_payments": r.Bill.Payments, "bill_payment_amount": r.Bill.PaymentReceived.StringFixed(2),
				"bill_refunds": r.Bill.Refunds, "bill_refund_amount": r.Bill.RefundReceived.StringFixed(2),
				"bill_fees":       r.Bill.Fees.StringFixed(2),
				"ledger_payments": r.Ledger.Payments, "ledger_payment_amount": r.Ledger.PaymentAmount.StringFixed(2),
				"ledger_refunds": r.Ledger.Refunds, "ledger_refund_amount": r.Ledger.RefundAmount.StringFixed(2),
			})
		if res.Error != nil {
			return mapErr(res.Error)
		}
		if res.RowsAffected != 1 {
			return fmt.Errorf("%w: run %d", model.ErrRunLost, runID)
		}
		if err := tx.db.WithContext(ctx).Table(reconAttemptTable).Where("run_id = ? AND attempt_no = ?", runID, attemptNo).
			Updates(map[string]any{"state": r.State, "error": model.Truncate(r.Error, 500), "items": r.Items, "repaired": r.Repaired, "finished_at": now}).Error; err != nil {
			return mapErr(err)
		}
		if r.State != model.ReconDone {
			// A failed attempt read nothing: the items of the last good one stand.
			return nil
		}
		return mapErr(tx.db.WithContext(ctx).Where("run_id = ? AND attempt_no < ? AND resolved_at IS NULL", runID, attemptNo).
			Delete(&itemRecord{}).Error)
	})
}

// SaveItems records what an attempt found, one row per (run, outcome,
// ref): found again, a row takes the new amounts and attempt and keeps
// its resolution.
func (s *Store) SaveItems(ctx context.Context, items []model.ReconItem) error {
	if len(items) == 0 {
		return nil
	}
	now := time.Now().UTC()
	recs := make([]itemRecord, len(items))
	for i, it := range items {
		recs[i] = itemRecord{
			RunID: it.RunID, AttemptNo: it.AttemptNo, Outcome: string(it.Outcome), Ref: it.Ref, TradeNo: it.TradeNo,
			OutTradeNo: it.OutTradeNo, OutRequestNo: it.OutRequestNo, BillAmount: it.BillAmount, LedgerAmount: it.LedgerAmount,
			Detail: model.Truncate(it.Detail, 500), ResolvedAt: it.ResolvedAt, ResolvedBy: it.ResolvedBy, Note: it.Note,
			CreateTime: now, UpdateTime: now,
		}
	}
	return mapErr(s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "run_id"}, {Name: "outcome"}, {Name: "ref"}},
		DoUpdates: clause.AssignmentColumns([]string{"attempt_no", "trade_no", "out_trade_no", "out_request_no",
			"bill_amount", "ledger_amount", "detail", "update_time"}),
	}).CreateInBatches(&recs, 200).Error)
}

// ReconRun reads o's run of billDate with its item counts.
func (s *Store) ReconRun(ctx context.Context, o model.BillAccount, billDate string) (model.ReconRun, error) {
	var r runRecord
	// Its own before a legacy one ('' sorts first), were both there.
	err := runsOf(s.db.WithContext(ctx), "", o).Where("bill_date = ?", billDate).Order("account DESC").Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return model.ReconRun{}, fmt.Errorf("%w: %s %s", model.ErrRunNotFound, o, billDate)
	}
	if err != nil {
		return model.ReconRun{}, mapErr(err)
	}
	runs := []model.ReconRun{r.run()}
	return runs[0], s.countItems(ctx, runs)
}

// ReconRuns lists up to limit runs of o, newest bill date first, with
// their item counts.
func (s *Store) ReconRuns(ctx context.Context, o model.BillAccount, limit int) ([]model.ReconRun, error) {
	return s.reconRuns(ctx, runsOf(s.db.WithContext(ctx), "", o), limit)
}

// ProviderRuns lists up to limit runs of provider, every account's, newest
// bill date first (a date's runs by account), with their item counts.
func (s *Store) ProviderRuns(ctx context.Context, provider model.Provider, limit int) ([]model.ReconRun, error) {
	return s.reconRuns(ctx, s.db.WithContext(ctx).Where("provider = ?", provider), limit)
}

func (s *Store) reconRuns(ctx context.Context, q *gorm.DB, limit int) ([]model.ReconRun, error) {
	var recs []runRecord
	if err := q.Order("bill_date DESC, account").Limit(limit).Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	runs := make([]model.ReconRun, len(recs))
	for i, r := range recs {
		runs[i] = r.run()
	}
	return runs, s.countItems(ctx, runs)
}

// countItems fills each run's counts per outcome and unresolved count
// (the items that need a look: the queue's).
func (s *Store) countItems(ctx context.Context, runs []model.ReconRun) error {
	if len(runs) == 0 {
		return nil
	}
	ids := make([]int64, len(runs))
	at := make(map[int64]*model.ReconRun, len(runs))
	for i := range runs {
		ids[i] = runs[i].ID
		at[runs[i].ID] = &runs[i]
	}
	rows, err := s.db.WithContext(ctx).Table(itemTable).
		Select("run_id, outcome, COUNT(*), SUM(CASE WHEN "+needsLook("")+" THEN 1 ELSE 0 END)", model.ReconRepaired).
		Where("run_id IN ?", ids).Group("run_id, outcome").Rows()
	if err != nil {
		return mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var outcome string
		var n, open int
		if err := rows.Scan(&id, &outcome, &n, &open); err != nil {
			return mapErr(err)
		}
		at[id].Counts[model.ReconOutcome(outcome)] = n
		at[id].Unresolved += open
	}
	return mapErr(rows.Err())
}

// ReconAttempts lists a run's attempts, first first.
func (s *Store) ReconAttempts(ctx context.Context, runID int64) ([]model.ReconAttempt, error) {
	var recs []reconAttemptRecord
	if err := s.db.WithContext(ctx).Where("run_id = ?", runID).Order("attempt_no").Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.ReconAttempt, len(recs))
	for i, r := range recs {
		out[i] = model.ReconAttempt{AttemptNo: r.AttemptNo, Owner: r.Owner, State: model.ReconState(r.State), Error: r.Error,
			Items: r.Items, Repaired: r.Repaired, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
	}
	return out, nil
}

// ReconItems lists up to limit items of a run, of one outcome if outcome
// is not empty, by id.
func (s *Store) ReconItems(ctx context.Context, runID int64, outcome model.ReconOutcome, limit int) ([]model.ReconItem, error) {
	q := s.db.WithContext(ctx).Where("run_id = ?", runID)
	if outcome != "" {
		q = q.Where("outcome = ?", outcome)
	}
	var recs []itemRecord
	if err := q.Order("id").Limit(limit).Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.ReconItem, len(recs))
	for i, r := range recs {
		out[i] = r.item()
	}
	return out, nil
}

// RunDates lists the bill dates of o's runs in state since (inclusive,
// yyyy-MM-dd), oldest first.
func (s *Store) RunDates(ctx context.Context, o model.BillAccount, state model.ReconState, since string) ([]string, error) {
	var dates []string
	err := runsOf(s.db.WithContext(ctx).Table(runTable), "", o).Where("state = ? AND bill_date >= ?", state, since).
		Order("bill_date").Pluck("bill_date", &dates).Error
	return dates, mapErr(err)
}
