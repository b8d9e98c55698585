package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// newConfig defines the configuration reload gauges. A process that
// serves has checked its configuration at start (serve refuses to start
// on a bad one), so the gauges start at success and now.
func (m *Metrics) newConfig() {
	m.reloadOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "paynotify_config_reload_success",
		Help: "Whether the last reload of the providers' configuration (SIGHUP, POST /admin/reload) was put in force (1), or refused and nothing changed (0); 1 from start.",
	})
	m.reloadAt = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "paynotify_config_reload_timestamp_seconds",
		Help: "When the providers' configuration in force was put in force: at start, or by the last successful reload.",
	})
	m.reloadOK.Set(1)
	m.reloadAt.Set(float64(time.Now().UnixNano()) / 1e9)
	m.reg.MustRegister(m.reloadOK, m.reloadAt)
}

// ConfigReloaded records a reload of the providers' configuration: put in
// force at at (ok), or refused, changing nothing.
func (m *Metrics) ConfigReloaded(ok bool, at time.Time) {
	if m == nil {
		return
	}
	if !ok {
		m.reloadOK.Set(0)
		return
	}
	m.reloadOK.Set(1)
	m.reloadAt.Set(float64(at.UnixNano()) / 1e9)
}
