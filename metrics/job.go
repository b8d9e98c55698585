package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/model"
	"paynotify/service"
)

func (m *Metrics) newJob() {
	m.jobRounds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_job_rounds_total", Help: "Rounds of each background job, by result (ok, error).",
	}, []string{"job_name", "result"})
	m.jobRows = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_job_rows_total", Help: "Rows each background job finished.",
	}, []string{"job_name"})
	m.closed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paynotify_orders_closed_total", Help: "Unpaid orders closed by the timeout closer.",
	})
	m.published = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_outbox_published_total", Help: "Outbox rows the relay published (sent) or failed to.",
	}, []string{"result"})
	m.consumed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_accounting_events_total", Help: "Events the accounting consumer booked, or found booked already.",
	}, []string{"result"})
	m.purged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_retention_deleted_total", Help: "Rows the retention job deleted, by table.",
	}, []string{"table"})
	m.overdue = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paynotify_retention_overdue_seconds",
		Help: "How long past its retention the oldest row the retention job has still to delete is, by table (0: caught up), as of its last round.",
	}, []string{"table"})
	m.lastRound = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paynotify_job_last_round_timestamp_seconds",
		Help: "When each background job's last round ended, failed or not (the jobs' start before the first): a job whose round hangs stops moving it.",
	}, []string{"job_name"})
	m.interval = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paynotify_job_interval_seconds", Help: "Each background job's pause between rounds.",
	}, []string{"job_name"})
	for _, t := range service.PurgeTables {
		m.purged.WithLabelValues(string(t))
		m.overdue.WithLabelValues(string(t)) // 0 until the first round measures it
	}
	m.reg.MustRegister(m.jobRounds, m.jobRows, m.closed, m.published, m.consumed, m.purged, m.overdue, m.lastRound, m.interval)
}

// Jobs creates the series of the jobs about to run (for service.RunJobs):
// their rounds at 0, their interval, and their last round at now, so a job
// whose first round hangs is seen too.
func (m *Metrics) Jobs(jobs ...service.Job) {
	if m == nil {
		return
	}
	now := float64(time.Now().UnixNano()) / 1e9
	for _, j := range jobs {
		m.jobRounds.WithLabelValues(j.Name, "ok")
		m.jobRounds.WithLabelValues(j.Name, "error")
		m.jobRows.WithLabelValues(j.Name)
		m.interval.WithLabelValues(j.Name).Set(j.Interval.Seconds())
		m.lastRound.WithLabelValues(j.Name).Set(now)
	}
}

// RetentionPurged counts rows the retention job deleted from a table (for
// service.Retention.OnPurged).
func (m *Metrics) RetentionPurged(t service.PurgeTable, n int) {
	if m != nil {
		m.purged.WithLabelValues(string(t)).Add(float64(n))
	}
}

// RetentionOverdue sets how far past its retention a table's oldest row
// still to delete is (for service.Retention.OnOverdue).
func (m *Metrics) RetentionOverdue(t service.PurgeTable, d time.Duration) {
	if m != nil {
		m.overdue.WithLabelValues(string(t)).Set(d.Seconds())
	}
}

// JobRound counts one round of a background job and the rows it finished
// (for service.RunJobs); the order closer's rows are orders closed.
func (m *Metrics) JobRound(r service.Round) {
	if m == nil {
		return
	}
	result := "ok"
	if r.Err != nil {
		result = "error"
	}
	m.jobRounds.WithLabelValues(r.Job, result).Inc()
	m.lastRound.WithLabelValues(r.Job).SetToCurrentTime()
	m.jobRows.WithLabelValues(r.Job).Add(float64(r.Rows))
	if r.Job == service.CloserJob {
		m.closed.Add(float64(r.Rows))
	}
}

// Published counts what one relay round published and failed to (for
// service.Relay.OnPublished).
func (m *Metrics) Published(sent, failed int) {
	if m == nil {
		return
	}
	m.published.WithLabelValues("sent").Add(float64(sent))
	m.published.WithLabelValues("failed").Add(float64(failed))
}

// Booked counts an event the accounting consumer booked, or found booked
// already (for service.Accounting.OnBooked).
func (m *Metrics) Booked(duplicate bool) {
	if m == nil {
		return
	}
	if duplicate {
		m.consumed.WithLabelValues("duplicate").Inc()
	} else {
		m.consumed.WithLabelValues("booked").Inc()
	}
}

// OutboxCounter counts the outbox's rows in a state (dao.Store does).
type OutboxCounter interface {
	OutboxCount(ctx context.Context, state model.OutboxState) (int64, error)
}

// WatchOutbox registers paynotify_outbox_rows, read from store at every
// scrape: the rows waiting to be published and those failing.
func (m *Metrics) WatchOutbox(store OutboxCounter) {
	for _, state := range []model.OutboxState{model.OutboxPending, model.OutboxFailed} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "paynotify_outbox_rows",
			Help:        "Outbox rows waiting to be published (pending) or failing repeatedly (failed).",
			ConstLabels: prometheus.Labels{"state": string(state)},
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			n, err := store.OutboxCount(ctx, state)
			if err != nil {
				return -1
			}
			return float64(n)
		}))
	}
}
