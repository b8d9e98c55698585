package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"paynotify/model"
)

// Job is the one shape of every background job: a name, a pause between
// rounds, and one round of work. A round handles one batch of due rows;
// a row it fails on is given its own back-off (attempts and a next-try
// time, on the row or in job_backoff) and the round goes on, so rows that
// keep failing never starve newer ones. Jobs are made by their use case
// (Closer.Job, Relay.Job, Refunds.Job, OpenTrades.QueryJob and CloseJob)
// and all run by RunJobs.
type Job struct {
	// Name names the job in logs and metrics.
	Name string
	// Interval is the pause after a round.
	Interval time.Duration
	// RunOnce does one round and says how many rows it finished.
	RunOnce func(ctx context.Context) (int, error)
	// Full, if set, says that a round that finished n rows took a whole
	// batch, so more may be due: the next round starts at once, or after
	// Pause.
	Full func(n int) bool
	// Pause, if set, is the wait between full rounds: it bounds the share
	// of the database a job catching up takes from requests.
	Pause time.Duration
	// Wake, if set, ends the pause after a round early (work arrived).
	Wake <-chan struct{}
}

// Round is what a job's round did, for metrics.
type Round struct {
	Job  string
	Rows int
	Err  error
}

// RunJobs runs every job, each in its own goroutine of one errgroup,
// until ctx ends, then waits for the rounds in flight. A failed round is
// logged and reported; it never stops its job. onRound, if set, is told
// every round (from the jobs' goroutines).
func RunJobs(ctx context.Context, log *slog.Logger, onRound func(Round), jobs ...Job) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, j := range jobs {
		g.Go(func() error {
			runJob(ctx, log, onRound, j)
			return nil
		})
	}
	return g.Wait()
}

func runJob(ctx context.Context, log *slog.Logger, onRound func(Round), j Job) {
	for {
		n, err := j.RunOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			log.Warn("job round failed", "job", j.Name, "rows", n, "err", err)
		case n > 0:
			log.Info("job round", "job", j.Name, "rows", n)
		}
		if onRound != nil {
			onRound(Round{Job: j.Name, Rows: n, Err: err})
		}
		wait := j.Interval
		if err == nil && j.Full != nil && j.Full(n) {
			if wait = j.Pause; wait <= 0 {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-j.Wake:
		}
	}
}

// rowBackoff is how long a job leaves a row alone after its n-th failure
// on it in a row: a minute, doubling, at most an hour.
func rowBackoff(failures int) time.Duration {
	return min(time.Minute<<min(max(failures-1, 0), 10), time.Hour)
}

// transient says a row's failure was the database's, not the row's (a
// deadlock, a lock-wait timeout, no answer): the next round tries it again
// without a back-off of its own.
func transient(err error) bool {
	return errors.Is(err, model.ErrRetryable) || errors.Is(err, model.ErrUnavailable)
}
