package handler

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"paynotify/model"
	"paynotify/service"
)

// Reconciliations serves the reconciliation views under /admin: runs,
// their items, and an operator's resolution of an item, of each configured
// provider account's bill.
type Reconciliations struct {
	recons service.Reconcilers
}

// run is the reconciliation and the date a route names:
// /reconciliations/{date}… is Alipay's (as before WeChat Pay),
// /reconciliations/{provider}/{date}… the provider's. gin wants one name
// for the first wildcard of both. ?account=ID names the provider account
// (a seller_id, an mchid): required when the provider has several, a 400
// naming them otherwise.
func (h *Reconciliations) run(c *gin.Context) (*service.BillReconciler, string, error) {
	first, date := c.Param("first"), c.Param("date")
	if date == "" {
		first, date = string(model.DefaultProvider), first
	}
	p, err := model.ParseProvider(first)
	if err != nil {
		return nil, "", fmt.Errorf("%w: no provider %q", model.ErrRunNotFound, model.Clip(first))
	}
	r, err := h.recons.Of(p, c.Query("account"))
	if err != nil {
		return nil, "", err
	}
	return r, date, nil
}

// List handles GET /admin/reconciliations?provider=P&account=ID&limit=N:
// the latest runs of provider P's account ID — of every account of P
// without it, of every configured provider without P — newest date first
// (a date's runs in the order model.Providers() lists them, a provider's by
// account), each with its state, its counts per outcome and the bill's
// totals against the ledger's.
func (h *Reconciliations) List(c *gin.Context) {
	limit, err := strconv.Atoi(c.DefaultQuery("limit", "60"))
	if err != nil || limit < 1 || limit > 366 {
		writeAPIError(c, http.StatusBadRequest, "invalid_request", "limit must be 1 to 366")
		return
	}
	recons := h.recons.All()
	if q, asked := c.GetQuery("provider"); asked {
		p, err := model.ParseProvider(q)
		if err != nil {
			apiError(c, err)
			return
		}
		if h.recons[p] == nil {
			apiError(c, fmt.Errorf("%w: %s", model.ErrProviderOff, p.Name()))
			return
		}
		recons = h.recons[p]
		if account := c.Query("account"); account != "" {
			r, err := h.recons.Of(p, account)
			if err != nil {
				apiError(c, err)
				return
			}
			recons = []*service.BillReconciler{r}
		}
	} else if c.Query("account") != "" {
		writeAPIError(c, http.StatusBadRequest, "invalid_request", "account names an account of a provider: give provider too")
		return
	}
	var runs []model.ReconRun
	for _, r := range recons {
		some, err := r.Runs(c.Request.Context(), limit)
		if err != nil {
			apiError(c, err)
			return
		}
		runs = append(runs, some...)
	}
	// Each account's are newest first already: a stable sort by date
	// keeps a date's runs in provider and account order.
	slices.SortStableFunc(runs, func(a, b model.ReconRun) int { return cmp.Compare(b.BillDate, a.BillDate) })
	runs = runs[:min(len(runs), limit)]
	out := make([]RunView, len(runs))
	for i, r := range runs {
		out[i] = NewRunView(r)
	}
	writeJSON(c, http.StatusOK, gin.H{"reconciliations": out})
}

// Detail handles GET /admin/reconciliations/{provider}/{date}?outcome=X&limit=N
// (and /admin/reconciliations/{date}, Alipay's): a run with its attempts
// and its items, of one outcome if asked.
func (h *Reconciliations) Detail(c *gin.Context) {
	recon, date, err := h.run(c)
	if err != nil {
		apiError(c, err)
		return
	}
	limit, err := strconv.Atoi(c.DefaultQuery("limit", "1000"))
	if err != nil || limit < 1 || limit > 10000 {
		writeAPIError(c, http.StatusBadRequest, "invalid_request", "limit must be 1 to 10000")
		return
	}
	d, err := recon.Detail(c.Request.Context(), date, model.ReconOutcomeNamed(c.Query("outcome")), limit)
	if err != nil {
		apiError(c, err)
		return
	}
	items := make([]itemView, len(d.Items))
	for i, it := range d.Items {
		items[i] = newItemView(it)
	}
	writeJSON(c, http.StatusOK, gin.H{"reconciliation": NewRunView(d.ReconRun), "attempts": d.History, "items": items})
}

// Run handles POST /admin/reconciliations/{provider}/{date}/run (and
// /admin/reconciliations/{date}/run, Alipay's): reconciles the date now (again, if it ran before: items are recomputed, nothing repaired
// twice) and answers the run as it ended — or, for a day too big to finish
// within the request's deadline, 202 with the run RUNNING and Location its
// view, while it goes on. 409 reconciliation_running when another instance
// holds the date. A run claimed is in admin_audit.
func (h *Reconciliations) Run(c *gin.Context) {
	recon, date, err := h.run(c)
	if err != nil {
		apiError(c, err)
		return
	}
	run, done, err := recon.RunAsked(c.Request.Context(), date)
	if err != nil {
		apiError(c, err)
		return
	}
	if !done {
		view := "/admin/reconciliations/" + string(run.Provider) + "/" + run.BillDate
		if c.Param("date") == "" { // asked by the route without the provider: answered the same way
			view = "/admin/reconciliations/" + run.BillDate
		}
		if account := c.Query("account"); account != "" {
			view += "?account=" + url.QueryEscape(account)
		}
		c.Header("Location", view)
		writeJSON(c, http.StatusAccepted, NewRunView(run))
		return
	}
	writeJSON(c, http.StatusOK, NewRunView(run))
}

