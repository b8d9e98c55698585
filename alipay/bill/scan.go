package bill

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

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

// dateRange is the preamble's "#起始日期：[2026年11月30日 00:00:00]
// 终止日期：[2026年12月01日 00:00:00]".
var dateRange = regexp.MustCompile(`^#起始日期[:：]\s*\[([^\]]+)\]\s*终止日期[:：]\s*\[([^\]]+)\]`)

// account is the preamble's "#账号：[20880000000000010156]": the
// merchant's pid (2088 and 12 digits) and Alipay's suffix of the account.
var account = regexp.MustCompile(`^#账号[:：]\s*\[(2088\d{12})\d*\]`)

// rangeTime is the layout of the range's times.
const rangeTime = "2006年01月02日 15:04:05"

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
	// from and to are the preamble's date range, zero if it has none.
	from, to time.Time
	// pid is the account the preamble names, "" if it names none.
	pid string
}

// Scan reads a detail (GBK CSV in Alipay's layout) from r, calling fn for
// each entry, and returns the totals the file states once it has checked
// that its entries add up to them. fn may be nil; its error stops Scan and
// is returned as is. A fault found late in the file comes after fn has seen
// earlier entries: act on them only once Scan has returned nil (Open does
// exactly that).
func Scan(r io.Reader, fn func(model.BillEntry) error) (model.BillTotals, error) {
	t, _, err := scan(r, fn)
	return t, err
}

// scan is Scan, which also says the date range the preamble states (zero
// times if none).
func scan(r io.Reader, fn func(model.BillEntry) error) (model.BillTotals, [2]time.Time, error) {
	t, s, err := scanAll(r, fn)
	return t, [2]time.Time{s.from, s.to}, err
}

// scanAll is Scan, which also hands back what the scanner learnt of the
// file's frame.
func scanAll(r io.Reader, fn func(model.BillEntry) error) (model.BillTotals, *scanner, error) {
	s := &scanner{}
	t, err := s.run(r, fn)
	return t, s, err
}

func (s *scanner) run(r io.Reader, fn func(model.BillEntry) error) (model.BillTotals, error) {
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
	case s.part == preamble && strings.HasPrefix(text, "#起始日期"):
		return s.readRange(text)
	case s.part == preamble && strings.HasPrefix(text, "#账号"):
		m := account.FindStringSubmatch(text)
		if m == nil || s.pid != "" {
			return s.fail("unreadable or second account line %q", model.Clip(text))
		}
		s.pid = m[1]
	}
	return nil
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
