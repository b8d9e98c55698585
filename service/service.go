// Package service holds paynotify's use cases. It owns every transaction
// boundary and the retry of transactions the database rolled back; the
// decisions themselves live in model, the SQL in dao.
package service

import (
	"context"
	"errors"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// maxTxAttempts bounds how often a deadlocked or lock-timed-out transaction
// runs inside one request before the caller is told to retry.
const maxTxAttempts = 3

// inTx runs fn in a transaction, again on model.ErrRetryable, a bounded
// number of times, and never past ctx's deadline.
func inTx(ctx context.Context, store *dao.Store, fn func(tx *dao.Store) error) error {
	var err error
	for attempt := 1; attempt <= maxTxAttempts; attempt++ {
		err = store.Tx(ctx, fn)
		if !errors.Is(err, model.ErrRetryable) || ctx.Err() != nil {
			return err
		}
		// A short, growing pause lets the transaction we collided with finish.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
		}
	}
	return err
}
