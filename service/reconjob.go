package service

import (
	"context"
	"errors"
	"time"

	"paynotify/model"
)

// The daily job: yesterday's bill once Alipay has published it, and the
// failed dates of the last week.
const (
	// reconLookback is how far back failed dates are retried.
	reconLookback = 7
	// reconRetryAfter spaces the retries of a failed date.
	reconRetryAfter = time.Hour
)

// Name names the daily reconciliation job in logs and metrics, by its
// provider and account: a provider's first account's as the provider's
// was named before runs were kept per account.
func (r *BillReconciler) Name() string {
	switch {
	case r.Account != "" && !r.Of().Legacy:
		return "reconciliation_" + string(r.Provider) + "_" + r.Account
	case r.Provider == model.DefaultProvider:
		return "reconciliation" // as it was named before WeChat Pay
	}
	return "reconciliation_" + string(r.Provider)
}

// RunOnce is one round of the daily job: it reconciles yesterday (Beijing)
// once the time of day is past At (and past its bill source's
// BillPublished), and retries — at most hourly — the
// dates of the last week whose run failed or was abandoned (its instance
// died: a RUNNING run whose lease ended). A date another instance holds
// is left to it. It returns how many runs it finished.
func (r *BillReconciler) RunOnce(ctx context.Context) (int, error) {
	now := r.now()
	today := r.today()
	runs, err := r.store.ReconRuns(ctx, r.Of(), reconLookback+1)
	if err != nil {
		return 0, err
	}
	byDate := make(map[string]model.ReconRun, len(runs))
	for _, run := range runs {
		byDate[run.BillDate] = run
	}
	var due []string
	for back := reconLookback; back >= 1; back-- {
		date := today.AddDate(0, 0, -back).Format("2006-01-02")
		run, ok := byDate[date]
		switch {
		case ok && retryable(run, now):
			due = append(due, date)
		case !ok && back == 1 && !now.Before(today.Add(max(r.At, r.billPublished()))):
			due = append(due, date)
		}
	}
	n := 0
	for _, date := range due {
		if _, err := r.Run(ctx, date); err != nil {
			if errors.Is(err, model.ErrRunBusy) {
				continue
			}
			return n, err
		}
		n++
	}
	return n, nil
}

// billPublished is how long after Beijing midnight r's bill source has
// published yesterday's bill (BillPublisher), 0 by default.
func (r *BillReconciler) billPublished() time.Duration {
	if p, ok := r.bills.(BillPublisher); ok {
		return p.BillPublished()
	}
	return 0
}

// retryable: a run that failed an hour ago or more, or whose instance let
// its lease end.
func retryable(run model.ReconRun, now time.Time) bool {
	switch run.State {
	case model.ReconFailed:
		return run.FinishedAt == nil || !now.Before(run.FinishedAt.Add(reconRetryAfter))
	case model.ReconRunning:
		return now.After(run.LeaseUntil)
	}
	return false
}

// Job is the daily reconciliation as a background job: a round every
// Interval, which does something only once a day (and for failed dates).
func (r *BillReconciler) Job() Job {
	return Job{Name: r.Name(), Interval: r.Interval, RunOnce: r.RunOnce}
}
