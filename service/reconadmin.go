package service

import (
	"context"
	"fmt"
	"strconv"

	"paynotify/model"
)

// Runs lists the latest runs, newest date first.
func (r *BillReconciler) Runs(ctx context.Context, limit int) ([]model.ReconRun, error) {
	if limit <= 0 || limit > 366 {
		limit = 60
	}
	runs, err := r.store.ReconRuns(ctx, r.Of(), limit)
	for i := range runs {
		runs[i] = r.own(runs[i])
	}
	return runs, err
}

// RunDetail is a run with its attempts and its items.
type RunDetail struct {
	model.ReconRun
	History []model.ReconAttempt `json:"attempts_history"`
	Items   []model.ReconItem    `json:"items"`
}

// Detail reads the run of date with its attempts and up to limit items,
// of one outcome if outcome is not empty.
func (r *BillReconciler) Detail(ctx context.Context, date string, outcome model.ReconOutcome, limit int) (RunDetail, error) {
	if _, err := ParseBillDate(date); err != nil {
		return RunDetail{}, err
	}
	if outcome != "" && !outcome.Valid() {
		return RunDetail{}, fmt.Errorf("%w: outcome %q", model.ErrInvalidRequest, outcome)
	}
	if limit <= 0 || limit > 10000 {
		limit = 1000
	}
	run, err := r.store.ReconRun(ctx, r.Of(), date)
	if err != nil {
		return RunDetail{}, err
	}
	d := RunDetail{ReconRun: r.own(run)}
	if d.History, err = r.store.ReconAttempts(ctx, run.ID); err != nil {
		return RunDetail{}, err
	}
	d.Items, err = r.store.ReconItems(ctx, run.ID, outcome, limit)
	return d, err
}

// ResolveItem records that operator looked at item id of date's run and
// why it needs nothing more (note). The first resolution stands. It is
// the admin API's: the resolution is written to admin_audit in the
// item's transaction as model.OperatorAdminAPI's (operator is who the
// caller says it is, kept as the item's resolved_by).
func (r *BillReconciler) ResolveItem(ctx context.Context, date string, id int64, operator, note string) (model.ReconItem, error) {
	if _, err := ParseBillDate(date); err != nil {
		return model.ReconItem{}, err
	}
	if note == "" {
		return model.ReconItem{}, fmt.Errorf("%w: a note is required (at most %d characters)", model.ErrInvalidRequest, model.MaxNote)
	}
	if err := model.CheckNote(note); err != nil {
		return model.ReconItem{}, err
	}
	if operator == "" || len(operator) > 64 {
		return model.ReconItem{}, fmt.Errorf("%w: operator must be 1 to 64 bytes", model.ErrInvalidRequest)
	}
	run, err := r.store.ReconRun(ctx, r.Of(), date)
	if err != nil {
		return model.ReconItem{}, err
	}
	row, err := r.store.ReconItem(ctx, id)
	if err == nil && row.RunID != run.ID {
		err = fmt.Errorf("%w: %d in %s", model.ErrItemNotFound, id, date)
	}
	if err != nil {
		return model.ReconItem{}, err
	}
	act := model.Act{Operator: model.OperatorAdminAPI, Key: apiKey(model.AuditReconResolve, strconv.FormatInt(id, 10)), Note: note}
	return r.resolveItem(ctx, row, act, operator, "resolved by "+operator, true)
}
