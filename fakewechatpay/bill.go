package fakewechatpay

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
	"paynotify/wechatpay"
	"paynotify/wechatpay/bill"
)

// billURLTTL is how long a download_url works, as WeChat Pay's.
const billURLTTL = 5 * time.Minute

// billState is what the fake keeps for bills: the files it has handed out
// URLs for, and the tests' edits.
type billState struct {
	served  map[string]servedBill     // by token
	edits   map[string]billEdit       // by transaction_id
	extra   map[string][]bill.Line    // by bill_date: rows of trades the fake never made
	files   map[string]servedOverride // by bill_date: served instead of the real bill
	badHash int                       // the next queries answer a wrong hash_value
	expired int                       // the next queries answer a URL already expired
}

type servedBill struct {
	body    []byte
	expires time.Time
}

type servedOverride struct {
	file []byte
	hash string
}

// billEdit is how a trade's rows differ in the bill from the trade.
type billEdit struct {
	drop  bool
	total *int64
}

// DropFromBill leaves the trade transactionID (its payment and refunds)
// out of every bill: a payment WeChat Pay never settled.
func (s *Server) DropFromBill(transactionID string) {
	s.editBill(transactionID, func(e *billEdit) { e.drop = true })
}

// BillAmount makes the bill show fen as the payment transactionID's
// amount.
func (s *Server) BillAmount(transactionID string, fen int64) {
	s.editBill(transactionID, func(e *billEdit) { e.total = &fen })
}

// AddToBill adds l to the bill of its day: a trade or a refund the fake
// never made, as a row only the bill shows.
func (s *Server) AddToBill(l bill.Line) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.billInit()
	day := l.FinishedAt.In(model.Beijing).Format(time.DateOnly)
	s.bill.extra[day] = append(s.bill.extra[day], l)
}

// ServeBill makes the file of day (yyyy-MM-dd) exactly file — a damaged
// one, for tests — with the SHA1 of what it decompresses to as hash_value
// (of file itself when it is no gzip); nil serves the real bill again.
func (s *Server) ServeBill(day string, file []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.billInit()
	if file == nil {
		delete(s.bill.files, day)
		return
	}
	text := file
	if zr, err := gzip.NewReader(bytes.NewReader(file)); err == nil {
		if b, err := io.ReadAll(zr); err == nil {
			text = b
		}
	}
	s.bill.files[day] = servedOverride{file: file, hash: bill.Hash(text)}
}

// WrongBillHash makes the next times bill queries answer a hash_value that
// is not the file's.
func (s *Server) WrongBillHash(times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.billInit()
	s.bill.badHash += times
}

// ExpireBillURL makes the next times bill queries answer a download_url
// that has expired by the time it is fetched.
func (s *Server) ExpireBillURL(times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.billInit()
	s.bill.expired += times
}

// ConsoleRefund refunds fen of the paid trade outTradeNo as the merchant
// platform (商户平台) does, at at: under outRefundNo, with no call from
// the service and no notification.
func (s *Server) ConsoleRefund(outTradeNo, outRefundNo string, fen int64, at time.Time) error {
	s.mu.Lock()
	t, ok := s.byOut[outTradeNo]
	var total int64
	if ok {
		total = t.Total
	}
	s.mu.Unlock()
	if !ok {
		return errNoTrade
	}
	if _, err := s.makeRefund(Refund{OutRefundNo: outRefundNo, OutTradeNo: outTradeNo, Refund: fen, Total: total}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.refunds[outRefundNo]
	r.Created, r.Settled = at, at
	return nil
}

func (s *Server) editBill(transactionID string, f func(*billEdit)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.billInit()
	e := s.bill.edits[transactionID]
	f(&e)
	s.bill.edits[transactionID] = e
}

// billInit makes the maps. The caller holds s.mu.
func (s *Server) billInit() {
	if s.bill.served == nil {
		s.bill.served = make(map[string]servedBill)
		s.bill.edits = make(map[string]billEdit)
		s.bill.extra = make(map[string][]bill.Line)
		s.bill.files = make(map[string]servedOverride)
	}
}

// Bill is the trade bill (bill_type ALL) of day as the fake serves it,
// decompressed: a SUCCESS row per trade paid that Beijing day and a REFUND
// row per refund that succeeded that day, in time order, then the summary.
func (s *Server) Bill(day time.Time) []byte {
	s.mu.Lock()
	s.billInit()
	lines := s.billLines(day)
	s.mu.Unlock()
	var b bytes.Buffer
	w := bill.NewWriter(&b, bill.Header{AppID: s.cfg.AppID, MchID: s.cfg.MchID})
	for _, l := range lines {
		w.Write(l)
	}
	w.Close()
	return b.Bytes()
}

// feeRate is the fee WeChat Pay charges here: 0.6 %, in units of 0.00001
// yuan per fen.
const feeRate = 6

// billLines are the bill's rows for day. The caller holds s.mu.
func (s *Server) billLines(day time.Time) []bill.Line {
	y, m, d := day.In(model.Beijing).Date()
	on := func(t time.Time) bool {
		ty, tm, td := t.In(model.Beijing).Date()
		return ty == y && tm == m && td == d
	}
	money := func(fen int64) decimal.Decimal { return decimal.New(fen, -2) }
	var lines []bill.Line
	for _, t := range s.trades() {
		e := s.bill.edits[t.TransactionID]
		if t.Paid.IsZero() || !on(t.Paid) || e.drop {
			continue
		}
		total := t.Total
		if e.total != nil {
			total = *e.total
		}
		lines = append(lines, bill.Line{
			BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: t.TransactionID, OutTradeNo: t.OutTradeNo,
				Amount: money(total), Received: money(total), Fee: decimal.New(-total*feeRate, -5), FinishedAt: t.Paid.UTC(),
				App: t.AppID}, // "" is the merchant's own appid (the header's)
			Subject: t.Description,
		})
	}
	for _, r := range s.refunds {
		if r.Status != wechatpay.RefundSuccess || !on(r.Settled) || s.bill.edits[r.TransactionID].drop {
			continue
		}
		lines = append(lines, bill.Line{
			BillEntry: model.BillEntry{Kind: model.BillRefund, TradeNo: r.TransactionID, OutTradeNo: r.OutTradeNo,
				OutRequestNo: r.OutRefundNo, Amount: money(-r.Refund), Received: money(-r.Refund),
				Fee: decimal.New(r.Refund*feeRate, -5), FinishedAt: r.Settled.UTC(), App: s.byOut[r.OutTradeNo].AppID},
			RefundID: r.RefundID, OrderAmount: money(r.Total), Subject: s.byOut[r.OutTradeNo].Description,
		})
	}
	lines = append(lines, s.bill.extra[day.In(model.Beijing).Format(time.DateOnly)]...)
	slices.SortFunc(lines, func(a, b bill.Line) int {
		if c := a.FinishedAt.Compare(b.FinishedAt); c != 0 {
			return c
		}
		return strings.Compare(a.TradeNo+a.OutRequestNo, b.TradeNo+b.OutRequestNo)
	})
	return lines
}

