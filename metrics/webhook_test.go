package metrics_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/metrics"
	"paynotify/model"
	"paynotify/service"
	"paynotify/webhook"
)

// Endpoints are counted by state, one paynotify disabled apart from one an
// operator disabled (only the first alerts), and each endpoint's attempt
// series are there at zero before its first attempt, so the alert on an
// endpoint failing sees the first failures as an increase.
func TestWebhookEndpointsByState(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		keys, err := webhook.NewKeyring(base64.StdEncoding.EncodeToString(make([]byte, 32)))
		if err != nil {
			t.Fatal(err)
		}
		w := service.NewWebhooks(store, keys)
		w.AllowPrivate = true
		var ids []int64
		for _, url := range []string{"http://127.0.0.1:1/a", "http://127.0.0.1:1/b", "http://127.0.0.1:1/c"} {
			all := []string{model.WebhookAllEvents}
			e, _, err := w.Create(ctx, service.EndpointInput{URL: &url, EventTypes: &all})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, e.ID)
		}
		off := false
		if _, err := w.Update(ctx, ids[1], service.EndpointInput{Enabled: &off}); err != nil {
			t.Fatal(err)
		}
		// As the deliverer disables one that answered 410 Gone.
		err = store.UpdateWebhooks(ctx, func(ctx context.Context, tx *dao.WebhookTx) error {
			e, err := tx.EndpointForUpdate(ctx, ids[2])
			if err != nil {
				return err
			}
			e.Enabled, e.DisabledReason = false, "answered 410 Gone"
			return tx.SaveEndpoint(ctx, e)
		})
		if err != nil {
			t.Fatal(err)
		}

		reg := prometheus.NewRegistry()
		metrics.New(reg).WatchWebhooks(store)
		scrape := func() string {
			rec := httptest.NewRecorder()
			promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			return rec.Body.String()
		}
		body := scrape()
		for _, want := range []string{
			`paynotify_webhook_endpoints{state="enabled"} 1`,
			`paynotify_webhook_endpoints{state="disabled_by_operator"} 1`,
			`paynotify_webhook_endpoints{state="disabled_by_paynotify"} 1`,
		} {
			if !strings.Contains(body, want+"\n") {
				t.Errorf("/metrics lacks %s:\n%s", want, body)
			}
		}
		// The attempt series start with the scrape that first sees the
		// endpoint.
		body = scrape()
		for _, r := range model.AttemptResults {
			want := `paynotify_webhook_attempts_total{endpoint="` + strconv.FormatInt(ids[0], 10) + `",result="` + string(r) + `"} 0`
			if !strings.Contains(body, want+"\n") {
				t.Errorf("/metrics lacks %s:\n%s", want, body)
			}
		}
	})
}
