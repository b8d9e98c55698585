package bill

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"
	"golang.org/x/text/encoding/simplifiedchinese"

	"paynotify/model"
)

// maxLine bounds one line of the detail; real lines are a few hundred
// bytes.
const maxLine = 64 << 10

// Where the scanner is in the file.
type part int

const (
	preamble part = iota // # lines before the begin marker
	header               // the header row comes next
	rows                 // data rows, until the end marker
	trailer              // # lines after the end marker
)

// Totals lines: "#交易合计：3笔，商家实收共3.00元，…" and
// "#退款合计：1笔，商家实收退款共-1.00元，…".
var (
	paymentTotals = regexp.MustCompile(`^#交易合计[:：]\s*(\d+)\s*笔[,，]\s*商家实收共\s*(-?\d+(?:\.\d{1,2})?)\s*元`)
	refundTotals  = regexp.MustCompile(`^#退款合计[:：]\s*(\d+)\s*笔[,，]\s*商家实收退款共\s*(-?\d+(?:\.\d{1,2})?)\s*元`)
)

// gbkPayment and gbkRefund are 交易 and 退款 as GBK bytes: the kind cell is
// compared undecoded.
var gbkPayment, gbkRefund = mustGBK(kindPayment), mustGBK(kindRefund)

func mustGBK(s string) []byte {
	b, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(s))
	if err != nil {
		panic(err)
	}
	return b
}

// scanner holds what Scan has learnt of the file so far.
type scanner struct {
	part    part
	line    int
	cols    map[string]int
	ncols   int
	stated  model.BillTotals
	counted model.BillTotals
	seen    struct{ payments, refunds bool }
}

// Scan reads a detail (GBK CSV in Alipay's layout) from r, calling fn for
// each entry, and returns the totals the file states once it has checked
// that its entries add up to them. fn may be nil; its error stops Scan and
// is returned as is. A fault found late in the file comes after fn has seen
// earlier entries: act on them only once Scan has returned nil (Open does
// exactly that).
func Scan(r io.Reader, fn func(model.BillEntry) error) (model.BillTotals, error) {
	s := &scanner{}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		raw, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return model.BillTotals{}, s.fail("line longer than %d bytes", maxLine)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, model.ErrBadBill) {
				return model.BillTotals{}, err
			}
			return model.BillTotals{}, fmt.Errorf("%w: reading line %d: %v", model.ErrBadBill, s.line+1, err)
		}
		if len(raw) > 0 {
			s.line++
			if err != nil && s.part == rows && raw[0] != '#' {
				return model.BillTotals{}, s.fail("the file ends mid-row: truncated")
			}
			if ferr := s.take(bytes.TrimRight(raw, "\r\n"), fn); ferr != nil {
				return model.BillTotals{}, ferr
			}
		}
		if err != nil {
			break
		}
	}
	return s.finish()
}

func (s *scanner) fail(format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", model.ErrBadBill, s.line, fmt.Sprintf(format, args...))
}

// take handles one line, without its line end.
func (s *scanner) take(raw []byte, fn func(model.BillEntry) error) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if raw[0] == '#' {
		text, err := s.decode(raw)
		if err != nil {
			return err
		}
		return s.frame(text)
	}
	switch s.part {
	case preamble:
		return s.fail("a row before the %s marker", markerBegin)
	case header:
		text, err := s.decode(raw)
		if err != nil {
			return err
		}
		return s.readHeader(text)
	case trailer:
		return s.fail("a row after the %s marker", markerEnd)
	}
	e, err := s.row(raw)
	if err != nil {
		return err
	}
	s.counted.Add(e)
	if fn != nil {
		return fn(e)
	}
	return nil
}

// decode turns a line of GBK into text. A frame line or the header that is
// valid UTF-8 with non-ASCII text is UTF-8, not GBK: GBK Chinese is almost
// never valid UTF-8 too.
func (s *scanner) decode(raw []byte) (string, error) {
	if !hasNonASCII(raw) {
		return string(raw), nil
	}
	if bytes.HasPrefix(raw, []byte("\xef\xbb\xbf")) || utf8.Valid(raw) {
		return "", s.fail("UTF-8 text where GBK is expected")
	}
	b, err := simplifiedchinese.GBK.NewDecoder().Bytes(raw)
	if err != nil || bytes.ContainsRune(b, utf8.RuneError) {
		return "", s.fail("not GBK text")
	}
	return string(b), nil
}

// frame handles a # line.
func (s *scanner) frame(text string) error {
	marker := strings.HasPrefix(text, "#-")
	switch {
	case marker && strings.Contains(text, markerEnd):
		if s.part != rows {
			return s.fail("%s marker before the rows", markerEnd)
		}
		s.part = trailer
	case marker && strings.Contains(text, markerBegin):
		if s.part != preamble {
			return s.fail("a second %s marker", markerBegin)
		}
		s.part = header
	case s.part == header || s.part == rows:
		return s.fail("a # line inside the detail: %q", model.Clip(text))
	case s.part == trailer:
		return s.totals(text)
	}
	return nil
}

// totals reads a #…合计 line of the trailer.
func (s *scanner) totals(text string) error {
	if m := paymentTotals.FindStringSubmatch(text); m != nil {
		if s.seen.payments {
			return s.fail("a second #交易合计 line")
		}
		s.seen.payments = true
		n, sum, err := s.stat(m)
		s.stated.Payments, s.stated.PaymentReceived = n, sum
		return err
	}
	if m := refundTotals.FindStringSubmatch(text); m != nil {
		if s.seen.refunds {
			return s.fail("a second #退款合计 line")
		}
		s.seen.refunds = true
		n, sum, err := s.stat(m)
		s.stated.Refunds, s.stated.RefundReceived = n, sum
		return err
	}
	if strings.HasPrefix(text, "#交易合计") || strings.HasPrefix(text, "#退款合计") {
		return s.fail("unreadable totals %q", model.Clip(text))
	}
	return nil
}

