package handler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/gin-gonic/gin"

	"paynotify/dao"
	"paynotify/dao/daotest"
)

// specFile is the OpenAPI document handler embeds and serves.
const specFile = "openapi.yaml"

// outsideSpec lists the routes the OpenAPI document does not describe:
// Alipay's protocol, the probes, Prometheus, the document itself, and the
// fake Alipay that `dev` mounts.
var outsideSpec = []string{"/alipay/notify", "/healthz", "/readyz", "/metrics", "/openapi.yaml", "/fake-alipay"}

func isOutsideSpec(path string) bool {
	return slices.ContainsFunc(outsideSpec, func(p string) bool {
		return path == p || strings.HasPrefix(path, p+"/")
	})
}

// loadSpec reads and checks the document once for the whole package.
var loadSpec = sync.OnceValues(func() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specFile)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, err
	}
	return doc, nil
})

func mustSpec(tb testing.TB) *openapi3.T {
	tb.Helper()
	doc, err := loadSpec()
	if err != nil {
		tb.Fatalf("%s: %v", specFile, err)
	}
	return doc
}

// findRoute matches a request to the document's operation the way gin
// routes it: segment by segment on the escaped path, a literal segment
// before a parameter, and parameters handed over unescaped (so an
// idempotency key holding "/" is one segment).
func findRoute(doc *openapi3.T, r *http.Request) (*routers.Route, map[string]string, error) {
	got := strings.Split(r.URL.EscapedPath(), "/")
	var best *routers.Route
	var bestParams map[string]string
	bestLiterals := -1
	for path, item := range doc.Paths.Map() {
		want := strings.Split(path, "/")
		if len(want) != len(got) {
			continue
		}
		params, literals, ok := map[string]string{}, 0, true
		for i, w := range want {
			if name, isParam := strings.CutPrefix(w, "{"); isParam {
				v, err := url.PathUnescape(got[i])
				if err != nil || v == "" {
					ok = false
					break
				}
				params[strings.TrimSuffix(name, "}")] = v
				continue
			}
			if w != got[i] {
				ok = false
				break
			}
			literals++
		}
		if ok && literals > bestLiterals {
			best = &routers.Route{Spec: doc, Path: path, PathItem: item, Method: r.Method, Operation: item.GetOperation(r.Method)}
			bestParams, bestLiterals = params, literals
		}
	}
	switch {
	case best == nil:
		return nil, nil, routers.ErrPathNotFound
	case best.Operation == nil:
		return nil, nil, routers.ErrMethodNotAllowed
	}
	return best, bestParams, nil
}

// bearerPresent is the document's security as a client can check it: a
// bearer token is sent. Whether it is a good one is the service's call
// (401, which the document describes).
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	tok, ok := strings.CutPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(tok) == "" {
		return in.NewError(errors.New("no bearer token"))
	}
	return nil
}

// validated wraps the service's handler so that every request the tests
// send through it, and every answer, is checked against the OpenAPI
// document; a mismatch fails tb:
//   - a route the document does not have (and is not outsideSpec) must
//     not be served: 404 or 405;
//   - the answer — status, headers, body — must be one the document gives
//     for that operation;
//   - a request the document refuses must be refused (4xx) by the service.
//
// A request the document accepts may still be refused for what a schema
// cannot say (a SKU twice, an unknown order).
func validated(tb testing.TB, h http.Handler) http.Handler {
	tb.Helper()
	doc := mustSpec(tb)
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		SkipSettingDefaults:   true,
		AuthenticationFunc:    bearerPresent,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isOutsideSpec(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		what := r.Method + " " + r.URL.RequestURI()
		route, params, err := findRoute(doc, r)
		if err != nil {
			// Not described, so it must not be served either.
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
				tb.Errorf("%s answered %d %s, but %s has %v", what, rec.Code, rec.Body, specFile, err)
			}
			copyAnswer(w, rec)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			tb.Errorf("%s: read body: %v", what, err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		vr := r.Clone(r.Context())
		vr.Body = io.NopCloser(bytes.NewReader(body))
		in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route, Options: opts}
		reqErr := openapi3filter.ValidateRequest(r.Context(), in)

		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)

		out := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
			Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())), Options: opts,
		}
		if err := openapi3filter.ValidateResponse(r.Context(), out); err != nil {
			tb.Errorf("%s answered %d %s\nwhich %s does not allow for %s %s: %v", what, rec.Code, rec.Body, specFile, route.Method, route.Path, err)
		}
		if reqErr != nil && rec.Code < 400 {
			tb.Errorf("%s: %s refuses this request (%v), but the service answered %d %s", what, specFile, reqErr, rec.Code, rec.Body)
		}
		copyAnswer(w, rec)
	})
}

// copyAnswer sends a recorded answer on to w.
func copyAnswer(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// placeholders turns both "/orders/:sn" (gin) and "/orders/{order_sn}"
// (OpenAPI) into "/orders/{}", so routes compare by shape.
func placeholders(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") || strings.HasPrefix(s, "{") {
			segs[i] = "{}"
		}
	}
	return strings.Join(segs, "/")
}

