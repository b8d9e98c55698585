package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
