package bill

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// maxLine bounds one line of the bill; real lines are a few hundred bytes.
const maxLine = 64 << 10

// Decimals of the amounts: yuan with two, and 手续费 with up to five
// (WeChat Pay writes `0.05940).
const (
	amountDecimals = 2
	feeDecimals    = 5
)

// Summary is the bill's summary row: what the file states about its rows.
// Sums are as the bill writes them: 退款总金额 positive, 手续费总金额 the
// fees charged less the fees given back.
type Summary struct {
	Rows         int             `json:"rows"`          // 总交易单数
	Settlement   decimal.Decimal `json:"settlement"`    // 应结订单总金额
	Refund       decimal.Decimal `json:"refund"`        // 退款总金额
	CouponRefund decimal.Decimal `json:"coupon_refund"` // 充值券退款总金额
	Fee          decimal.Decimal `json:"fee"`           // 手续费总金额
	Order        decimal.Decimal `json:"order"`         // 订单总金额
	RefundAsked  decimal.Decimal `json:"refund_asked"`  // 申请退款总金额
}

// sums are the summed columns, each in units of its column's last decimal.
type sums [nSums]int64

// The summed columns, and the summary column that states each sum.
const (
	sumSettlement = iota
	sumRefund
	sumCouponRefund
	sumFee
	sumOrder
	sumRefundAsked
	nSums
)

var summed = [nSums]struct {
	col, sum string
	decimals int32
}{
	sumSettlement:   {ColSettlement, SumSettlement, amountDecimals},
	sumRefund:       {ColRefund, SumRefund, amountDecimals},
	sumCouponRefund: {ColCouponRefund, SumCouponRefund, amountDecimals},
	sumFee:          {ColFee, SumFee, feeDecimals},
	sumOrder:        {ColOrder, SumOrder, amountDecimals},
	sumRefundAsked:  {ColRefundAsked, SumRefundAsked, amountDecimals},
}

// Where the scanner is in the file.
type part int

const (
	header  part = iota // the header row comes next
	rows                // rows, until the summary header
	summary             // the summary row comes next
	trailer             // nothing but blank lines may follow
)

// noCol marks a column the header lacks.
const noCol = -1

// scanner holds what scan has learnt of the file so far.
type scanner struct {
	part  part
	line  int
	ncols int
	// at are the positions of the columns read, noCol where absent.
	at struct {
		time, tradeNo, outTradeNo, state, outRefundNo, refundStatus, mchID, appID int
		sums                                                                      [nSums]int
	}
	cells   [][]byte
	sumCols []string
	rows    int
	counted sums
	stated  sums
	hasSum  [nSums]bool
	totals  totals
	summary Summary
	// mchID is the 商户号 the rows name, nil before the first that names
	// one.
	mchID []byte
}

// result is what a whole scan found.
type result struct {
	totals model.BillTotals
	stated Summary
	mchID  string
}

// Scan reads a decompressed bill (UTF-8 CSV in WeChat Pay's layout) from
// r, calling fn for each entry, and returns what its entries add up to
// once it has checked the rows against the summary. fn may be nil; its
// error stops Scan and is returned as is. A fault found late in the file
// comes after fn has seen earlier entries: act on them only once Scan has
// returned nil (Open does exactly that).
func Scan(r io.Reader, fn func(model.BillEntry) error) (model.BillTotals, error) {
	res, err := scan(r, fn)
	return res.totals, err
}

