// Package bill reads and writes Alipay's trade bill (交易账单): the ZIP
// that alipay.data.dataservice.bill.downloadurl.query points at, holding
// the day's detail (<pid>_<yyyyMMdd>_业务明细.csv) and a summary
// (…_业务明细(汇总).csv). The detail is GBK-encoded CSV framed by `#`
// lines: a title, the account and date range, a 业务明细列表 marker, a
// header row, padded data rows, a 业务明细列表结束 marker, and the totals
// the file states about itself (#交易合计, #退款合计).
//
// Reading is strict and streaming: columns are found by header name (bills
// add and move columns over the years), the whole file is checked against
// its own totals before Open returns, and any fault — a damaged ZIP, text
// that is not GBK, a missing column, a malformed cell, totals that disagree
// — is model.ErrBadBill with the reason. The file is never held whole: a
// big merchant's day has a million lines.
//
// Writing produces the same layout, for the fake Alipay, tests and
// benchmarks.
package bill

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"

	"paynotify/model"
)

// Column names of the detail, as today's bill spells them. Only these are
// read; others are ignored wherever they stand.
const (
	ColTradeNo      = "支付宝交易号"
	ColOutTradeNo   = "商户订单号"
	ColKind         = "业务类型"
	ColSubject      = "商品名称"
	ColCreated      = "创建时间"
	ColFinished     = "完成时间"
	ColAmount       = "订单金额（元）"
	ColReceived     = "商家实收（元）"
	ColOutRequestNo = "退款批次号/请求号"
	ColFee          = "服务费（元）"
)

// Columns is today's header of the detail, in order.
var Columns = []string{
	ColTradeNo, ColOutTradeNo, ColKind, ColSubject, ColCreated, ColFinished, "门店编号", "门店名称", "操作员", "终端号",
	"对方账户", ColAmount, ColReceived, "支付宝红包（元）", "集分宝（元）", "支付宝优惠（元）", "商家优惠（元）", "券核销金额（元）",
	"券名称", "商家红包消费金额（元）", "卡消费金额（元）", ColOutRequestNo, ColFee, "分润（元）", "备注",
}

// required are the columns a bill cannot be read without.
var required = []string{ColTradeNo, ColOutTradeNo, ColKind, ColFinished, ColAmount, ColReceived, ColOutRequestNo, ColFee}

// Words of the bill's frame.
const (
	markerBegin  = "业务明细列表"
	markerEnd    = "业务明细列表结束"
	detailSuffix = "_业务明细.csv"
	summaryMark  = "汇总"
	kindPayment  = "交易"
	kindRefund   = "退款"
)

// MaxDetailBytes bounds the decompressed detail, so a ZIP bomb fails the
// run instead of filling the disk or the memory.
const MaxDetailBytes = 4 << 30

// File is an opened, checked bill.
type File struct {
	detail *zip.File
	// Name is the detail's file name inside the ZIP.
	Name string
	// Totals are the file's own totals, which its lines add up to.
	Totals model.BillTotals
}

// Open finds the detail in the bill ZIP r (size bytes) and reads it once,
// checking everything: after Open succeeds, Entries hands out lines that
// are known to be whole and consistent. Every fault is model.ErrBadBill.
func Open(r io.ReaderAt, size int64) (*File, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("%w: not a readable ZIP: %v", model.ErrBadBill, err)
	}
	var detail *zip.File
	var name string
	for _, f := range zr.File {
		n := entryName(f)
		base := path.Base(n)
		if !strings.HasSuffix(base, detailSuffix) || strings.Contains(base, summaryMark) {
			continue
		}
		if detail != nil {
			return nil, fmt.Errorf("%w: two details in the ZIP (%q, %q)", model.ErrBadBill, name, n)
		}
		detail, name = f, n
	}
	if detail == nil {
		return nil, fmt.Errorf("%w: no *%s in the ZIP (%d entries)", model.ErrBadBill, detailSuffix, len(zr.File))
	}
	f := &File{detail: detail, Name: name}
	if f.Totals, err = f.each(nil); err != nil {
		return nil, err
	}
	return f, nil
}

// Entries streams the detail's entries to fn, in file order. fn's error
// stops it and is returned as is.
func (f *File) Entries(fn func(model.BillEntry) error) error {
	_, err := f.each(fn)
	return err
}

func (f *File) each(fn func(model.BillEntry) error) (model.BillTotals, error) {
	rc, err := f.detail.Open()
	if err != nil {
		return model.BillTotals{}, fmt.Errorf("%w: %s: %v", model.ErrBadBill, f.Name, err)
	}
	defer rc.Close()
	return Scan(&capped{r: rc, left: MaxDetailBytes}, fn)
}

// capped fails a read past its limit instead of ending the file early.
type capped struct {
	r    io.Reader
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("%w: detail larger than %d bytes", model.ErrBadBill, int64(MaxDetailBytes))
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// entryName is a ZIP entry's name as text. Alipay's ZIP names are GBK
// without the ZIP's UTF-8 flag.
func entryName(f *zip.File) string {
	if utf8.ValidString(f.Name) && strings.Contains(f.Name, "业务明细") {
		return f.Name
	}
	b, err := simplifiedchinese.GBK.NewDecoder().Bytes([]byte(f.Name))
	if err != nil || bytes.ContainsRune(b, utf8.RuneError) {
		return f.Name
	}
	return string(b)
}
