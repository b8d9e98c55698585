package handler

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/model"
)

// failingVerifier stands in for WeChat Pay's verifier and fails every
// notification with err.
type failingVerifier struct{ err error }

func (v failingVerifier) Notice(context.Context, http.Header, []byte) (model.Notice, error) {
	return model.Notice{}, v.err
}

// An error the table does not list is an internal error: 500
// {"code":"FAIL","message":"internal error"}, its text in the log once
// and never in the answer. It panicked before (the internal row has no
// sentinel to take words from).
func TestWeChatPayUnlistedErrorIsInternal(t *testing.T) {
	var logs bytes.Buffer
	h := New(Deps{
		Log:       slog.New(slog.NewTextHandler(&logs, nil)),
		WeChatPay: failingVerifier{errors.New("secret driver text")},
		Registry:  prometheus.NewRegistry(),
	})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/wechatpay/notify", strings.NewReader(`{}`)))
	if w.Code != http.StatusInternalServerError || w.Body.String() != `{"code":"FAIL","message":"internal error"}`+"\n" {
		t.Errorf("answered %d %q", w.Code, w.Body)
	}
	if n := strings.Count(logs.String(), "secret driver text"); n != 1 || strings.Contains(logs.String(), "panic") {
		t.Errorf("the cause is logged %d times, want once, and no panic:\n%s", n, logs.String())
	}
}
