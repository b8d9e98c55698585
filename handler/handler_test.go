package handler_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"paynotify/dao"
	"paynotify/dao/daotest"
)

func TestProbes(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		s := newServer(t, store)
		for _, tc := range []struct {
			path, want string
		}{
			{"/healthz", "ok"},
			{"/readyz", "ready"},
		} {
			t.Run(strings.TrimPrefix(tc.path, "/"), func(t *testing.T) {
				w := s.do(httptest.NewRequest(http.MethodGet, tc.path, nil))
				if w.Code != http.StatusOK || w.Body.String() != tc.want {
					t.Fatalf("GET %s: %d %q, want 200 %q", tc.path, w.Code, w.Body.String(), tc.want)
				}
			})
		}
	})
}

// A database that does not answer makes the service unready, and the
// answer does not say why beyond that.
func TestReadyzDatabaseDown(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		s := newServer(t, store)
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		w := s.do(httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if w.Code != http.StatusServiceUnavailable || w.Body.String() != "database unreachable" {
			t.Fatalf("GET /readyz: %d %q, want 503 %q", w.Code, w.Body.String(), "database unreachable")
		}
		if w := s.do(httptest.NewRequest(http.MethodGet, "/healthz", nil)); w.Code != http.StatusOK {
			t.Fatalf("GET /healthz with the database down: %d, want 200", w.Code)
		}
	})
}

func TestMetricsCountAppliedNotification(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		s := newServer(t, store)
		mustOrder(t, store, "M-1", "100.00")
		s.mustNotify(t, s.signedBody(t, paidForm("M-1", "T-M-1", "100.00")), "success")
		w := s.do(httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if w.Code != http.StatusOK {
			t.Fatalf("GET /metrics: %d", w.Code)
		}
		for _, line := range []string{
			`paynotify_notifications_total{outcome="applied",provider="alipay"} 1`,
			`paynotify_notify_duration_seconds_count{outcome="applied",provider="alipay"} 1`,
		} {
			if !strings.Contains(w.Body.String(), line+"\n") {
				t.Errorf("/metrics lacks %q:\n%s", line, w.Body.String())
			}
		}
	})
}

func TestRequestID(t *testing.T) {
	generated := regexp.MustCompile(`^[0-9a-f]{16}$`)
	store := daotest.Open(t, dao.DriverSQLite)
	s := newServer(t, store)
	for _, tc := range []struct {
		name   string
		header []string // X-Request-Id values sent; none if nil
		echo   bool     // the caller's id is the one answered
	}{
		{name: "Sane", header: []string{"req-42.a:b_C"}, echo: true},
		{name: "SixtyFourChars", header: []string{strings.Repeat("a", 64)}, echo: true},
		{name: "Absent"},
		{name: "Empty", header: []string{""}},
		{name: "TooLong", header: []string{strings.Repeat("a", 65)}},
		{name: "Space", header: []string{"a b"}},
		{name: "LogInjection", header: []string{"a\nlevel=ERROR msg=forged"}},
		{name: "Quote", header: []string{`a"b`}},
		{name: "NonASCII", header: []string{"ид"}},
	} {
		for _, path := range []string{"/healthz", notifyPath} {
			t.Run(tc.name+path, func(t *testing.T) {
				method := http.MethodGet
				if path == notifyPath {
					method = http.MethodPost
				}
				r := httptest.NewRequest(method, path, strings.NewReader(""))
				for _, v := range tc.header {
					r.Header.Add("X-Request-Id", v)
				}
				w := s.do(r)
				got := w.Header().Values("X-Request-Id")
				if len(got) != 1 {
					t.Fatalf("X-Request-Id answered %q, want one value", got)
				}
				switch {
				case tc.echo && got[0] != tc.header[0]:
					t.Fatalf("X-Request-Id = %q, want the caller's %q echoed", got[0], tc.header[0])
				case !tc.echo && !generated.MatchString(got[0]):
					t.Fatalf("X-Request-Id = %q, want a generated id (16 hex digits)", got[0])
				}
			})
		}
	}
	t.Run("GeneratedIDsDiffer", func(t *testing.T) {
		a := s.do(httptest.NewRequest(http.MethodGet, "/healthz", nil)).Header().Get("X-Request-Id")
		b := s.do(httptest.NewRequest(http.MethodGet, "/healthz", nil)).Header().Get("X-Request-Id")
		if a == b {
			t.Fatalf("two requests got the same generated id %q", a)
		}
	})
}

// Every request is counted by its route's template, method and status,
// and timed; a path no route matches is counted as "unmatched", so a
// scanner's paths never become series, and an invented method as "other".
func TestMetricsCountRequestsByRoute(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		s := newServer(t, store)
		for _, r := range []struct{ method, path string }{
			{http.MethodGet, "/healthz"},
			{http.MethodGet, "/healthz"},
			{http.MethodPost, notifyPath},
			{http.MethodGet, "/wp-login.php-scan-4711"},
			{"BREW", "/healthz"},
		} {
			s.do(httptest.NewRequest(r.method, r.path, strings.NewReader("")))
		}
		w := s.do(httptest.NewRequest(http.MethodGet, "/metrics", nil))
		body := w.Body.String()
		for _, line := range []string{
			`paynotify_http_requests_total{method="GET",route="/healthz",status="200"} 2`,
			`paynotify_http_requests_total{method="POST",route="/alipay/notify",status="200"} 1`,
			`paynotify_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
			`paynotify_http_requests_total{method="other",route="unmatched",status="405"} 1`, // a wrong method
			`paynotify_http_request_duration_seconds_count{method="GET",route="/healthz"} 2`,
		} {
			if !strings.Contains(body, line+"\n") {
				t.Errorf("/metrics lacks %q", line)
			}
		}
		if strings.Contains(body, "4711") || strings.Contains(body, "BREW") {
			t.Errorf("/metrics carries a client's path or method:\n%s", body)
		}
		if t.Failed() {
			t.Logf("/metrics:\n%s", body)
		}
	})
}
