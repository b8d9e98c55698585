package console

import (
	"net/http"
	"time"

	"paynotify/model"
	"paynotify/service"
)

// notifyAnswered are the outcomes of notifications answered "success";
// every other outcome is a failure (Alipay resends).
var notifyAnswered = map[string]bool{"applied": true, "duplicate": true, "refund_pending": true, "unmatched": true,
	"ignored": true, "refund_notice": true}

type overviewData struct {
	page
	service.Overview
	// Duplicates and Failures are counted by this instance since it
	// started: they leave no row in the ledger.
	Duplicates, Failures float64
	Chart                chart
	// Webhooks says whether webhooks are on; WebhooksFailed counts the
	// deliveries that ran out of retries, Oldest the oldest of them.
	Webhooks       bool
	WebhooksFailed model.QueueCount
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	p := c.page(r, "Overview")
	ov, err := c.d.Dashboard.Overview(r.Context(), p.now, p.loc)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := overviewData{page: p, Overview: ov, Chart: newChart(ov.Chart, p.loc)}
	for outcome, n := range c.d.Metrics.NotificationCounts() {
		switch {
		case outcome == "duplicate":
			d.Duplicates += n
		case !notifyAnswered[outcome]:
			d.Failures += n
		}
	}
	if c.d.Webhooks != nil && c.d.Webhooks.On() {
		stats, err := c.d.Webhooks.Stats(r.Context())
		if err != nil {
			c.fail(w, r, err)
			return
		}
		d.Webhooks = true
		for _, s := range stats {
			if s.State == model.DeliveryFailed {
				d.WebhooksFailed.Count += s.Count
				if d.WebhooksFailed.Oldest == nil || s.Oldest.Before(*d.WebhooksFailed.Oldest) {
					oldest := s.Oldest
					d.WebhooksFailed.Oldest = &oldest
				}
			}
		}
	}
	c.render(w, r, http.StatusOK, "overview", d)
}

// chart is the per-minute bar chart, laid out for an inline SVG.
type chart struct {
	Width, Height int
	Max           int
	// Any says whether any bar has a payment: an empty chart has no peak.
	Any   bool
	Bars  []chartBar
	Ticks []chartTick
}

type chartBar struct {
	X, W                                 int
	AppliedY, AppliedH                   int
	PendingY, PendingH                   int
	UnmatchedY, UnmatchedH               int
	Label                                string
	Applied, RefundPending, Unmatched, N int
}

type chartTick struct {
	X     int
	Label string
}

const (
	chartBarW   = 6
	chartHeight = 120
)

func newChart(bars []service.ChartBar, loc *time.Location) chart {
	ch := chart{Width: len(bars) * chartBarW, Height: chartHeight, Max: 1}
	for _, b := range bars {
		ch.Max = max(ch.Max, b.Total())
		ch.Any = ch.Any || b.Total() > 0
	}
	for i, b := range bars {
		x := i * chartBarW
		ah := b.Applied * (chartHeight - 10) / ch.Max
		ph := b.RefundPending * (chartHeight - 10) / ch.Max
		if b.Applied > 0 && ah == 0 {
			ah = 1
		}
		if b.RefundPending > 0 && ph == 0 {
			ph = 1
		}
		uh := b.Unmatched * (chartHeight - 10) / ch.Max
		if b.Unmatched > 0 && uh == 0 {
			uh = 1
		}
		ch.Bars = append(ch.Bars, chartBar{X: x, W: chartBarW - 1,
			AppliedY: chartHeight - ah, AppliedH: ah, PendingY: chartHeight - ah - ph, PendingH: ph,
			UnmatchedY: chartHeight - ah - ph - uh, UnmatchedH: uh,
			Label: b.Minute.In(loc).Format("15:04"), Applied: b.Applied, RefundPending: b.RefundPending, Unmatched: b.Unmatched, N: b.Total()})
		if b.Minute.In(loc).Minute()%30 == 0 {
			ch.Ticks = append(ch.Ticks, chartTick{X: x, Label: b.Minute.In(loc).Format("15:04")})
		}
	}
	return ch
}
