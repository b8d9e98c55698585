package metrics_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"paynotify/metrics"
	"paynotify/service"
)

// Group apply's hooks reach its metrics: a group's size in the histogram,
// a fallback under its reason, every reason's series there at zero.
func TestCountGroups(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	p := service.NewPayments(nil)
	p.OnGroup, p.OnFallback = m.GroupApplied, m.GroupFallback
	p.OnGroup(5)
	p.OnFallback(service.FallbackLockWait)
	p.OnFallback(service.FallbackLockWait)
	p.OnFallback(service.FallbackDuplicateInGroup)

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	want := []string{
		`paynotify_notify_group_size_bucket{le="4"} 0`,
		`paynotify_notify_group_size_bucket{le="8"} 1`,
		`paynotify_notify_group_size_sum 5`,
		`paynotify_notify_group_size_count 1`,
		`paynotify_notify_group_fallbacks_total{reason="lock_wait"} 2`,
		`paynotify_notify_group_fallbacks_total{reason="duplicate_in_group"} 1`,
	}
	for _, f := range service.Fallbacks() {
		if f != service.FallbackLockWait && f != service.FallbackDuplicateInGroup {
			want = append(want, `paynotify_notify_group_fallbacks_total{reason="`+f.String()+`"} 0`)
		}
	}
	for _, w := range want {
		if !strings.Contains(body, w+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", w, body)
		}
	}
}

// The jobs' and the retention job's series exist from the start: every
// table's overdue gauge (job_backoff too) at 0, each job's rounds at 0,
// its interval, and its last round at the start, which a round's end,
// failed or not, moves on; a job whose round hangs leaves it there.
func TestJobSeriesFromStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	start := float64(time.Now().UnixNano()) / 1e9
	retention := service.NewRetention(nil).Job()
	hung := service.Job{Name: "hung", Interval: 5 * time.Minute}
	m.Jobs(retention, hung)
	end := float64(time.Now().UnixNano()) / 1e9

	gauge := func(name, label, value string) (float64, bool) {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, s := range f.GetMetric() {
				for _, l := range s.GetLabel() {
					if l.GetName() == label && l.GetValue() == value {
						if s.Gauge != nil {
							return s.GetGauge().GetValue(), true
						}
						return s.GetCounter().GetValue(), true
					}
				}
			}
		}
		return 0, false
	}
	for _, table := range service.PurgeTables {
		if v, ok := gauge("paynotify_retention_overdue_seconds", "table", string(table)); !ok || v != 0 {
			t.Errorf("overdue of %s at start: %v, %v; want 0", table, v, ok)
		}
	}
	for _, j := range []service.Job{retention, hung} {
		if v, ok := gauge("paynotify_job_interval_seconds", "job_name", j.Name); !ok || v != j.Interval.Seconds() {
			t.Errorf("interval of %s: %v, %v; want %v", j.Name, v, ok, j.Interval.Seconds())
		}
		if v, ok := gauge("paynotify_job_last_round_timestamp_seconds", "job_name", j.Name); !ok || v < start || v > end {
			t.Errorf("last round of %s at start: %v, %v; want in [%v, %v]", j.Name, v, ok, start, end)
		}
		if _, ok := gauge("paynotify_job_rounds_total", "job_name", j.Name); !ok {
			t.Errorf("no rounds series of %s at start", j.Name)
		}
	}

	time.Sleep(10 * time.Millisecond) // so a round's end is after the start
	m.JobRound(service.Round{Job: retention.Name, Err: errors.New("failed")})
	if v, _ := gauge("paynotify_job_last_round_timestamp_seconds", "job_name", retention.Name); v <= end {
		t.Errorf("last round of retention after a failed round: %v, want after %v", v, end)
	}
	if v, _ := gauge("paynotify_job_last_round_timestamp_seconds", "job_name", hung.Name); v > end {
		t.Errorf("last round of a job with no round ended: %v, want the start", v)
	}
}
