package dao

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"

	"paynotify/model"
)

// Reads for the operator console. None of them locks; each is bounded by
// an index named in migrations/*/00007_console.sql.

// centsSum is an SQL expression summing a money column as whole cents,
// exactly: MySQL sums DECIMAL exactly; SQLite keeps money as text written
// with two decimals, and would sum it as a float, so the dot is dropped
// and the digits summed as integers.
func (s *Store) centsSum(col string) string {
	if s.driver == DriverSQLite {
		return "COALESCE(SUM(CAST(REPLACE(" + col + ", '.', '') AS INTEGER)), 0)"
	}
	return "COALESCE(CAST(SUM(" + col + ") * 100 AS SIGNED), 0)"
}

func cents(n int64) decimal.Decimal { return decimal.New(n, -2) }

// PaymentTallies counts and sums the payments recorded since a time, by
// state and reason.
func (s *Store) PaymentTallies(ctx context.Context, since time.Time) ([]model.PaymentTally, error) {
	var rows []struct {
		State  string
		Reason string
		N      int64
		Cents  int64
	}
	err := s.db.WithContext(ctx).Table(paymentTable).
		Select("state, reason, COUNT(*) AS n, "+s.centsSum("amount")+" AS cents").
		Where("create_time >= ?", since.UTC()).Group("state, reason").Scan(&rows).Error
	out := make([]model.PaymentTally, len(rows))
	for i, r := range rows {
		out[i] = model.PaymentTally{State: model.PaymentState(r.State), Reason: model.RefundReason(r.Reason),
			Tally: model.Tally{Count: r.N, Amount: cents(r.Cents)}}
	}
	return out, mapErr(err)
}

// RefundedSince counts and sums the refunds that ended REFUNDED since a
// time.
func (s *Store) RefundedSince(ctx context.Context, since time.Time) (model.Tally, error) {
	var r struct {
		N     int64
		Cents int64
	}
	err := s.db.WithContext(ctx).Table(refundTable).Select("COUNT(*) AS n, "+s.centsSum("amount")+" AS cents").
		Where("state = ? AND update_time >= ?", model.RefundRefunded, since.UTC()).Scan(&r).Error
	return model.Tally{Count: r.N, Amount: cents(r.Cents)}, mapErr(err)
}

// PaymentMarks lists when each payment since a time was recorded, and how
// it was decided, oldest first (for the per-minute chart).
func (s *Store) PaymentMarks(ctx context.Context, since time.Time) ([]model.PaymentMark, error) {
	var rows []struct {
		CreateTime time.Time
		State      string
		Reason     string
	}
	err := s.db.WithContext(ctx).Table(paymentTable).Select("create_time, state, reason").
		Where("create_time >= ?", since.UTC()).Order("create_time").Scan(&rows).Error
	out := make([]model.PaymentMark, len(rows))
	for i, r := range rows {
		out[i] = model.PaymentMark{At: r.CreateTime, State: model.PaymentState(r.State), Reason: model.RefundReason(r.Reason)}
	}
	return out, mapErr(err)
}

// queueCount counts the rows of table matching where and finds the oldest
// create_time among them.
func (s *Store) queueCount(ctx context.Context, table, where string, args ...any) (model.QueueCount, error) {
	var r struct {
		N      int64
		Oldest *string
	}
	// MIN over a DATETIME comes back as text on SQLite: parse it ourselves.
	err := s.db.WithContext(ctx).Table(table).Select("COUNT(*) AS n, MIN(create_time) AS oldest").
		Where(where, args...).Scan(&r).Error
	if err != nil {
		return model.QueueCount{}, mapErr(err)
	}
	q := model.QueueCount{Count: r.N}
	if r.Oldest != nil {
		t, err := parseDBTime(*r.Oldest)
		if err != nil {
			return q, err
		}
		q.Oldest = &t
	}
	return q, nil
}

// parseDBTime reads a time as MySQL or SQLite renders it in an aggregate.
func parseDBTime(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999", time.RFC3339Nano} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("unreadable time %q", s)
}

