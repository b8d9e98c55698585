package dao

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	sqlite "github.com/glebarez/go-sqlite"
	"github.com/go-sql-driver/mysql"

	"paynotify/model"
)

const auditTable = "admin_audit"

// auditRecord is a row of admin_audit.
type auditRecord struct {
	ID          int64 `gorm:"primaryKey"`
	ActionKey   string
	Operator    string
	Action      string
	OrderID     *int64
	TargetKind  string
	TargetID    string
	BeforeState string
	AfterState  string
	Note        string
	CreateTime  time.Time
}

func (auditRecord) TableName() string { return auditTable }

func (r auditRecord) audit() model.Audit {
	return model.Audit{
		ID: r.ID, Key: r.ActionKey, Operator: r.Operator, Action: model.AuditAction(r.Action), OrderID: r.OrderID,
		TargetKind: r.TargetKind, TargetID: r.TargetID, Before: r.BeforeState, After: r.AfterState, Note: r.Note,
		CreateTime: r.CreateTime,
	}
}

// insertAudit appends an operator action to admin_audit, in the
// transaction of the change it records (OrderTx, OutboxTx and SessionTx
// have it), so both commit or neither does. A key used before is
// model.ErrAlreadyDone (the row is left as it was: the table is
// append-only).
func (s *Store) insertAudit(ctx context.Context, a model.Audit) error {
	rec := auditRecord{
		ActionKey: a.Key, Operator: a.Operator, Action: string(a.Action), OrderID: a.OrderID,
		TargetKind: a.TargetKind, TargetID: a.TargetID, BeforeState: auditState(a.Before), AfterState: auditState(a.After),
		Note: a.Note, CreateTime: time.Now().UTC(),
	}
	// Never cut: the note is the one the change keeps (model.MaxNote,
	// checked where it entered).
	if err := model.CheckNote(a.Note); err != nil {
		return err
	}
	err := s.db.WithContext(ctx).Create(&rec).Error
	if isDuplicate(err) {
		return model.ErrAlreadyDone
	}
	return mapErr(err)
}

// MaxAuditState is how many characters of an action's before and after
// states admin_audit keeps (its before_state and after_state columns).
const MaxAuditState = 2000

// auditState is state as admin_audit keeps it: whole, or its first
// MaxAuditState characters ending in "…" to say it was cut.
func auditState(state string) string {
	if utf8.RuneCountInString(state) <= MaxAuditState {
		return state
	}
	return model.TruncateChars(state, MaxAuditState-1) + "…"
}

// InsertAudit appends an operator action that writes no row of its own
// (a reload of the providers' configuration, which lives in files): its
// audit row alone, before the action is put in force. An action that
// writes rows records itself in their transaction instead (the Tx types'
// InsertAudit).
func (s *Store) InsertAudit(ctx context.Context, a model.Audit) error {
	return s.insertAudit(ctx, a)
}

// AuditByOrder lists the actions recorded against an order, oldest first.
func (s *Store) AuditByOrder(ctx context.Context, orderID int64) ([]model.Audit, error) {
	var recs []auditRecord
	if err := s.db.WithContext(ctx).Where("order_id = ?", orderID).Order("id").Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	return audits(recs), nil
}

// AuditByTarget lists the actions recorded against one row (a payment, a
// refund, an outbox row), oldest first.
func (s *Store) AuditByTarget(ctx context.Context, kind, id string) ([]model.Audit, error) {
	var recs []auditRecord
	if err := s.db.WithContext(ctx).Where("target_kind = ? AND target_id = ?", kind, id).Order("id").Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	return audits(recs), nil
}

// AuditByKey reads the action recorded under a one-time key.
func (s *Store) AuditByKey(ctx context.Context, key string) (model.Audit, error) {
	var rec auditRecord
	if err := s.db.WithContext(ctx).Where("action_key = ?", key).Take(&rec).Error; err != nil {
		return model.Audit{}, mapErr(err)
	}
	return rec.audit(), nil
}

// AuditPage lists up to limit actions, newest first, with an id below
// before (0: from the newest), by one operator if operator is set, with
// sign-ins and sign-outs only if sessions.
func (s *Store) AuditPage(ctx context.Context, operator string, before int64, limit int, sessions bool) ([]model.Audit, error) {
	q := s.db.WithContext(ctx).Order("id DESC").Limit(limit)
	if operator != "" {
		q = q.Where("operator = ?", operator)
	}
	if !sessions {
		q = q.Where("action NOT IN ?", []model.AuditAction{model.AuditSignIn, model.AuditSignOut})
	}
	if before > 0 {
		q = q.Where("id < ?", before)
	}
	var recs []auditRecord
	if err := q.Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	return audits(recs), nil
}

func audits(recs []auditRecord) []model.Audit {
	out := make([]model.Audit, len(recs))
	for i, r := range recs {
		out[i] = r.audit()
	}
	return out
}

// isDuplicate: a unique key refused the row (MySQL 1062; SQLite
// SQLITE_CONSTRAINT_UNIQUE or _PRIMARYKEY).
func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1062
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == 2067 || se.Code() == 1555
	}
	return false
}

// CanTruncateAudit reports whether this store's database user holds DROP
// on admin_audit (globally, on the schema or on the table), which is what
// TRUNCATE TABLE needs. The service needs only SELECT, INSERT, UPDATE and
// DELETE. admin_audit_guard's foreign key stops only a user without
// DROP: one that holds it empties the audit log with SET
// FOREIGN_KEY_CHECKS=0 and TRUNCATE TABLE admin_audit.
// SQLite has no users and no TRUNCATE: false.
func (s *Store) CanTruncateAudit(ctx context.Context) (bool, error) {
	if s.driver != DriverMySQL {
		return false, nil
	}
	var n int64
	err := s.db.WithContext(ctx).Raw(`SELECT COUNT(*) FROM (
		SELECT GRANTEE FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE = 'DROP'
		UNION ALL
		SELECT GRANTEE FROM information_schema.SCHEMA_PRIVILEGES WHERE PRIVILEGE_TYPE = 'DROP' AND TABLE_SCHEMA = DATABASE()
		UNION ALL
		SELECT GRANTEE FROM information_schema.TABLE_PRIVILEGES WHERE PRIVILEGE_TYPE = 'DROP' AND TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?
	) p WHERE GRANTEE = CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')`,
		auditTable).Scan(&n).Error
	return n > 0, mapErr(err)
}
