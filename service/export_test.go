package service

import "time"

// SetClock makes r read time from now: tests run a day's reconciliation
// "the next morning".
func (r *Reconciliations) SetClock(now func() time.Time) { r.now = now }

// SetOwner names r's instance, as two processes would be named.
func (r *Reconciliations) SetOwner(owner string) { r.owner = owner }