// RefundQueue counts the refunds in a state (REFUND_FAILED: those not yet
// resolved by an operator).
func (s *Store) RefundQueue(ctx context.Context, state model.RefundState) (model.QueueCount, error) {
	if state == model.RefundFailed {
		return s.queueCount(ctx, refundTable, "state = ? AND resolved_time IS NULL", state)
	}
	return s.queueCount(ctx, refundTable, "state = ?", state)
}

// PaymentQueue counts the payments in a state.
func (s *Store) PaymentQueue(ctx context.Context, state model.PaymentState) (model.QueueCount, error) {
	return s.queueCount(ctx, paymentTable, "state = ?", state)
}

// OutboxQueue counts the outbox rows in a state. Sent rows are history
// that grows with every event: they are counted up to sentCountCap only.
func (s *Store) OutboxQueue(ctx context.Context, state model.OutboxState) (model.QueueCount, error) {
	if state != model.OutboxSent {
		return s.queueCount(ctx, outboxTable, "state = ?", state)
	}
	var n int64
	sub := s.db.WithContext(ctx).Table(outboxTable).Select("id").Where("state = ?", state).Limit(sentCountCap + 1)
	if err := s.db.WithContext(ctx).Table("(?) AS t", sub).Count(&n).Error; err != nil {
		return model.QueueCount{}, mapErr(err)
	}
	if n > sentCountCap {
		return model.QueueCount{Count: sentCountCap, AtLeast: true}, nil
	}
	return model.QueueCount{Count: n}, nil
}

// sentCountCap is how far the sent outbox rows are counted.
const sentCountCap = 10000

// OrderByID reads an order by id without locking.
func (s *Store) OrderByID(ctx context.Context, id int64) (model.Order, error) {
	var o model.Order
	err := s.db.WithContext(ctx).Table(orderTable).Select(orderColumns).Where("id = ?", id).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return o, fmt.Errorf("%w: id %d", model.ErrOrderNotFound, id)
	}
	return o, mapErr(err)
}

// OrdersByMember lists a member's orders, newest first, with an id below
// before (0: from the newest).
func (s *Store) OrdersByMember(ctx context.Context, memberID, before int64, limit int) ([]model.Order, error) {
	q := s.db.WithContext(ctx).Table(orderTable).Select(orderColumns).Where("member_id = ?", memberID)
	if before > 0 {
		q = q.Where("id < ?", before)
	}
	var out []model.Order
	return out, mapErr(q.Order("id DESC").Limit(limit).Find(&out).Error)
}

// AttemptsByOrder lists an order's payment attempts, first first, with
// when each last changed.
func (s *Store) AttemptsByOrder(ctx context.Context, orderID int64) ([]model.AttemptChange, error) {
	var recs []attemptRecord
	if err := s.db.WithContext(ctx).Where("order_id = ?", orderID).Order("attempt_no").Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.AttemptChange, len(recs))
	for i, r := range recs {
		out[i] = model.AttemptChange{PayAttempt: r.attempt(), UpdateTime: r.UpdateTime}
	}
	return out, nil
}

// PaymentsByOutTradeNo lists the payments recorded under an out_trade_no.
func (s *Store) PaymentsByOutTradeNo(ctx context.Context, outTradeNo string) ([]model.Payment, error) {
	var ps []model.Payment
	err := s.db.WithContext(ctx).Table(paymentTable).Select(paymentColumns).
		Where("out_trade_no = ?", outTradeNo).Order("create_time, trade_no").Limit(20).Find(&ps).Error
	return ps, mapErr(err)
}

// OutboxByOrder lists the events written for an order, oldest first: not
// a reconciliation run's, whose aggregate id is the run's.
func (s *Store) OutboxByOrder(ctx context.Context, orderID int64) ([]model.OutboxRow, error) {
	var recs []outboxRecord
	if err := s.db.WithContext(ctx).Where("aggregate_id = ? AND event_type NOT IN ?", orderID, model.RunEventTypes).
		Order("id").Limit(200).Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	return rows(recs)
}

