package bill

import (
	"archive/zip"
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/text/encoding/simplifiedchinese"

	"paynotify/model"
)

// Header is what a written bill says about itself before its rows.
type Header struct {
	// Account is the merchant's pid (2088…), in the title lines and the
	// file names.
	Account string
	// Date is the bill's Beijing day.
	Date time.Time
	// Columns, if set, replaces today's header (Columns): older and newer
	// bills, reordered columns. Cells of unknown columns are left empty.
	Columns []string
	// UTF8 writes UTF-8 instead of GBK: a damaged file, for tests.
	UTF8 bool
}

// Line is one row to write: an entry and the cells only the bill shows.
type Line struct {
	model.BillEntry
	Subject   string
	CreatedAt time.Time
}

// Writer writes a detail in Alipay's layout: GBK, `#` frame lines, cells
// padded with tabs as Alipay pads them. Close writes the totals.
type Writer struct {
	w      *bufio.Writer
	h      Header
	cols   []string
	totals model.BillTotals
	err    error
}

// NewWriter writes the title lines, the begin marker and the header.
func NewWriter(w io.Writer, h Header) *Writer {
	bw := &Writer{w: bufio.NewWriterSize(w, 64<<10), h: h, cols: h.Columns}
	if bw.cols == nil {
		bw.cols = Columns
	}
	day := h.Date.In(model.Beijing)
	start := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, model.Beijing)
	bw.text("#支付宝业务明细查询\n")
	bw.text("#账号：[" + h.Account + "0156]\n")
	bw.text("#起始日期：[" + start.Format("2006年01月02日 15:04:05") + "]   终止日期：[" +
		start.AddDate(0, 0, 1).Format("2006年01月02日 15:04:05") + "]\n")
	bw.text("#-----------------------------------------" + markerBegin + "----------------------------------------\n")
	bw.text(strings.Join(bw.cols, ",") + "\n")
	return bw
}

