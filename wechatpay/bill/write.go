package bill

import (
	"bufio"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"io"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// Header is what a written bill says of the merchant, and its layout.
type Header struct {
	// AppID and MchID are the merchant's, in every row.
	AppID, MchID string
	// Columns, if set, replaces today's header (Columns): older bills,
	// reordered columns. Cells of unknown columns are left empty.
	Columns []string
	// SummaryColumns, if set, replaces today's summary header.
	SummaryColumns []string
}

// Line is one row to write: an entry and the cells only the bill shows.
type Line struct {
	model.BillEntry
	Subject string
	// RefundID is WeChat Pay's refund number (微信退款单号) of a refund.
	RefundID string
	// OrderAmount is a refund row's 订单金额: the amount of the trade it
	// refunds, as WeChat Pay repeats it there. Zero writes 0.00.
	OrderAmount decimal.Decimal
	// State, if set, replaces the 交易状态 the entry's kind gives
	// (REVOKED, or a state no bill has, for tests).
	State string
	// RefundStatus, if set, replaces a refund's 退款状态 (SUCCESS).
	RefundStatus string
}

// Writer writes a bill in WeChat Pay's layout: UTF-8, CRLF, every value
// prefixed by a backtick. Close writes the summary.
type Writer struct {
	w       *bufio.Writer
	h       Header
	cols    []string
	cells   []string
	summary Summary
	err     error
}

// NewWriter writes the header row.
func NewWriter(w io.Writer, h Header) *Writer {
	bw := &Writer{w: bufio.NewWriterSize(w, 64<<10), h: h, cols: h.Columns}
	if bw.cols == nil {
		bw.cols = Columns
	}
	bw.cells = make([]string, len(bw.cols))
	bw.text(strings.Join(bw.cols, ",") + "\r\n")
	return bw
}

// Write writes one row.
func (w *Writer) Write(l Line) error {
	v := l.values()
	for i, c := range w.cols {
		w.cells[i] = "`" + w.cell(strings.TrimPrefix(c, "`"), l, v)
	}
	w.add(v)
	w.text(strings.Join(w.cells, ",") + "\r\n")
	return w.err
}

// values are a line's cells as the bill writes them: yuan, positive, with
// the fee charged positive.
type values struct {
	settlement, refund, order, refundAsked, fee decimal.Decimal
}

func (l Line) values() values {
	v := values{settlement: decimal.Zero, refund: decimal.Zero, order: l.OrderAmount, refundAsked: decimal.Zero, fee: l.Fee.Neg()}
	if l.Kind == model.BillRefund {
		v.refund, v.refundAsked = l.Received.Neg(), l.Amount.Neg()
		return v
	}
	v.settlement, v.order = l.Received, l.Amount
	return v
}

func (w *Writer) add(v values) {
	s := &w.summary
	s.Rows++
	s.Settlement = s.Settlement.Add(v.settlement)
	s.Refund = s.Refund.Add(v.refund)
	s.Fee = s.Fee.Add(v.fee)
	s.Order = s.Order.Add(v.order)
	s.RefundAsked = s.RefundAsked.Add(v.refundAsked)
}

func (w *Writer) cell(col string, l Line, v values) string {
	money := func(d decimal.Decimal) string { return d.StringFixed(amountDecimals) }
	refund := l.Kind == model.BillRefund
	switch col {
	case ColTime:
		return l.FinishedAt.In(model.Beijing).Format("2006-01-02 15:04:05")
	case ColAppID:
		if l.App != "" {
			return l.App
		}
		return w.h.AppID
	case ColMchID:
		return w.h.MchID
	case "特约商户号":
		return "0"
	case ColTradeNo:
		return l.TradeNo
	case ColOutTradeNo:
		return l.OutTradeNo
	case "用户标识":
		return "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"
	case "交易类型":
		return "JSAPI"
	case ColState:
		switch {
		case l.State != "":
			return l.State
		case refund:
			return StateRefund
		}
		return StatePayment
	case "付款银行":
		return "OTHERS"
	case "货币种类":
		return "CNY"
	case ColSettlement:
		return money(v.settlement)
	case "代金券金额", ColCouponRefund:
		return "0.00"
	case ColRefundID:
		if refund {
			return l.RefundID
		}
		return "0"
	case ColOutRefundNo:
		if refund {
			return l.OutRequestNo
		}
		return "0"
	case ColRefund:
		return money(v.refund)
	case "退款类型":
		if refund {
			return "ORIGINAL"
		}
	case ColRefundStatus:
		switch {
		case refund && l.RefundStatus != "":
			return l.RefundStatus
		case refund:
			return RefundSuccess
		}
	case ColSubject:
		return l.Subject
	case ColFee:
		return v.fee.StringFixed(feeDecimals)
	case "费率":
		return "0.60%"
	case ColOrder:
		return money(v.order)
	case ColRefundAsked:
		return money(v.refundAsked)
	}
	return ""
}

// Summary is the summary of the rows written so far.
func (w *Writer) Summary() Summary { return w.summary }

// Close writes the summary of the rows written.
func (w *Writer) Close() error { return w.CloseStating(w.summary) }

// CloseStating writes s as the file's summary — one that disagrees with
// the rows makes a damaged file, for tests.
func (w *Writer) CloseStating(s Summary) error {
	cols := w.h.SummaryColumns
	if cols == nil {
		cols = SummaryColumns
	}
	w.text(strings.Join(cols, ",") + "\r\n")
	cells := make([]string, len(cols))
	for i, c := range cols {
		var v string
		switch c {
		case SumRows:
			v = strconv.Itoa(s.Rows)
		case SumSettlement:
			v = s.Settlement.StringFixed(amountDecimals)
		case SumRefund:
			v = s.Refund.StringFixed(amountDecimals)
		case SumCouponRefund:
			v = s.CouponRefund.StringFixed(amountDecimals)
		case SumFee:
			v = s.Fee.StringFixed(feeDecimals)
		case SumOrder:
			v = s.Order.StringFixed(amountDecimals)
		case SumRefundAsked:
			v = s.RefundAsked.StringFixed(amountDecimals)
		}
		cells[i] = "`" + v
	}
	w.text(strings.Join(cells, ",") + "\r\n")
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

func (w *Writer) text(s string) {
	if w.err != nil {
		return
	}
	_, w.err = w.w.WriteString(s)
}

// WriteGzip writes a bill as WeChat Pay serves it with tar_type GZIP: the
// rows written by rows, then the summary, gzipped. It returns the SHA1 of
// the decompressed bill in hex, the query's hash_value.
func WriteGzip(w io.Writer, h Header, rows func(*Writer) error) (string, error) {
	zw := gzip.NewWriter(w)
	sum := sha1.New()
	bw := NewWriter(io.MultiWriter(zw, sum), h)
	if err := rows(bw); err != nil {
		return "", err
	}
	if err := bw.Close(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// Hash is the hash_value of a decompressed bill: its SHA1 in hex.
func Hash(bill []byte) string {
	s := sha1.Sum(bill)
	return hex.EncodeToString(s[:])
}