// OutboxByRun lists the events a reconciliation run wrote (its fees),
// oldest first.
func (s *Store) OutboxByRun(ctx context.Context, runID int64) ([]model.OutboxRow, error) {
	var recs []outboxRecord
	if err := s.db.WithContext(ctx).Where("aggregate_id = ? AND event_type IN ?", runID, model.RunEventTypes).
		Order("id").Limit(200).Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	return rows(recs)
}

// OutboxRow reads one outbox row by its sequence number.
func (s *Store) OutboxRow(ctx context.Context, seq int64) (model.OutboxRow, error) {
	var r outboxRecord
	err := s.db.WithContext(ctx).Where("id = ?", seq).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return model.OutboxRow{}, fmt.Errorf("%w: outbox row %d", model.ErrEventNotFound, seq)
	}
	if err != nil {
		return model.OutboxRow{}, mapErr(err)
	}
	return r.row()
}

// OutboxPage lists outbox rows in a state, oldest first, with a sequence
// number above after.
func (s *Store) OutboxPage(ctx context.Context, state model.OutboxState, after int64, limit int) ([]model.OutboxRow, error) {
	var recs []outboxRecord
	err := s.db.WithContext(ctx).Where("state = ? AND id > ?", state, after).Order("id").Limit(limit).Find(&recs).Error
	if err != nil {
		return nil, mapErr(err)
	}
	return rows(recs)
}

// RefundPage lists refunds in a state, the longest unchanged first,
// skipping offset (REFUND_FAILED: those not yet resolved).
func (s *Store) RefundPage(ctx context.Context, state model.RefundState, offset, limit int) ([]model.Refund, error) {
	q := s.db.WithContext(ctx).Where("state = ?", state)
	if state == model.RefundFailed {
		q = q.Where("resolved_time IS NULL")
	}
	// In the order of the (state, update_time) index: the longest unchanged
	// first, without sorting the state's rows.
	var recs []refundRecord
	if err := q.Order("update_time, out_request_no").Offset(offset).Limit(limit).Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.Refund, len(recs))
	for i, r := range recs {
		out[i] = r.refund()
	}
	return out, nil
}

// PaymentPage lists payments in a state, oldest first, skipping offset.
func (s *Store) PaymentPage(ctx context.Context, state model.PaymentState, offset, limit int) ([]model.Payment, error) {
	var ps []model.Payment
	err := s.db.WithContext(ctx).Table(paymentTable).Select(paymentColumns).Where("state = ?", state).
		Order("create_time, trade_no").Offset(offset).Limit(limit).Find(&ps).Error
	return ps, mapErr(err)
}

// OrderSNs maps order ids to their order_sn.
func (s *Store) OrderSNs(ctx context.Context, ids []int64) (map[int64]string, error) {
	out := make(map[int64]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		ID      int64
		OrderSN string
	}
	err := s.db.WithContext(ctx).Table(orderTable).Select("id, order_sn").Where("id IN ?", ids).Scan(&rows).Error
	for _, r := range rows {
		out[r.ID] = r.OrderSN
	}
	return out, mapErr(err)
}

// reconRows reads items joined to their run's bill date.
func (s *Store) reconRows(q *gorm.DB) ([]model.ReconRow, error) {
	// A named embedded field: GORM cannot set the fields of an anonymous
	// one of an unexported type.
	var recs []struct {
		Item         itemRecord `gorm:"embedded"`
		Provider     string
		Account      string
		BillDate     string
		PaymentState *string
	}
	if err := q.Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.ReconRow, len(recs))
	for i, r := range recs {
		out[i] = model.ReconRow{ReconItem: r.Item.item(), Provider: model.Provider(r.Provider), Account: r.Account, BillDate: r.BillDate, CreateTime: r.Item.CreateTime}
		if r.PaymentState != nil {
			out[i].PaymentState = model.PaymentState(*r.PaymentState)
		}
	}
	return out, nil
}

func (s *Store) reconItems(ctx context.Context) *gorm.DB {
	return s.db.WithContext(ctx).Table(itemTable + " AS i").Select("i.*, r.provider, r.account, r.bill_date, p.state AS payment_state").
		Joins("JOIN " + runTable + " r ON r.id = i.run_id").
		Joins("LEFT JOIN oms_order_payment p ON p.provider = r.provider AND p.trade_no = i.trade_no AND i.trade_no <> ''")
}