// tradeBill serves GET /v3/bill/tradebill?bill_date=&bill_type=&tar_type=.
func (s *Server) tradeBill(r *http.Request, _ []byte) (int, any) {
	q := r.URL.Query()
	date := q.Get("bill_date")
	day, err := time.ParseInLocation(time.DateOnly, date, model.Beijing)
	if err != nil {
		return fail(http.StatusBadRequest, "PARAM_ERROR", "bill_date must be YYYY-MM-DD")
	}
	if t := q.Get("bill_type"); t != "" && t != "ALL" {
		return fail(http.StatusBadRequest, "PARAM_ERROR", "this fake serves bill_type ALL only")
	}
	gz := q.Get("tar_type") == "GZIP"
	if t := q.Get("tar_type"); t != "" && !gz {
		return fail(http.StatusBadRequest, "PARAM_ERROR", "tar_type must be GZIP")
	}
	s.mu.Lock()
	s.billInit()
	over, override := s.bill.files[date]
	lines := s.billLines(day)
	s.mu.Unlock()

	var body []byte
	var hash string
	switch {
	case override:
		body, hash = over.file, over.hash
	case len(lines) == 0:
		return fail(http.StatusBadRequest, "NO_STATEMENT_EXIST", "当日无交易，账单不存在")
	default:
		text := s.Bill(day)
		body, hash = text, bill.Hash(text)
		if gz {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write(text)
			zw.Close()
			body = b.Bytes()
		}
	}
	token := nonce(32)
	s.mu.Lock()
	expires := s.now().Add(billURLTTL)
	if s.bill.expired > 0 {
		s.bill.expired--
		expires = s.now().Add(-time.Second)
	}
	if s.bill.badHash > 0 {
		s.bill.badHash--
		hash = bill.Hash(append([]byte("not "), body...))
	}
	s.bill.served[token] = servedBill{body: body, expires: expires}
	s.mu.Unlock()
	return http.StatusOK, map[string]string{
		"hash_type": "SHA1", "hash_value": hash,
		"download_url": "https://api.mch.weixin.qq.com/v3/billdownload/file?token=" + token,
	}
}

// billDownload serves GET /v3/billdownload/file?token=: the bill while
// its URL lasts, signed request only, unsigned answer.
func (s *Server) billDownload(w http.ResponseWriter, r *http.Request) {
	if s.merchant != nil {
		if why := s.verifyCall(r, nil); why != "" {
			s.reply(w, false)(fail(http.StatusUnauthorized, "SIGN_ERROR", why))
			return
		}
	}
	tok := r.URL.Query().Get("token")
	s.mu.Lock()
	s.billInit()
	f, ok := s.bill.served[tok]
	if ok && s.now().After(f.expires) {
		delete(s.bill.served, tok)
		s.mu.Unlock()
		s.reply(w, false)(fail(http.StatusBadRequest, "INVALID_REQUEST", "下载链接已过期"))
		return
	}
	s.mu.Unlock()
	if !ok {
		s.reply(w, false)(fail(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "no such bill"))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(f.body)
}

// yuan writes fen as yuan with two decimals.
func yuan(fen int64) string { return decimal.New(fen, -2).StringFixed(2) }