func scan(r io.Reader, fn func(model.BillEntry) error) (result, error) {
	s := &scanner{}
	br := bufio.NewReaderSize(r, maxLine)
	for {
		raw, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return result{}, s.fail("line longer than %d bytes", maxLine)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, model.ErrBadBill) {
				return result{}, err
			}
			return result{}, fmt.Errorf("%w: reading line %d: %v", model.ErrBadBill, s.line+1, err)
		}
		if len(raw) > 0 {
			s.line++
			if err != nil && s.part == rows && len(bytes.TrimSpace(raw)) > 0 {
				// Only the summary row may end the file without a line
				// end: a row without one is a file cut short.
				return result{}, s.fail("the file ends mid-row: truncated")
			}
			if ferr := s.take(bytes.TrimRight(raw, "\r\n"), fn); ferr != nil {
				return result{}, ferr
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
	if s.line == 1 {
		raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if !utf8.Valid(raw) {
		return s.fail("not UTF-8 text")
	}
	switch s.part {
	case header:
		return s.readHeader(string(raw))
	case summary:
		return s.readSummary(raw)
	case trailer:
		return s.fail("a line after the summary")
	}
	if raw[0] != '`' || bytes.HasPrefix(raw, []byte("`"+SumRows)) {
		names := splitHeader(string(raw))
		if names[0] != SumRows {
			return s.fail("a row whose values are not prefixed by a backtick: %q", clip(string(raw)))
		}
		return s.readSummaryHeader(names)
	}
	l, ok, err := s.row(raw)
	if err != nil || !ok {
		return err
	}
	s.totals.add(l)
	if fn != nil {
		return fn(l.entry(s.line))
	}
	return nil
}

// readHeader finds the columns by name.
func (s *scanner) readHeader(text string) error {
	names := splitHeader(text)
	if strings.HasPrefix(text, "`") && !slices.Contains(names, ColTime) {
		// Some bills backtick the header's names too; a line that names
		// no 交易时间 is a row.
		return s.fail("a row before the header")
	}
	cols := make(map[string]int, len(names))
	for i, n := range names {
		if _, dup := cols[n]; dup && n != "" {
			return s.fail("column %q twice in the header", n)
		}
		cols[n] = i
	}
	var missing []string
	for _, c := range required {
		if _, ok := cols[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return s.fail("header lacks column(s) %s", strings.Join(missing, ", "))
	}
	find := func(name string) int {
		if i, ok := cols[name]; ok {
			return i
		}
		return noCol
	}
	s.at.time, s.at.tradeNo, s.at.outTradeNo = find(ColTime), find(ColTradeNo), find(ColOutTradeNo)
	s.at.state, s.at.outRefundNo, s.at.refundStatus = find(ColState), find(ColOutRefundNo), find(ColRefundStatus)
	s.at.mchID, s.at.appID = find(ColMchID), find(ColAppID)
	for i, c := range summed {
		s.at.sums[i] = find(c.col)
	}
	s.ncols = len(names)
	s.cells = make([][]byte, 0, len(names))
	s.part = rows
	return nil
}

// readSummaryHeader reads the names of the summary's columns.
func (s *scanner) readSummaryHeader(names []string) error {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] && n != "" {
			return s.fail("column %q twice in the summary header", n)
		}
		seen[n] = true
	}
	var missing []string
	for _, c := range requiredSummary {
		if !seen[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return s.fail("summary header lacks column(s) %s", strings.Join(missing, ", "))
	}
	s.sumCols = names
	s.part = summary
	return nil
}

// readSummary reads the summary row.
func (s *scanner) readSummary(raw []byte) error {
	if raw[0] != '`' {
		return s.fail("the summary row's values are not prefixed by a backtick")
	}
	cells := splitRow(raw, s.cells[:0])
	if len(cells) != len(s.sumCols) {
		return s.fail("%d values in the summary row, its header has %d", len(cells), len(s.sumCols))
	}
	for i, name := range s.sumCols {
		v := trim(cells[i])
		if name == SumRows {
			n, ok := parseFixed(v, 0)
			if !ok || n < 0 || n > math.MaxInt32 {
				return s.fail("%s %q is not a count", SumRows, clip(string(v)))
			}
			s.summary.Rows = int(n)
			continue
		}
		for k, c := range summed {
			if c.sum != name {
				continue
			}
			n, ok := parseFixed(v, c.decimals)
			if !ok {
				return s.fail("%s %q is not an amount", name, clip(string(v)))
			}
			s.stated[k], s.hasSum[k] = n, true
		}
	}
	s.summary.Settlement = decimal.New(s.stated[sumSettlement], -amountDecimals)
	s.summary.Refund = decimal.New(s.stated[sumRefund], -amountDecimals)
	s.summary.CouponRefund = decimal.New(s.stated[sumCouponRefund], -amountDecimals)
	s.summary.Fee = decimal.New(s.stated[sumFee], -feeDecimals)
	s.summary.Order = decimal.New(s.stated[sumOrder], -amountDecimals)
	s.summary.RefundAsked = decimal.New(s.stated[sumRefundAsked], -amountDecimals)
	s.part = trailer
	return nil
}

// line is a row as read: its cells, amounts as integers. An entry is made
// of it only when someone asks for entries.
type line struct {
	kind                                  model.BillKind
	tradeNo, outTradeNo, outRefundNo, app []byte
	at                                    time.Time
	// amount and received are in fen, fee in units of 0.00001 yuan, each
	// signed as model.BillEntry signs it.
	amount, received, fee int64
}

func (l line) entry(n int) model.BillEntry {
	e := model.BillEntry{Line: n, Kind: l.kind, TradeNo: string(l.tradeNo), OutTradeNo: string(l.outTradeNo),
		Amount: decimal.New(l.amount, -amountDecimals), Received: decimal.New(l.received, -amountDecimals),
		Fee: decimal.New(l.fee, -feeDecimals), FinishedAt: l.at, App: string(l.app)}
	if l.kind == model.BillRefund {
		e.OutRequestNo = string(l.outRefundNo)
	}
	return e
}

// row reads one row. It reports false for a row that is counted against
// the summary but is no entry: a revoked payment, a refund not (yet)
// successful.
func (s *scanner) row(raw []byte) (line, bool, error) {
	s.cells = splitRow(raw, s.cells[:0])
	cells := s.cells
	if len(cells) != s.ncols {
		return line{}, false, s.fail("%d cells, the header has %d", len(cells), s.ncols)
	}
	s.rows++
	if s.at.mchID != noCol {
		// One bill is one merchant's: a row of another is no row of ours.
		m := trim(cells[s.at.mchID])
		switch {
		case len(m) == 0:
			// Unstated (test fixtures): no merchant but ours is named.
		case s.mchID == nil:
			s.mchID = append([]byte(nil), m...)
		case !bytes.Equal(m, s.mchID):
			return line{}, false, s.fail("%s %q, the rows before it %q: one bill is one merchant's", ColMchID, clip(string(m)), s.mchID)
		}
	}
	var v [nSums]int64
	for k, c := range summed {
		i := s.at.sums[k]
		if i == noCol {
			continue
		}
		b := trim(cells[i])
		if len(b) == 0 {
			continue
		}
		n, ok := parseFixed(b, c.decimals)
		if !ok {
			return line{}, false, s.fail("%s %q is not an amount", c.col, clip(string(b)))
		}
		if (n > 0 && s.counted[k] > math.MaxInt64-n) || (n < 0 && s.counted[k] < math.MinInt64-n) {
			return line{}, false, s.fail("%s adds up past what a day can hold", c.col)
		}
		v[k] = n
		s.counted[k] += n
	}

	var l line
	switch state := trim(cells[s.at.state]); string(state) {
	case StatePayment:
		l.kind = model.BillPayment
	case StateRefund:
		l.kind = model.BillRefund
	case StateRevoked:
		// A payment taken back before it settled (付款码 撤销): in the
		// summary, not in the ledger's business.
		return l, false, nil
	default:
		return l, false, s.fail("%s %q is neither %s nor %s", ColState, clip(string(state)), StatePayment, StateRefund)
	}
	var err error
	if l.tradeNo, err = s.ident(ColTradeNo, trim(cells[s.at.tradeNo])); err != nil {
		return l, false, err
	}
	if l.outTradeNo, err = s.ident(ColOutTradeNo, trim(cells[s.at.outTradeNo])); err != nil {
		return l, false, err
	}
	if s.at.appID != noCol {
		// The app that took the payment (one mchid binds several); a row
		// may leave it empty.
		if app := trim(cells[s.at.appID]); len(app) > 0 && !(len(app) == 1 && app[0] == '0') {
			if l.app, err = s.ident(ColAppID, app); err != nil {
				return l, false, err
			}
		}
	}
	at := trim(cells[s.at.time])
	var ok bool
	if l.at, ok = parseTime(at); !ok {
		return l, false, s.fail("%s %q is not yyyy-MM-dd HH:mm:ss", ColTime, clip(string(at)))
	}
	// The bill writes the fee charged positive and the fee given back with
	// a refund negative; an entry's Fee is the other way round.
	l.fee = -v[sumFee]

	if l.kind == model.BillPayment {
		l.amount, l.received = v[sumSettlement], v[sumSettlement]
		if s.at.sums[sumOrder] != noCol {
			l.amount = v[sumOrder]
		}
		if l.amount <= 0 || l.received < 0 {
			return l, false, s.fail("a payment of %s, settled %s: a payment's amounts are positive", yuan(l.amount), yuan(l.received))
		}
		return l, true, nil
	}

	if s.at.outRefundNo == noCol || s.at.sums[sumRefund] == noCol {
		return l, false, s.fail("a %s row, but the header lacks %s or %s", StateRefund, ColOutRefundNo, ColRefund)
	}
	if l.outRefundNo, err = s.ident(ColOutRefundNo, trim(cells[s.at.outRefundNo])); err != nil {
		return l, false, err
	}
	amount := v[sumRefund]
	if s.at.sums[sumRefundAsked] != noCol {
		amount = v[sumRefundAsked]
	}
	if amount <= 0 || v[sumRefund] < 0 {
		return l, false, s.fail("a refund of %s, settled %s: a refund's amounts are positive in the bill", yuan(amount), yuan(v[sumRefund]))
	}
	l.amount, l.received = -amount, -v[sumRefund]
	if s.at.refundStatus != noCol {
		if st := trim(cells[s.at.refundStatus]); len(st) > 0 && string(st) != RefundSuccess {
			// A refund still PROCESSING (or failed) has moved no money.
			return l, false, nil
		}
	}
	return l, true, nil
}

// ident reads an identifier cell: ASCII, like every number WeChat Pay
// echoes. "0" is how the bill writes a refund number on a payment row, so
// it names nothing.
func (s *scanner) ident(col string, b []byte) ([]byte, error) {
	if len(b) == 0 || (len(b) == 1 && b[0] == '0') {
		return nil, s.fail("%s is empty", col)
	}
	if hasNonASCII(b) || len(b) > 128 {
		return nil, s.fail("%s is not an ASCII identifier of at most 128 bytes", col)
	}
	return b, nil
}

// parseTime reads yyyy-MM-dd HH:mm:ss in Beijing time, as UTC, without
// time.Parse's generality on the hot path.
func parseTime(b []byte) (time.Time, bool) {
	if len(b) != 19 || b[4] != '-' || b[7] != '-' || b[10] != ' ' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range b[i : i+n] {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	y, mo, d, h, mi, sec := num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2)
	if y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, 0, model.Beijing)
	if t.Day() != d {
		// 2026-02-30: time.Date would make it March the 2nd.
		return time.Time{}, false
	}
	return t.UTC(), true
}

// totals are what the rows handed out add up to, as integers.
type totals struct {
	payments, refunds         int
	paymentReceived, refunded int64 // fen
	fees                      int64 // 0.00001 yuan
}

func (t *totals) add(l line) {
	if l.kind == model.BillRefund {
		t.refunds++
		t.refunded += l.received
	} else {
		t.payments++
		t.paymentReceived += l.received
	}
	t.fees += l.fee
}

func (t totals) bill() model.BillTotals {
	return model.BillTotals{Payments: t.payments, PaymentReceived: decimal.New(t.paymentReceived, -amountDecimals),
		Refunds: t.refunds, RefundReceived: decimal.New(t.refunded, -amountDecimals), Fees: decimal.New(t.fees, -feeDecimals)}
}

// finish checks that the file was whole and that its rows add up to its
// summary.
func (s *scanner) finish() (result, error) {
	switch s.part {
	case header:
		return result{}, fmt.Errorf("%w: no header row: not a bill, or empty", model.ErrBadBill)
	case rows:
		return result{}, fmt.Errorf("%w: no summary (%s,…): the file is truncated", model.ErrBadBill, SumRows)
	case summary:
		return result{}, fmt.Errorf("%w: a summary header without its row: the file is truncated", model.ErrBadBill)
	}
	if s.summary.Rows != s.rows {
		return result{}, fmt.Errorf("%w: the summary says %s %d; the file holds %d rows", model.ErrBadBill, SumRows, s.summary.Rows, s.rows)
	}
	for k, c := range summed {
		if !s.hasSum[k] || s.at.sums[k] == noCol {
			// An older bill's summary states sums of columns its rows
			// do not have.
			continue
		}
		if s.stated[k] != s.counted[k] {
			return result{}, fmt.Errorf("%w: the summary says %s %s; the rows' %s add up to %s", model.ErrBadBill,
				c.sum, decimal.New(s.stated[k], -c.decimals).StringFixed(c.decimals),
				c.col, decimal.New(s.counted[k], -c.decimals).StringFixed(c.decimals))
		}
	}
	return result{totals: s.totals.bill(), stated: s.summary, mchID: string(s.mchID)}, nil
}

// splitHeader splits a header line into its names: a BOM, backticks and
// blanks around them are not part of a name.
func splitHeader(text string) []string {
	names := strings.Split(text, ",")
	for i, n := range names {
		names[i] = strings.TrimPrefix(strings.Trim(n, " \t\ufeff"), "`")
	}
	return names
}

// splitRow splits a row into its values. Every value begins with a
// backtick, so values are split at ",`" — a comma inside a value (商品名称
// may hold one) stays in it.
func splitRow(raw []byte, cells [][]byte) [][]byte {
	rest := raw[1:]
	for {
		i := bytes.Index(rest, []byte(",`"))
		if i < 0 {
			return append(cells, rest)
		}
		cells = append(cells, rest[:i])
		rest = rest[i+2:]
	}
}

// trim cuts the blanks around a value (bytes.Trim, without building its
// cutset on every one of a million rows).
func trim(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// parseFixed reads -?[0-9]{1,13}(\.[0-9]{1,decimals})? as an integer of
// units of its last decimal place, without a regexp or a decimal on the
// hot path of a million rows.
func parseFixed(b []byte, decimals int32) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	var n int64
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		n = n*10 + int64(b[i]-'0')
		i++
	}
	if i == 0 || i > 13 {
		return 0, false
	}
	frac := 0
	if i < len(b) {
		if b[i] != '.' || len(b)-i-1 < 1 || len(b)-i-1 > int(decimals) {
			return 0, false
		}
		for _, c := range b[i+1:] {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int64(c-'0')
			frac++
		}
	}
	for ; frac < int(decimals); frac++ {
		n *= 10
	}
	if neg {
		n = -n
	}
	return n, true
}

// yuan writes an amount of fen.
func yuan(fen int64) string { return decimal.New(fen, -amountDecimals).StringFixed(amountDecimals) }

func hasNonASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// clip keeps messages short whatever a file holds.
func clip(s string) string {
	if len(s) > 80 {
		for i := 80; i > 0; i-- {
			if utf8.RuneStart(s[i]) {
				return s[:i] + "…"
			}
		}
	}
	return s
}
