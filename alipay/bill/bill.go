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
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
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

// MaxExpansion bounds how many times its compressed size the detail may
// expand to (plus a mebibyte, for tiny files): a real bill's GBK CSV
// deflates about 15 times even when as regular as a generated one, while
// a bomb expands a thousand times — refused after reading a thirty-second
// of what it claims, not after 4 GiB.
const MaxExpansion = 32

// MaxEntries bounds the entries a bill ZIP may hold (Alipay's has two,
// the detail and the summary), checked before the directory is read: a
// ZIP of millions of empty entries would otherwise cost ~250 bytes of
// memory each.
const MaxEntries = 16

// File is an opened, checked bill.
type File struct {
	detail *zip.File
	// Name is the detail's file name inside the ZIP.
	Name string
	// Totals are the file's own totals, which its lines add up to.
	Totals model.BillTotals
	// From and To are the date range the detail states (#起始日期,
	// 终止日期), zero if it states none.
	From, To time.Time
	// Account is the merchant's pid the detail names (#账号), "" if it
	// names none.
	Account string
}

// Open finds the detail in the bill ZIP r (size bytes) and reads it once,
// checking everything: after Open succeeds, Entries hands out lines that
// are known to be whole and consistent. Every fault is model.ErrBadBill.
func Open(r io.ReaderAt, size int64) (*File, error) {
	if err := checkDirectory(r, size); err != nil {
		return nil, err
	}
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
	var s *scanner
	if f.Totals, s, err = f.read(nil); err != nil {
		return nil, err
	}
	f.From, f.To, f.Account = s.from, s.to, s.pid
	return f, nil
}

// Of refuses a bill that is not the bill of the merchant pid (2088…): its
// detail must name that account (#账号) and its file name
// (<pid>_<yyyyMMdd>_业务明细.csv) that pid. Another merchant's bill would
// repair payments that were never ours. The fault is model.ErrBadBill.
func (f *File) Of(pid string) error {
	named, _, _ := strings.Cut(path.Base(f.Name), "_")
	switch {
	case f.Account == "":
		return fmt.Errorf("%w: the bill names no account (#账号): not a bill of %s", model.ErrBadBill, pid)
	case f.Account != pid:
		return fmt.Errorf("%w: the bill is account %s's, not ours (%s)", model.ErrBadBill, f.Account, pid)
	case named != pid:
		return fmt.Errorf("%w: the bill is %s, not a bill of %s", model.ErrBadBill, f.Name, pid)
	}
	return nil
}

// Covers refuses a bill that is not the bill of day (a Beijing day): its
// detail's name (<pid>_<yyyyMMdd>_业务明细.csv) must name the day, and the
// date range it states, if any, must be that day's 00:00 to the next 00:00.
// Another day's bill would make false differences and repair another day's
// payments. The fault is model.ErrBadBill.
func (f *File) Covers(day time.Time) error {
	d := day.In(model.Beijing)
	start := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, model.Beijing)
	want := start.Format("20060102")
	named := ""
	if parts := strings.Split(strings.TrimSuffix(path.Base(f.Name), detailSuffix), "_"); len(parts) >= 2 {
		named = parts[len(parts)-1]
	}
	if named != want {
		return fmt.Errorf("%w: the bill is %s, not the bill of %s", model.ErrBadBill, f.Name, start.Format("2006-01-02"))
	}
	if !f.From.IsZero() && (!f.From.Equal(start) || !f.To.Equal(start.AddDate(0, 0, 1))) {
		return fmt.Errorf("%w: the bill covers %s to %s, not %s", model.ErrBadBill,
			f.From.Format("2006-01-02 15:04:05"), f.To.Format("2006-01-02 15:04:05"), start.Format("2006-01-02"))
	}
	return nil
}

// Entries streams the detail's entries to fn, in file order. fn's error
// stops it and is returned as is.
func (f *File) Entries(fn func(model.BillEntry) error) error {
	_, _, err := f.each(fn)
	return err
}

