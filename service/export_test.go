package service

import "time"

// SetClock makes r read time from now: tests run a day's reconciliation
// "the next morning".
func (r *BillReconciler) SetClock(now func() time.Time) { r.now = now }

// SetRefundsClock makes r read time from now: tests move past a refund's
// back-off without waiting.
func SetRefundsClock(r *Refunds, now func() time.Time) { r.now = now }

// SetRetentionClock makes r read time from now.
func SetRetentionClock(r *Retention, now func() time.Time) { r.now = now }

// SetOwner names r's instance, as two processes would be named.
func (r *BillReconciler) SetOwner(owner string) { r.owner = owner }

// Queued is how many notifications wait behind p's transaction in flight.
func Queued(p *Payments) int {
	p.group.mu.Lock()
	defer p.group.mu.Unlock()
	return len(p.group.queue)
}

// Groups is how many group transactions p has committed (0 with group
// apply off).
func Groups(p *Payments) int64 {
	if p.group == nil {
		return 0
	}
	return p.group.groups.Load()
}

// SetDefaultDuplicateCache sets the duplicate cache NewPayments gives
// (0: off), for a test binary that runs every test both ways.
func SetDefaultDuplicateCache(size int) { defaultSeenSize = size }

// SetDelivererClock makes d read time from now: a second deliverer runs
// past the first one's leases without waiting for them.
func SetDelivererClock(d *Deliverer, now func() time.Time) { d.now = now }
