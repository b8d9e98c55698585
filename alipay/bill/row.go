package bill

import (
	"bytes"
	"encoding/csv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// row reads one data row. Commas never occur inside a GBK character (its
// trail bytes are 0x40 and above), so the raw bytes are split before
// decoding; only a row with quotes goes through a CSV reader.
func (s *scanner) row(raw []byte) (model.BillEntry, error) {
	cells, err := s.cells(raw)
	if err != nil {
		return model.BillEntry{}, err
	}
	cell := func(name string) []byte { return bytes.Trim(cells[s.cols[name]], " \t\r") }
	e := model.BillEntry{Line: s.line}

	switch kind := cell(ColKind); {
	case bytes.Equal(kind, gbkPayment):
		e.Kind = model.BillPayment
	case bytes.Equal(kind, gbkRefund):
		e.Kind = model.BillRefund
	default:
		text, err := s.decode(kind)
		if err != nil {
			return e, err
		}
		return e, s.fail("%s %q is neither %s nor %s", ColKind, model.Clip(text), kindPayment, kindRefund)
	}
	if e.TradeNo, err = s.ident(ColTradeNo, cell(ColTradeNo), true, model.MaxTradeNoLen); err != nil {
		return e, err
	}
	if e.OutTradeNo, err = s.ident(ColOutTradeNo, cell(ColOutTradeNo), true, model.MaxRefLen); err != nil {
		return e, err
	}
	if e.Kind == model.BillRefund {
		if e.OutRequestNo, err = s.ident(ColOutRequestNo, cell(ColOutRequestNo), false, model.MaxRefLen); err != nil {
			return e, err
		}
		if e.OutRequestNo == "" {
			// Alipay's rule: a refund asked without out_request_no is
			// named by the trade's out_trade_no.
			e.OutRequestNo = e.OutTradeNo
		}
	}
	if e.Amount, err = s.amount(ColAmount, cell(ColAmount), true); err != nil {
		return e, err
	}
	if e.Received, err = s.amount(ColReceived, cell(ColReceived), true); err != nil {
		return e, err
	}
	if e.Fee, err = s.amount(ColFee, cell(ColFee), false); err != nil {
		return e, err
	}
	if neg := e.Kind == model.BillRefund; neg != e.Amount.IsNegative() || (neg && e.Received.IsPositive()) || (!neg && e.Received.IsNegative()) {
		return e, s.fail("a %s with amounts %s / %s (a payment's are positive, a refund's negative)",
			e.Kind, e.Amount.StringFixed(2), e.Received.StringFixed(2))
	}
	at := cell(ColFinished)
	t, err := time.ParseInLocation("2006-01-02 15:04:05", string(at), model.Beijing)
	if err != nil {
		return e, s.fail("%s %q is not yyyy-MM-dd HH:mm:ss", ColFinished, model.Clip(string(at)))
	}
	e.FinishedAt = t.UTC()
	return e, nil
}

// cells splits a detail row into its cells, as many as the header has: a
// row with a quote is read as CSV, the others split at every comma.
func (s *scanner) cells(raw []byte) ([][]byte, error) {
	var cells [][]byte
	if bytes.IndexByte(raw, '"') >= 0 {
		r := csv.NewReader(bytes.NewReader(raw))
		r.LazyQuotes = true
		rec, err := r.Read()
		if err != nil {
			return nil, s.fail("unreadable row: %v", err)
		}
		for _, c := range rec {
			cells = append(cells, []byte(c))
		}
	} else {
		cells = bytes.Split(raw, []byte(","))
	}
	if len(cells) != s.ncols {
		return nil, s.fail("%d cells, the header has %d", len(cells), s.ncols)
	}
	return cells, nil
}

// ident reads an identifier cell: what the ledger can record
// (model.Recordable: at most most letters, digits, '-', '_', '.', ':'),
// checked while Open reads the whole file, so a line the ledger could not
// take fails the run before anything is repaired.
func (s *scanner) ident(col string, b []byte, need bool, most int) (string, error) {
	if len(b) == 0 {
		if need {
			return "", s.fail("%s is empty", col)
		}
		return "", nil
	}
	if !model.Recordable(string(b), most) {
		return "", s.fail("%s %q is not an identifier of at most %d letters, digits, '-', '_', '.', ':'", col, model.Clip(strings.ToValidUTF8(string(b), "?")), most)
	}
	return string(b), nil
}

// amount reads yuan with at most two decimals; an optional empty cell is 0.
func (s *scanner) amount(col string, b []byte, need bool) (decimal.Decimal, error) {
	if len(b) == 0 && !need {
		return decimal.Zero, nil
	}
	if !isAmount(b) {
		return decimal.Decimal{}, s.fail("%s %q is not an amount", col, model.Clip(string(b)))
	}
	d, err := decimal.NewFromString(string(b))
	if err != nil {
		return decimal.Decimal{}, s.fail("%s %q is not an amount", col, model.Clip(string(b)))
	}
	return d, nil
}

// isAmount matches -?[0-9]+(\.[0-9]{1,2})? without a regexp, on the hot
// path of a million rows.
func isAmount(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == 0 || i > 12 {
		return false
	}
	if i == len(b) {
		return true
	}
	if b[i] != '.' {
		return false
	}
	frac := b[i+1:]
	if len(frac) < 1 || len(frac) > 2 {
		return false
	}
	for _, c := range frac {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func hasNonASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}