// Resolve handles POST /admin/reconciliations/{provider}/{date}/items/{id}/resolve
// (and /admin/reconciliations/{date}/items/{id}/resolve, Alipay's) with {"note": "...", "operator": "..."}: the item is marked resolved
// with the note, once; a second resolution returns the first.
func (h *Reconciliations) Resolve(c *gin.Context) {
	recon, date, err := h.run(c)
	if err != nil {
		apiError(c, err)
		return
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		apiError(c, fmt.Errorf("%w: item id %q", model.ErrItemNotFound, c.Param("id")))
		return
	}
	var req struct {
		Note     string `json:"note"`
		Operator string `json:"operator"`
	}
	if err := decodeJSON(c, &req); err != nil {
		apiError(c, err)
		return
	}
	if req.Operator == "" {
		req.Operator = "admin"
	}
	it, err := recon.ResolveItem(c.Request.Context(), date, id, req.Operator, req.Note)
	if err != nil {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusOK, newItemView(it))
}

// RunView is a run as operators read it, in the one shape the admin API
// and paynotify reconcile print: money as strings with two decimals, the
// bill's and the ledger's totals under the same names.
type RunView struct {
	Provider string `json:"provider"`
	// Account is the provider account whose bill it is.
	Account    string         `json:"account"`
	BillDate   string         `json:"bill_date"`
	State      string         `json:"state"`
	Attempts   int            `json:"attempts"`
	StartedAt  string         `json:"started_at,omitempty"`
	FinishedAt string         `json:"finished_at,omitempty"`
	Error      string         `json:"error,omitempty"`
	Counts     map[string]int `json:"counts"`
	Unresolved int            `json:"unresolved"`
	Bill       gin.H          `json:"bill"`
	Ledger     gin.H          `json:"ledger"`
}

// NewRunView is r as operators read it.
func NewRunView(r model.ReconRun) RunView {
	v := RunView{Provider: string(r.Provider), Account: r.Account, BillDate: r.BillDate, State: string(r.State), Attempts: r.Attempts, Error: r.Error,
		Counts: map[string]int{}, Unresolved: r.Unresolved,
		Bill: gin.H{"payments": r.Bill.Payments, "payment_amount": r.Bill.PaymentReceived.StringFixed(2),
			"refunds": r.Bill.Refunds, "refund_amount": r.Bill.RefundReceived.Neg().StringFixed(2), "fees": r.Bill.Fees.Neg().StringFixed(2)},
		Ledger: gin.H{"payments": r.Ledger.Payments, "payment_amount": r.Ledger.PaymentAmount.StringFixed(2),
			"refunds": r.Ledger.Refunds, "refund_amount": r.Ledger.RefundAmount.StringFixed(2)},
	}
	for _, o := range model.ReconOutcomes {
		v.Counts[string(o)] = r.Counts[o]
	}
	if r.StartedAt != nil {
		v.StartedAt = r.StartedAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	if r.FinishedAt != nil {
		v.FinishedAt = r.FinishedAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	return v
}

// itemView is one item as operators read it.
type itemView struct {
	ID           int64  `json:"id"`
	Outcome      string `json:"outcome"`
	TradeNo      string `json:"trade_no,omitempty"`
	OutTradeNo   string `json:"out_trade_no,omitempty"`
	OutRequestNo string `json:"out_request_no,omitempty"`
	BillAmount   string `json:"bill_amount,omitempty"`
	LedgerAmount string `json:"ledger_amount,omitempty"`
	Detail       string `json:"detail,omitempty"`
	Resolved     bool   `json:"resolved"`
	ResolvedAt   string `json:"resolved_at,omitempty"`
	ResolvedBy   string `json:"resolved_by,omitempty"`
	Note         string `json:"note,omitempty"`
}

func newItemView(it model.ReconItem) itemView {
	v := itemView{ID: it.ID, Outcome: string(it.Outcome), TradeNo: it.TradeNo, OutTradeNo: it.OutTradeNo,
		OutRequestNo: it.OutRequestNo, Detail: it.Detail, Resolved: it.ResolvedAt != nil, ResolvedBy: it.ResolvedBy, Note: it.Note}
	if it.BillAmount != nil {
		v.BillAmount = it.BillAmount.StringFixed(2)
	}
	if it.LedgerAmount != nil {
		v.LedgerAmount = it.LedgerAmount.StringFixed(2)
	}
	if it.ResolvedAt != nil {
		v.ResolvedAt = it.ResolvedAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	return v
}
