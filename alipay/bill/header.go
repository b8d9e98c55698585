package bill

import (
	"encoding/csv"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// readRange reads the preamble's date range.
func (s *scanner) readRange(text string) error {
	m := dateRange.FindStringSubmatch(text)
	if m == nil {
		return s.fail("unreadable date range %q", model.Clip(text))
	}
	from, err1 := time.ParseInLocation(rangeTime, strings.TrimSpace(m[1]), model.Beijing)
	to, err2 := time.ParseInLocation(rangeTime, strings.TrimSpace(m[2]), model.Beijing)
	if err1 != nil || err2 != nil || !to.After(from) {
		return s.fail("unreadable date range %q", model.Clip(text))
	}
	s.from, s.to = from, to
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
