package dao

import (
	"context"
	"time"

	"paynotify/model"
)

const refundChangeTable = "oms_refund_change"

type refundChangeRecord struct {
	ID           int64 `gorm:"primaryKey"`
	OutRequestNo string
	FromState    string
	ToState      string
	ChangedBy    string
	Note         string
	CreateTime   time.Time
}

func (refundChangeRecord) TableName() string { return refundChangeTable }

// insertRefundChange appends one state change of a refund; the caller runs
// it in the transaction of the change, and only when the change was made.
func (s *Store) insertRefundChange(ctx context.Context, outRequestNo string, from, to model.RefundState, by, note string, at time.Time) error {
	return mapErr(s.db.WithContext(ctx).Create(&refundChangeRecord{OutRequestNo: outRequestNo, FromState: string(from),
		ToState: string(to), ChangedBy: by, Note: model.TruncateChars(note, model.MaxNote), CreateTime: at.UTC()}).Error)
}

// RefundChanges lists the state changes of the refunds named, oldest first
// (plain read).
func (s *Store) RefundChanges(ctx context.Context, outRequestNos []string) ([]model.RefundChange, error) {
	if len(outRequestNos) == 0 {
		return nil, nil
	}
	var recs []refundChangeRecord
	if err := s.db.WithContext(ctx).Where("out_request_no IN ?", outRequestNos).Order("id").Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.RefundChange, len(recs))
	for i, r := range recs {
		out[i] = model.RefundChange{ID: r.ID, OutRequestNo: r.OutRequestNo, From: model.RefundState(r.FromState),
			To: model.RefundState(r.ToState), By: r.ChangedBy, Note: r.Note, CreateTime: r.CreateTime}
	}
	return out, nil
}