func (f *File) each(fn func(model.BillEntry) error) (model.BillTotals, [2]time.Time, error) {
	t, s, err := f.read(fn)
	if err != nil {
		return t, [2]time.Time{}, err
	}
	return t, [2]time.Time{s.from, s.to}, nil
}

func (f *File) read(fn func(model.BillEntry) error) (model.BillTotals, *scanner, error) {
	rc, err := f.detail.Open()
	if err != nil {
		return model.BillTotals{}, nil, fmt.Errorf("%w: %s: %v", model.ErrBadBill, f.Name, err)
	}
	defer rc.Close()
	limit := int64(MaxDetailBytes)
	if c := f.detail.CompressedSize64; c < uint64(limit/MaxExpansion) {
		limit = min(limit, int64(c)*MaxExpansion+1<<20)
	}
	return scanAll(&capped{r: rc, left: limit, limit: limit}, fn)
}

// capped fails a read past its limit instead of ending the file early.
type capped struct {
	r           io.Reader
	left, limit int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("%w: detail expands past %d bytes (at most %d times its compressed size, and %d)",
			model.ErrBadBill, c.limit, MaxExpansion, int64(MaxDetailBytes))
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// checkDirectory refuses a ZIP whose central directory holds more than
// MaxEntries entries, before archive/zip reads it (which reads every
// header there, whatever count the end record states), and a ZIP64 one: a
// bill under MaxBillBytes never needs ZIP64.
func checkDirectory(r io.ReaderAt, size int64) error {
	const (
		endLen     = 22
		endSig     = 0x06054b50
		dirSig     = 0x02014b50
		dirLen     = 46
		locatorLen = 20
		locatorSig = 0x07064b50
	)
	tail := min(size, endLen+0xffff)
	buf := make([]byte, tail)
	if _, err := r.ReadAt(buf, size-tail); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: not a readable ZIP: %v", model.ErrBadBill, err)
	}
	end := -1
	for i := len(buf) - endLen; i >= 0; i-- {
		if binary.LittleEndian.Uint32(buf[i:]) == endSig && i+endLen+int(binary.LittleEndian.Uint16(buf[i+20:])) <= len(buf) {
			end = i
			break
		}
	}
	if end < 0 {
		return fmt.Errorf("%w: not a readable ZIP: no end of central directory", model.ErrBadBill)
	}
	rec := buf[end:]
	count, dirSize, dirOffset := int(binary.LittleEndian.Uint16(rec[10:])), int64(binary.LittleEndian.Uint32(rec[12:])), int64(binary.LittleEndian.Uint32(rec[16:]))
	if count == 0xffff || dirSize == 0xffff || dirOffset == 0xffffffff ||
		end >= locatorLen && binary.LittleEndian.Uint32(buf[end-locatorLen:]) == locatorSig {
		return fmt.Errorf("%w: a ZIP64 archive: a bill is far smaller", model.ErrBadBill)
	}
	if count > MaxEntries {
		return fmt.Errorf("%w: %d entries in the ZIP, a bill has at most %d", model.ErrBadBill, count, MaxEntries)
	}
	// Walk the headers as archive/zip will, stopping one past the limit.
	// archive/zip reads them from dirOffset, or shifted by data put before
	// the ZIP when none is there: a bill has none.
	shifted := size-tail+int64(end)-dirSize-dirOffset != 0
	off := dirOffset
	hdr := make([]byte, dirLen)
	for n := 0; ; n++ {
		if _, err := r.ReadAt(hdr, off); err != nil || binary.LittleEndian.Uint32(hdr) != dirSig {
			if n == 0 && shifted {
				return fmt.Errorf("%w: data before the ZIP: not a bill", model.ErrBadBill)
			}
			return nil // archive/zip stops here too, and says what is wrong
		}
		if n == MaxEntries {
			return fmt.Errorf("%w: more than %d entries in the ZIP's directory, a bill has at most %d", model.ErrBadBill, MaxEntries, MaxEntries)
		}
		off += dirLen + int64(binary.LittleEndian.Uint16(hdr[28:])) + int64(binary.LittleEndian.Uint16(hdr[30:])) + int64(binary.LittleEndian.Uint16(hdr[32:]))
	}
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
