package fakealipay

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay/bill"
	"paynotify/model"
)

// MethodBillURL is the bill download URL query.
const MethodBillURL = "alipay.data.dataservice.bill.downloadurl.query"

// billURLTTL is how long a download URL works, as Alipay's (about 30 s).
const billURLTTL = 30 * time.Second

// feeRate is the service fee the fake charges: 0.6 %, Alipay's usual rate.
var feeRate = decimal.RequireFromString("0.006")

// billState is what the fake keeps for bills: the ZIPs it has handed out
// URLs for, and the tests' edits.
type billState struct {
	served map[string]servedBill // by token
	edits  map[string]billEdit   // by trade_no
	files  map[string][]byte     // by bill_date: served instead of the real bill
}

type servedBill struct {
	zip     []byte
	expires time.Time
}

// billEdit is how a trade's lines differ in the bill from the trade.
type billEdit struct {
	drop       bool
	amount     *decimal.Decimal
	finishedAt *time.Time
}

type billURLAnswer struct {
	result
	BillDownloadURL string `json:"bill_download_url"`
}

// DropFromBill leaves the trade tradeNo (its payment and refunds) out of
// every bill: a payment Alipay never settled.
func (s *Server) DropFromBill(tradeNo string) {
	s.editBill(tradeNo, func(e *billEdit) { e.drop = true })
}

// BillAmount makes the bill show amount for the payment tradeNo.
func (s *Server) BillAmount(tradeNo string, amount decimal.Decimal) {
	s.editBill(tradeNo, func(e *billEdit) { e.amount = &amount })
}

// BillFinishedAt makes the bill date the payment tradeNo at, which decides
// the day's bill it is in: Alipay may put a 23:59:59 payment in the next
// day's.
func (s *Server) BillFinishedAt(tradeNo string, at time.Time) {
	s.editBill(tradeNo, func(e *billEdit) { e.finishedAt = &at })
}

// ServeBill makes the bill of day (yyyy-MM-dd) exactly zip — a damaged
// file, for tests; nil serves the real bill again.
func (s *Server) ServeBill(day string, zip []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.billInit()
	if zip == nil {
		delete(s.bill.files, day)
		return
	}
	s.bill.files[day] = zip
}

// ConsoleRefund refunds amount of the paid trade tradeNo as the merchant's
// console does: under outRequestNo, with no call from the service and no
// notification.
func (s *Server) ConsoleRefund(tradeNo, outRequestNo string, amount decimal.Decimal) error {
	_, err := s.refundTrade("", "", tradeNo, outRequestNo, amount)
	return err
}

func (s *Server) editBill(tradeNo string, f func(*billEdit)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.billInit()
	e := s.bill.edits[tradeNo]
	f(&e)
	s.bill.edits[tradeNo] = e
}

// billInit makes the maps. The caller holds s.mu.
func (s *Server) billInit() {
	if s.bill.served == nil {
		s.bill.served = make(map[string]servedBill)
		s.bill.edits = make(map[string]billEdit)
		s.bill.files = make(map[string][]byte)
	}
}

// billURL builds the day's bill of the calling app's seller from the
// trades as they are now (a bill covers a seller: every app of it, no
// other seller's) and answers a short-lived URL to it. A day without
// business has no bill.
func (s *Server) billURL(c *call) (any, error) {
	if c.biz.BillType != "trade" {
		return failure("40004", "isv.invalid-bill-type"), nil
	}
	day, err := time.ParseInLocation("2006-01-02", c.biz.BillDate, model.Beijing)
	if err != nil {
		return failure("40004", "isv.invalid-bill-date"), nil
	}
	s.mu.Lock()
	s.billInit()
	zip, override := s.bill.files[c.biz.BillDate]
	lines := s.billLines(day, c.app.seller)
	s.mu.Unlock()

	if !override {
		if len(lines) == 0 {
			return failure("40004", "isp.bill_not_exist"), nil
		}
		var b bytes.Buffer
		err := bill.WriteZip(&b, bill.Header{Account: c.app.seller, Date: day}, func(w *bill.Writer) error {
			for _, l := range lines {
				if err := w.Write(l); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		zip = b.Bytes()
	}
	token := make([]byte, 16)
	rand.Read(token)
	tok := hex.EncodeToString(token)
	s.mu.Lock()
	s.bill.served[tok] = servedBill{zip: zip, expires: s.now().Add(billURLTTL)}
	s.mu.Unlock()
	return billURLAnswer{result: success, BillDownloadURL: c.base + "bill/" + tok + ".zip"}, nil
}

// billLines are seller's bill's lines for day: the payments finished and
// the refunds made that Beijing day, in time order. The caller holds s.mu.
func (s *Server) billLines(day time.Time, seller string) []bill.Line {
	from, to := day, day.AddDate(0, 0, 1)
	in := func(t time.Time) bool { return !t.Before(from) && t.Before(to) }
	var lines []bill.Line
	for no, t := range s.byNo {
		e := s.bill.edits[no]
		if e.drop || t.Paid.IsZero() || t.SellerID != seller {
			continue
		}
		finished := t.Paid
		if e.finishedAt != nil {
			finished = *e.finishedAt
		}
		if in(finished) {
			amount := t.TotalAmount
			if e.amount != nil {
				amount = *e.amount
			}
			lines = append(lines, bill.Line{
				BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: t.TradeNo, OutTradeNo: t.OutTradeNo,
					Amount: amount, Received: amount, Fee: amount.Mul(feeRate).Round(2).Neg(), FinishedAt: finished.UTC()},
				Subject: t.Subject, CreatedAt: t.Created,
			})
		}
		for _, r := range t.Refunds {
			if !in(r.At) {
				continue
			}
			lines = append(lines, bill.Line{
				BillEntry: model.BillEntry{Kind: model.BillRefund, TradeNo: t.TradeNo, OutTradeNo: t.OutTradeNo,
					OutRequestNo: r.OutRequestNo, Amount: r.Amount.Neg(), Received: r.Amount.Neg(),
					Fee: r.Amount.Mul(feeRate).Round(2), FinishedAt: r.At.UTC()},
				Subject: t.Subject, CreatedAt: r.At,
			})
		}
	}
	slices.SortFunc(lines, func(a, b bill.Line) int {
		if c := a.FinishedAt.Compare(b.FinishedAt); c != 0 {
			return c
		}
		if a.TradeNo != b.TradeNo {
			if a.TradeNo < b.TradeNo {
				return -1
			}
			return 1
		}
		return 0
	})
	return lines
}

// billDownload serves a bill ZIP while its URL lasts.
func (s *Server) billDownload(w http.ResponseWriter, r *http.Request) {
	tok := r.PathValue("file")
	if len(tok) > 4 {
		tok = tok[:len(tok)-len(".zip")]
	}
	s.mu.Lock()
	b, ok := s.bill.served[tok]
	if ok && s.now().After(b.expires) {
		delete(s.bill.served, tok)
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		http.Error(w, "fakealipay: bill URL unknown or expired", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/zip")
	w.Write(b.zip)
}