func (s *scanner) stat(m []string) (int, decimal.Decimal, error) {
	var n int
	if _, err := fmt.Sscan(m[1], &n); err != nil {
		return 0, decimal.Decimal{}, s.fail("count %q", m[1])
	}
	d, err := decimal.NewFromString(m[2])
	if err != nil {
		return 0, decimal.Decimal{}, s.fail("sum %q", m[2])
	}
	return n, d, nil
}

// readHeader finds the columns by name.
func (s *scanner) readHeader(text string) error {
	names := splitCells(text)
	s.cols = make(map[string]int, len(names))
	for i, n := range names {
		n = normalizeName(trimCell(n))
		if _, dup := s.cols[n]; dup && n != "" {
			return s.fail("column %q twice in the header", n)
		}
		s.cols[n] = i
	}
	var missing []string
	for _, c := range required {
		if _, ok := s.cols[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return s.fail("header lacks column(s) %s", strings.Join(missing, ", "))
	}
	s.ncols = len(names)
	s.part = rows
	return nil
}

// normalizeName reads half-width parentheses, which some bills use, as the
// full-width ones of today's header.
func normalizeName(n string) string {
	return strings.NewReplacer("(", "（", ")", "）").Replace(n)
}

// row reads one data row. Commas never occur inside a GBK character (its
// trail bytes are 0x40 and above), so the raw bytes are split before
// decoding; only a row with quotes goes through a CSV reader.
func (s *scanner) row(raw []byte) (model.BillEntry, error) {
	var cells [][]byte
	if bytes.IndexByte(raw, '"') >= 0 {
		r := csv.NewReader(bytes.NewReader(raw))
		r.LazyQuotes = true
		rec, err := r.Read()
		if err != nil {
			return model.BillEntry{}, s.fail("unreadable row: %v", err)
		}
		for _, c := range rec {
			cells = append(cells, []byte(c))
		}
	} else {
		cells = bytes.Split(raw, []byte(","))
	}
	if len(cells) != s.ncols {
		return model.BillEntry{}, s.fail("%d cells, the header has %d", len(cells), s.ncols)
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
	var err error
	if e.TradeNo, err = s.ident(ColTradeNo, cell(ColTradeNo), true); err != nil {
		return e, err
	}
	if e.OutTradeNo, err = s.ident(ColOutTradeNo, cell(ColOutTradeNo), true); err != nil {
		return e, err
	}
	if e.Kind == model.BillRefund {
		if e.OutRequestNo, err = s.ident(ColOutRequestNo, cell(ColOutRequestNo), false); err != nil {
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

// ident reads an identifier cell: ASCII, like every number Alipay echoes.
func (s *scanner) ident(col string, b []byte, need bool) (string, error) {
	if len(b) == 0 {
		if need {
			return "", s.fail("%s is empty", col)
		}
		return "", nil
	}
	if hasNonASCII(b) || len(b) > 128 {
		return "", s.fail("%s is not an ASCII identifier of at most 128 bytes", col)
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

// finish checks that the file was whole and adds up.
func (s *scanner) finish() (model.BillTotals, error) {
	switch {
	case s.part == preamble:
		return model.BillTotals{}, fmt.Errorf("%w: no %s marker: not a detail, or empty", model.ErrBadBill, markerBegin)
	case s.part == header:
		return model.BillTotals{}, fmt.Errorf("%w: no header row after the %s marker", model.ErrBadBill, markerBegin)
	case s.part == rows:
		return model.BillTotals{}, fmt.Errorf("%w: no %s marker: the file is truncated", model.ErrBadBill, markerEnd)
	case !s.seen.payments || !s.seen.refunds:
		return model.BillTotals{}, fmt.Errorf("%w: no #交易合计 or #退款合计 line: the file is truncated", model.ErrBadBill)
	}
	st, c := s.stated, s.counted
	if c.Payments+c.Refunds == 0 {
		// Alipay answers NO_BILL_DATA for a day without business: a file
		// without a single row is not a day's bill.
		return model.BillTotals{}, fmt.Errorf("%w: no rows: a day without business has no bill (NO_BILL_DATA), not an empty one", model.ErrBadBill)
	}
	if st.Payments != c.Payments || !st.PaymentReceived.Equal(c.PaymentReceived) {
		return model.BillTotals{}, fmt.Errorf("%w: #交易合计 says %d payments, %s received; the rows hold %d, %s",
			model.ErrBadBill, st.Payments, st.PaymentReceived.StringFixed(2), c.Payments, c.PaymentReceived.StringFixed(2))
	}
	// Bills write the refund sum with and without its sign.
	if st.Refunds != c.Refunds || !st.RefundReceived.Abs().Equal(c.RefundReceived.Abs()) {
		return model.BillTotals{}, fmt.Errorf("%w: #退款合计 says %d refunds, %s; the rows hold %d, %s",
			model.ErrBadBill, st.Refunds, st.RefundReceived.StringFixed(2), c.Refunds, c.RefundReceived.StringFixed(2))
	}
	return c, nil
}

// splitCells splits a decoded line, honouring quotes when there are any.
func splitCells(text string) []string {
	if strings.Contains(text, `"`) {
		r := csv.NewReader(strings.NewReader(text))
		r.LazyQuotes = true
		if rec, err := r.Read(); err == nil {
			return rec
		}
	}
	return strings.Split(text, ",")
}

func trimCell(s string) string { return strings.Trim(s, " \t\r") }

func hasNonASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}
