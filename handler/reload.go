package handler

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"paynotify/model"
	"paynotify/service"
)

// Reloader re-reads the providers' configuration (PROVIDERS_FILE, or the
// ALIPAY_*/WECHATPAY_* variables' key files), checks it as at start and
// puts it in force whole, audited as the admin API's with note: it
// returns the apps now in force, or model.ErrConfigRefused saying why
// nothing changed. main's reloader is one; SIGHUP runs the same.
type Reloader interface {
	ReloadAsked(ctx context.Context, note string) ([]service.App, error)
}

// reloadView is POST /admin/reload's answer: the accounts and apps in
// force, by their ids and names (never a key, nor a file's path).
type reloadView struct {
	Accounts []accountView `json:"accounts"`
}

type accountView struct {
	Provider string    `json:"provider"`
	Account  string    `json:"account"`
	Apps     []appView `json:"apps"`
}

type appView struct {
	App  string `json:"app"`
	Name string `json:"name,omitempty"`
}

// newReloadView groups apps, in configuration order, by account.
func newReloadView(apps []service.App) reloadView {
	v := reloadView{Accounts: []accountView{}}
	for _, a := range apps {
		n := len(v.Accounts)
		if n == 0 || v.Accounts[n-1].Provider != string(a.Provider) || v.Accounts[n-1].Account != a.Account {
			v.Accounts = append(v.Accounts, accountView{Provider: string(a.Provider), Account: a.Account})
			n++
		}
		v.Accounts[n-1].Apps = append(v.Accounts[n-1].Apps, appView{App: a.ID, Name: a.Name})
	}
	return v
}

// reload handles POST /admin/reload, with no body or {"note": "..."}:
// 200 with the accounts and apps now in force, or 422 config_refused
// saying what is wrong (nothing changed).
func reload(r Reloader) gin.HandlerFunc {
	return func(c *gin.Context) {
		var req struct {
			Note string `json:"note"`
		}
		if c.Request.ContentLength != 0 {
			if err := decodeJSON(c, &req); err != nil {
				apiError(c, err)
				return
			}
		}
		if err := model.CheckNote(req.Note); err != nil {
			apiError(c, err)
			return
		}
		apps, err := r.ReloadAsked(c.Request.Context(), req.Note)
		if err != nil {
			apiError(c, err)
			return
		}
		writeJSON(c, http.StatusOK, newReloadView(apps))
	}
}