// Every route the service registers (with every part switched on) is in
// the OpenAPI document, and every operation of the document is a route:
// a new route fails here until it is described.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	c := newCashier(t, store)
	engine, ok := c.routes.(*gin.Engine)
	if !ok {
		t.Fatalf("handler.New returned %T, not a *gin.Engine: list its routes another way", c.routes)
	}
	var served []string
	for _, r := range engine.Routes() {
		if !isOutsideSpec(r.Path) {
			served = append(served, r.Method+" "+placeholders(r.Path))
		}
	}
	var described []string
	for path, item := range mustSpec(t).Paths.Map() {
		for method := range item.Operations() {
			described = append(described, method+" "+placeholders(path))
		}
	}
	slices.Sort(served)
	slices.Sort(described)
	if len(served) == 0 {
		t.Fatal("no routes registered")
	}
	for _, r := range served {
		if !slices.Contains(described, r) {
			t.Errorf("route %s is not in %s", r, specFile)
		}
	}
	for _, d := range described {
		if !slices.Contains(served, d) {
			t.Errorf("%s describes %s, which the service does not serve", specFile, d)
		}
	}
}

// GET /openapi.yaml serves the document as it is in the repository,
// without a token.
func TestOpenAPIServed(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	c := newCashier(t, store)
	want, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(c.url + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/yaml" || !bytes.Equal(got, want) {
		t.Fatalf("GET /openapi.yaml: %d %q, %d bytes; want 200 application/yaml with the %d bytes of %s",
			resp.StatusCode, resp.Header.Get("Content-Type"), len(got), len(want), specFile)
	}
}

// recordingTB keeps what validated reports instead of failing the test.
type recordingTB struct {
	testing.TB
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// The OpenAPI check itself can fail: each kind of drift is reported, and
// an exchange as described is not.
func TestOpenAPICheckReportsDrift(t *testing.T) {
	const totals = `{"accounts":[],"debit":"0.00","credit":"0.00","balanced":true}`
	// A delivered delivery: next_attempt_at is null (type [string, "null"]
	// in the OpenAPI 3.1 document).
	const deliveries = `{"deliveries":[{"id":1,"endpoint_id":1,"event_id":"e","event_type":"order.paid","state":"DELIVERED",` +
		`"attempts":1,"last_status":204,"last_error":"","next_attempt_at":null,"created_at":"2026-12-02T09:00:00Z","attempt_log":[]}]}`
	answer := func(status int, body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Request-Id", "req-1")
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		})
	}
	for _, tc := range []struct {
		name   string
		req    *http.Request
		answer http.Handler
		drift  bool
	}{
		{name: "AsDescribed", req: adminGet("/admin/journal/totals"), answer: answer(200, totals)},
		{name: "UnknownRouteNotServed", req: adminGet("/admin/nope"), answer: answer(404, `{}`)},
		{name: "UnknownRouteServed", req: adminGet("/admin/nope"), answer: answer(200, `{}`), drift: true},
		{name: "UndescribedStatus", req: adminGet("/admin/journal/totals"), answer: answer(http.StatusTeapot, `{}`), drift: true},
		{name: "MoneyAsNumber", req: adminGet("/admin/journal/totals"), answer: answer(200, strings.Replace(totals, `"0.00"`, `0`, 1)), drift: true},
		{name: "UndescribedField", req: adminGet("/admin/journal/totals"), answer: answer(200, strings.Replace(totals, `{`, `{"extra":1,`, 1)), drift: true},
		{name: "UndescribedErrorCode", req: adminGet("/admin/journal/totals"), answer: answer(401, `{"error":{"code":"forbidden","message":"no"}}`), drift: true},
		{name: "ErrorCodeOfAnotherStatus", req: adminGet("/admin/journal/totals"), answer: answer(401, `{"error":{"code":"internal","message":"no"}}`), drift: true},
		{name: "NullAsDescribed", req: adminGet("/admin/webhook-endpoints/1/deliveries"), answer: answer(200, deliveries)},
		{name: "NullableAsNumber", req: adminGet("/admin/webhook-endpoints/1/deliveries"),
			answer: answer(200, strings.Replace(deliveries, `"next_attempt_at":null`, `"next_attempt_at":0`, 1)), drift: true},
		{name: "NotNullableAsNull", req: adminGet("/admin/webhook-endpoints/1/deliveries"),
			answer: answer(200, strings.Replace(deliveries, `"created_at":"2026-12-02T09:00:00Z"`, `"created_at":null`, 1)), drift: true},
		{name: "RefusedRequestAccepted", req: httptest.NewRequest(http.MethodGet, "/admin/journal/totals", nil), answer: answer(200, totals), drift: true},
		{name: "RefusedRequestRefused", req: httptest.NewRequest(http.MethodGet, "/admin/journal/totals", nil),
			answer: answer(401, `{"error":{"code":"unauthorized","message":"admin token required"}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			validated(rec, tc.answer).ServeHTTP(httptest.NewRecorder(), tc.req)
			if tc.drift != (len(rec.errs) > 0) {
				t.Fatalf("drift %v, reported %q", tc.drift, rec.errs)
			}
		})
	}
}

func adminGet(path string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("Authorization", "Bearer "+payAdminToken)
	return r
}