// ReconItemsOf lists the reconciliation items about any of these trades
// or refunds, oldest first.
func (s *Store) ReconItemsOf(ctx context.Context, tradeNos, outRequestNos []string) ([]model.ReconRow, error) {
	if len(tradeNos) == 0 && len(outRequestNos) == 0 {
		return nil, nil
	}
	// IN () is not SQL: an empty list matches nothing either way.
	tradeNos, outRequestNos = append(tradeNos, ""), append(outRequestNos, "")
	return s.reconRows(s.reconItems(ctx).Where("(i.trade_no IN ? AND i.trade_no != '') OR (i.out_request_no IN ? AND i.out_request_no != '')",
		tradeNos, outRequestNos).Order("i.id").Limit(200))
}

// ReconItem reads one reconciliation item with its bill date.
func (s *Store) ReconItem(ctx context.Context, id int64) (model.ReconRow, error) {
	rows, err := s.reconRows(s.reconItems(ctx).Where("i.id = ?", id))
	if err == nil && len(rows) == 0 {
		err = fmt.Errorf("%w: %d", model.ErrItemNotFound, id)
	}
	if err != nil {
		return model.ReconRow{}, err
	}
	return rows[0], nil
}

// ReconRowsOfRun lists up to limit items of one run in the order it
// found them, with its bill date and where each trade stands now: of one
// outcome if set.
func (s *Store) ReconRowsOfRun(ctx context.Context, runID int64, outcome model.ReconOutcome, limit int) ([]model.ReconRow, error) {
	q := s.reconItems(ctx).Where("i.run_id = ?", runID)
	if outcome != "" {
		q = q.Where("i.outcome = ?", outcome)
	}
	return s.reconRows(q.Order("i.id").Limit(limit))
}

// ReconItemPage lists reconciliation items across runs, newest bill date
// first, skipping offset: of one outcome if set, and only those needing
// an operator (unresolved, and not REPAIRED — the repair resolved those)
// if open.
func (s *Store) ReconItemPage(ctx context.Context, outcome model.ReconOutcome, open bool, offset, limit int) ([]model.ReconRow, error) {
	q := s.reconItems(ctx)
	if outcome != "" {
		q = q.Where("i.outcome = ?", outcome)
	}
	if open {
		q = q.Where(needsLook("i."), model.ReconRepaired)
	}
	return s.reconRows(q.Order("r.bill_date DESC, i.id").Offset(offset).Limit(limit))
}

// needsLook is the condition (one argument: model.ReconRepaired) of an
// item an operator has to look at: unresolved, and not REPAIRED (a repair
// needs nothing more). Every count and list of open items uses it, so the
// overview, a run's unresolved count and the queue agree.
func needsLook(alias string) string {
	return alias + "resolved_at IS NULL AND " + alias + "outcome <> ?"
}

// ReconQueue counts the reconciliation items that need an operator:
// unresolved, and not REPAIRED.
func (s *Store) ReconQueue(ctx context.Context) (model.QueueCount, error) {
	return s.queueCount(ctx, itemTable, needsLook(""), model.ReconRepaired)
}

// ReconQueueOf counts the items ReconQueue does of a's runs.
func (s *Store) ReconQueueOf(ctx context.Context, a model.BillAccount) (int64, error) {
	var n int64
	err := runsOf(s.db.WithContext(ctx).Table(itemTable+" AS i").Joins("JOIN "+runTable+" AS r ON r.id = i.run_id"), "r.", a).
		Where(needsLook("i."), model.ReconRepaired).Count(&n).Error
	return n, mapErr(err)
}

// ReconItemCount counts what ReconItemPage lists.
func (s *Store) ReconItemCount(ctx context.Context, outcome model.ReconOutcome, open bool) (int64, error) {
	q := s.db.WithContext(ctx).Table(itemTable + " AS i")
	if outcome != "" {
		q = q.Where("i.outcome = ?", outcome)
	}
	if open {
		q = q.Where(needsLook("i."), model.ReconRepaired)
	}
	var n int64
	return n, mapErr(q.Count(&n).Error)
}
