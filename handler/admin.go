package handler

import (
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/shopspring/decimal"

	"paynotify/model"
	"paynotify/service"
)

// Admin serves operators under /admin: views of the outbox, the journal
// and an order's refunds, and after-sale refunds (POST
// /admin/orders/:sn/refunds, which moves money). Every POST under /admin
// that changes something is written to admin_audit in the change's
// transaction, as model.OperatorAdminAPI's (the token's holder; the token
// is never recorded), like the console's actions.
type Admin struct {
	queues    *service.Queues
	dashboard *service.Dashboard
	lookup    *service.Lookup
	refunds   *service.Refunds
}

// adminAuth admits requests bearing the ADMIN_TOKEN.
func adminAuth(token string) gin.HandlerFunc {
	return func(c *gin.Context) {
		got, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			writeAPIError(c, http.StatusUnauthorized, "unauthorized", "admin token required")
			return
		}
		c.Next()
	}
}

// Outbox handles GET /admin/outbox?state=pending|failed|sent&limit=N.
func (a *Admin) Outbox(c *gin.Context) {
	state := model.OutboxState(strings.ToUpper(c.DefaultQuery("state", "pending")))
	switch state {
	case model.OutboxPending, model.OutboxFailed, model.OutboxSent:
	default:
		writeAPIError(c, http.StatusBadRequest, "invalid_request", "state must be pending, failed or sent")
		return
	}
	limit, err := strconv.Atoi(c.DefaultQuery("limit", "100"))
	if err != nil || limit < 1 || limit > 1000 {
		writeAPIError(c, http.StatusBadRequest, "invalid_request", "limit must be 1 to 1000")
		return
	}
	rows, count, err := a.queues.Outbox(c.Request.Context(), state, limit)
	if err != nil {
		apiError(c, err)
		return
	}
	type item struct {
		Seq           int64             `json:"seq"`
		Event         model.Event       `json:"event"`
		Attempts      int               `json:"attempts"`
		NextAttemptAt string            `json:"next_attempt_at"`
		LastError     string            `json:"last_error,omitempty"`
		State         model.OutboxState `json:"state"`
	}
	items := make([]item, len(rows))
	for i, r := range rows {
		items[i] = item{Seq: r.Seq, Event: r.Event, Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt.UTC().Format("2006-01-02T15:04:05Z"),
			LastError: r.LastError, State: r.State}
	}
	writeJSON(c, http.StatusOK, gin.H{"state": state, "count": count, "events": items})
}

// JournalTotals handles GET /admin/journal/totals: debits and credits per
// account, and whether the journal balances.
func (a *Admin) JournalTotals(c *gin.Context) {
	totals, err := a.dashboard.JournalTotals(c.Request.Context())
	if err != nil {
		apiError(c, err)
		return
	}
	var debit, credit decimal.Decimal
	accounts := make([]gin.H, len(totals))
	for i, t := range totals {
		debit, credit = debit.Add(t.Debit), credit.Add(t.Credit)
		accounts[i] = gin.H{"account": t.Account, "debit": t.Debit.StringFixed(2), "credit": t.Credit.StringFixed(2)}
	}
	writeJSON(c, http.StatusOK, gin.H{
		"accounts": accounts, "debit": debit.StringFixed(2), "credit": credit.StringFixed(2),
		"balanced": debit.Equal(credit),
	})
}
