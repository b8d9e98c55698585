package handler_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"paynotify/dao"
	"paynotify/dao/daotest"
)

// Every request is one JSON access-log line: the request's id (the one
// answered in X-Request-Id) and the request first, then what the handler
// adds — for a notification its outcome and trade — and any other line of
// the request carries the same id.
func TestAccessLog(t *testing.T) {
	var buf bytes.Buffer
	store := daotest.Open(t, dao.DriverSQLite)
	s := newServerLogging(t, store, slog.New(slog.NewJSONHandler(&buf, nil)))
	mustOrder(t, store, "L-1", "100.00")
	body := s.signedBody(t, paidForm("L-1", "T-L-1", "100.00"))

	post := func(body, requestID string) (id string, lines []string) {
		t.Helper()
		buf.Reset()
		r := httptest.NewRequest(http.MethodPost, notifyPath, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if requestID != "" {
			r.Header.Set("X-Request-Id", requestID)
		}
		id = s.do(r).Header().Get("X-Request-Id")
		return id, strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	}
	wantKeys := []string{"time", "level", "msg", "request_id", "method", "path", "status", "duration_ms",
		"client", "notify_id", "trade_status", "outcome", "out_trade_no", "trade_no", "amount", "state", "reason"}

	for _, tc := range []struct{ name, requestID, outcome string }{
		{name: "FirstNotice", outcome: "applied"},
		{name: "Duplicate", requestID: "alipay-retry-1", outcome: "duplicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, lines := post(body, tc.requestID)
			if tc.requestID != "" && id != tc.requestID {
				t.Fatalf("X-Request-Id = %q, want %q", id, tc.requestID)
			}
			if len(lines) != 1 {
				t.Fatalf("%d lines, want one:\n%s", len(lines), strings.Join(lines, "\n"))
			}
			if keys := jsonKeys(t, lines[0]); !slices.Equal(keys, wantKeys) {
				t.Errorf("keys %v, want %v", keys, wantKeys)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"level": "INFO", "msg": "http", "request_id": id, "method": "POST",
				"path": notifyPath, "status": 200.0, "client": "192.0.2.1", "notify_id": "2026113000222140005012345678901234",
				"trade_status": "TRADE_SUCCESS", "outcome": tc.outcome, "out_trade_no": "L-1", "trade_no": "T-L-1",
				"amount": "100.00", "state": "APPLIED", "reason": ""}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %#v, want %#v", k, got[k], v)
				}
			}
		})
	}

	t.Run("RefusedCarriesTheID", func(t *testing.T) {
		id, lines := post(body+"&total_amount=0.01", "")
		if len(lines) != 2 {
			t.Fatalf("%d lines, want the refusal and the access line:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		for i, msg := range []string{"notification refused", "http"} {
			var got struct{ Msg, RequestID, Outcome string }
			if err := json.Unmarshal([]byte(lines[i]), &struct {
				Msg       *string `json:"msg"`
				RequestID *string `json:"request_id"`
				Outcome   *string `json:"outcome"`
			}{&got.Msg, &got.RequestID, &got.Outcome}); err != nil {
				t.Fatal(err)
			}
			if got.Msg != msg || got.RequestID != id || id == "" {
				t.Errorf("line %d: msg %q request_id %q, want %q %q", i, got.Msg, got.RequestID, msg, id)
			}
			if i == 0 && got.Outcome != "bad_signature" {
				t.Errorf("refusal's outcome %q, want bad_signature", got.Outcome)
			}
		}
	})
}

// jsonKeys returns the keys of the JSON object line, in order.
func jsonKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}