// Write writes one row.
func (w *Writer) Write(l Line) error {
	cells := make([]string, len(w.cols))
	for i, c := range w.cols {
		v := w.cell(c, l)
		if strings.ContainsAny(v, ",\"") {
			// Quoted as CSV quotes, and then not padded.
			cells[i] = `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
			continue
		}
		// Alipay pads cells with a tab, some with spaces too.
		cells[i] = v + "\t"
	}
	w.totals.Add(l.BillEntry)
	w.text(strings.Join(cells, ",") + "\n")
	return w.err
}

func (w *Writer) cell(col string, l Line) string {
	money := func(d decimal.Decimal) string { return d.StringFixed(2) }
	switch normalizeName(col) {
	case ColTradeNo:
		return l.TradeNo
	case ColKind:
		if l.Kind == model.BillRefund {
			return kindRefund
		}
		return kindPayment
	case ColSubject:
		return l.Subject
	case ColOutTradeNo:
		return l.OutTradeNo + "  "
	case ColCreated:
		if l.CreatedAt.IsZero() {
			return formatTime(l.FinishedAt)
		}
		return formatTime(l.CreatedAt)
	case ColFinished:
		return formatTime(l.FinishedAt)
	case "对方账户":
		return "dev***@example.com"
	case ColAmount:
		return money(l.Amount)
	case ColReceived:
		return money(l.Received)
	case ColOutRequestNo:
		return l.OutRequestNo
	case ColFee:
		return money(l.Fee)
	case "支付宝红包（元）", "集分宝（元）", "支付宝优惠（元）", "商家优惠（元）", "券核销金额（元）",
		"商家红包消费金额（元）", "卡消费金额（元）", "分润（元）":
		return "0.00"
	}
	return " "
}

// Totals are the totals of the rows written so far.
func (w *Writer) Totals() model.BillTotals { return w.totals }

// Close writes the end marker and the totals of the rows written.
func (w *Writer) Close() error { return w.CloseStating(w.totals) }

// CloseStating writes the end marker and t as the file's totals — totals
// that disagree with the rows make a damaged file, for tests.
func (w *Writer) CloseStating(t model.BillTotals) error {
	w.text("#-----------------------------------------" + markerEnd + "------------------------------------\n")
	w.text(fmt.Sprintf("#交易合计：%d笔，商家实收共%s元，商家优惠共0.00元\n", t.Payments, t.PaymentReceived.StringFixed(2)))
	w.text(fmt.Sprintf("#退款合计：%d笔，商家实收退款共%s元，商家优惠退款共0.00元\n", t.Refunds, t.RefundReceived.StringFixed(2)))
	w.text("#导出时间：[" + w.h.Date.In(model.Beijing).AddDate(0, 0, 1).Format("2006年01月02日") + " 09:10:20]\n")
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

// text writes s in the file's encoding.
func (w *Writer) text(s string) {
	if w.err != nil {
		return
	}
	if !w.h.UTF8 {
		b, err := simplifiedchinese.GBK.NewEncoder().String(s)
		if err != nil {
			w.err = fmt.Errorf("bill: %q has no GBK encoding: %w", s, err)
			return
		}
		s = b
	}
	_, w.err = w.w.WriteString(s)
}

// FileNames are the names of the detail and the summary in a bill ZIP.
func FileNames(account string, date time.Time) (detail, summary string) {
	base := account + "_" + date.In(model.Beijing).Format("20060102")
	return base + detailSuffix, base + "_业务明细(汇总).csv"
}

// WriteZip writes a bill ZIP as Alipay serves it: the detail, written by
// rows, then the summary, with names in GBK (no UTF-8 flag).
func WriteZip(w io.Writer, h Header, rows func(*Writer) error) error {
	zw := zip.NewWriter(w)
	detailName, summaryName := FileNames(h.Account, h.Date)
	f, err := create(zw, detailName, h.Date)
	if err != nil {
		return err
	}
	dw := NewWriter(f, h)
	if err := rows(dw); err != nil {
		return err
	}
	if err := dw.Close(); err != nil {
		return err
	}
	s, err := create(zw, summaryName, h.Date)
	if err != nil {
		return err
	}
	if err := writeSummary(s, h, dw.Totals()); err != nil {
		return err
	}
	return zw.Close()
}

// create adds an entry named in GBK, dated at the bill's export time.
func create(zw *zip.Writer, name string, date time.Time) (io.Writer, error) {
	gbk, err := simplifiedchinese.GBK.NewEncoder().String(name)
	if err != nil {
		return nil, err
	}
	d := date.In(model.Beijing)
	return zw.CreateHeader(&zip.FileHeader{
		Name: gbk, NonUTF8: true, Method: zip.Deflate,
		Modified: time.Date(d.Year(), d.Month(), d.Day()+1, 9, 10, 20, 0, model.Beijing),
	})
}

// writeSummary writes the 汇总 file: per-store totals, which reading
// ignores (it checks the detail against the detail's own totals).
func writeSummary(w io.Writer, h Header, t model.BillTotals) error {
	s := &Writer{w: bufio.NewWriter(w), h: h}
	s.text("#支付宝业务汇总查询\n")
	s.text("#账号：[" + h.Account + "0156]\n")
	s.text("#-----------------------------------------业务汇总列表----------------------------------------\n")
	s.text("门店编号,门店名称,交易订单总笔数,退款订单总笔数,订单金额（元）,商家实收（元）,支付宝优惠（元）,商家优惠（元）,卡消费金额（元）,服务费（元）,分润（元）,实收净额（元）\n")
	received := t.PaymentReceived.Add(t.RefundReceived)
	s.text(fmt.Sprintf("合计,,%d,%d,%s,%s,0.00,0.00,0.00,%s,0.00,%s\n", t.Payments, t.Refunds,
		received.StringFixed(2), received.StringFixed(2), t.Fees.StringFixed(2), received.Add(t.Fees).StringFixed(2)))
	s.text("#-----------------------------------------业务汇总列表结束------------------------------------\n")
	if s.err != nil {
		return s.err
	}
	return s.w.Flush()
}

// formatTime writes t as the bill does: Beijing wall time.
func formatTime(t time.Time) string { return t.In(model.Beijing).Format("2006-01-02 15:04:05") }
