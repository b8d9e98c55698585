package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

// reloaderAnswers stands in for main's reloader (which the root tests
// run for real, in serve processes): it answers what the test sets and
// keeps the notes it was given.
type reloaderAnswers struct {
	apps  []service.App
	err   error
	notes []string
}

func (r *reloaderAnswers) ReloadAsked(_ context.Context, note string) ([]service.App, error) {
	r.notes = append(r.notes, note)
	return r.apps, r.err
}

// POST /admin/reload answers the accounts and apps in force, grouped by
// account and never a key, or 422 config_refused with the reason; it
// takes no body or a note, and refuses anything else before reloading.
// Every answer is checked against openapi.yaml.
func TestAdminReload(t *testing.T) {
	c := newCashier(t, daotest.Open(t, dao.DriverSQLite))
	admin := "Bearer " + payAdminToken
	c.reloader.apps = []service.App{
		{Provider: model.ProviderAlipay, Account: "2088000000000001", ID: "2021000000000001", Name: "web"},
		{Provider: model.ProviderAlipay, Account: "2088000000000001", ID: "2021000000000002"},
		{Provider: model.ProviderWechatpay, Account: "1900012345", ID: "wx1111111111111111", Name: "miniprogram"},
	}
	status, _, body := c.post(t, "/admin/reload", admin, "", "")
	want := `{"accounts":[{"provider":"alipay","account":"2088000000000001","apps":[{"app":"2021000000000001","name":"web"},{"app":"2021000000000002"}]},` +
		`{"provider":"wechatpay","account":"1900012345","apps":[{"app":"wx1111111111111111","name":"miniprogram"}]}]}`
	if status != http.StatusOK || strings.TrimSpace(string(body)) != want {
		t.Fatalf("reload: %d %s\nwant 200 %s", status, body, want)
	}
	if status, _, body := c.post(t, "/admin/reload", admin, "", `{"note":"APIv3 key reset"}`); status != http.StatusOK {
		t.Fatalf("reload with a note: %d %s", status, body)
	}
	if fmt.Sprint(c.reloader.notes) != "[ APIv3 key reset]" {
		t.Fatalf("notes handed over: %q", c.reloader.notes)
	}

	c.reloader.err = fmt.Errorf("%w: configuration:\n  /etc/providers.yaml: wechatpay[0] (mchid \"1900012345\"): apiv3_key_files[0]: an APIv3 key is 32 bytes, this is 31", model.ErrConfigRefused)
	status, _, body = c.post(t, "/admin/reload", admin, "", "")
	var answer struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &answer); err != nil || status != http.StatusUnprocessableEntity || answer.Error.Code != "config_refused" ||
		!strings.Contains(answer.Error.Message, "apiv3_key_files[0]") {
		t.Fatalf("refused: %d %s, want 422 config_refused naming the field", status, body)
	}

	asked := len(c.reloader.notes)
	for name, tc := range map[string]struct {
		auth, body string
		status     int
	}{
		"NoToken":      {"", "", http.StatusUnauthorized},
		"UnknownField": {admin, `{"why":"x"}`, http.StatusBadRequest},
		"NoteTooLong":  {admin, `{"note":"` + strings.Repeat("n", model.MaxNote+1) + `"}`, http.StatusBadRequest},
		"NotJSON":      {admin, `note=x`, http.StatusBadRequest},
	} {
		if status, _, body := c.post(t, "/admin/reload", tc.auth, "", tc.body); status != tc.status {
			t.Errorf("%s: %d %s, want %d", name, status, body, tc.status)
		}
	}
	if len(c.reloader.notes) != asked {
		t.Errorf("a refused request reloaded: notes %q", c.reloader.notes[asked:])
	}
}
