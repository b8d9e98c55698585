// Package bill reads and writes WeChat Pay's trade bill (交易账单): the
// gzip file that GET /v3/bill/tradebill (bill_type ALL, tar_type GZIP)
// points at. Inside is UTF-8 CSV: a header row naming the columns, one row
// per payment or refund with every value prefixed by a backtick
// (`2026-11-30 10:00:05), then a summary header (总交易单数,…) and the
// summary row the file states about itself.
//
// Reading is strict and streaming: columns are found by header name
// (older bills have fewer), the SHA1 of the decompressed bill must equal
// the hash_value of the signed query (the download itself is not signed),
// the rows are checked against the summary before Open returns, and any
// fault — a damaged gzip, a hash mismatch, text that is not UTF-8, a
// missing column, a malformed cell, a summary that disagrees — is
// model.ErrBadBill with the reason. The file is never held whole: a big
// merchant's day has a million lines.
//
// Writing produces the same layout, for the fake WeChat Pay, tests and
// benchmarks.
package bill

import (
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"strings"

	"paynotify/model"
)

// Column names of the rows, as today's bill spells them. Only these are
// read; others are ignored wherever they stand.
const (
	ColTime         = "交易时间"
	ColAppID        = "公众账号ID"
	ColMchID        = "商户号"
	ColTradeNo      = "微信订单号"
	ColOutTradeNo   = "商户订单号"
	ColState        = "交易状态"
	ColSettlement   = "应结订单金额"
	ColRefundID     = "微信退款单号"
	ColOutRefundNo  = "商户退款单号"
	ColRefund       = "退款金额"
	ColCouponRefund = "充值券退款金额"
	ColRefundStatus = "退款状态"
	ColSubject      = "商品名称"
	ColFee          = "手续费"
	ColOrder        = "订单金额"
	ColRefundAsked  = "申请退款金额"
)

// Columns is today's header of the rows, in order.
var Columns = []string{
	ColTime, ColAppID, ColMchID, "特约商户号", "设备号", ColTradeNo, ColOutTradeNo, "用户标识", "交易类型", ColState,
	"付款银行", "货币种类", ColSettlement, "代金券金额", ColRefundID, ColOutRefundNo, ColRefund, ColCouponRefund,
	"退款类型", ColRefundStatus, ColSubject, "商户数据包", ColFee, "费率", ColOrder, ColRefundAsked, "费率备注",
}

// required are the columns a bill cannot be read without. A refund row
// needs ColOutRefundNo and ColRefund as well; the rest are optional
// (ColOrder falls back to ColSettlement, ColRefundAsked to ColRefund).
var required = []string{ColTime, ColTradeNo, ColOutTradeNo, ColState, ColSettlement, ColFee}

// Column names of the summary.
const (
	SumRows         = "总交易单数"
	SumSettlement   = "应结订单总金额"
	SumRefund       = "退款总金额"
	SumCouponRefund = "充值券退款总金额"
	SumFee          = "手续费总金额"
	SumOrder        = "订单总金额"
	SumRefundAsked  = "申请退款总金额"
)

// SummaryColumns is today's summary header, in order.
var SummaryColumns = []string{SumRows, SumSettlement, SumRefund, SumCouponRefund, SumFee, SumOrder, SumRefundAsked}

// requiredSummary are the summary columns a bill cannot be checked
// without.
var requiredSummary = []string{SumRows, SumSettlement, SumFee}

// Values of 交易状态 and 退款状态.
const (
	StatePayment  = "SUCCESS"
	StateRefund   = "REFUND"
	StateRevoked  = "REVOKED"
	RefundSuccess = "SUCCESS"
)

// HashSHA1 is the only hash_type WeChat Pay answers.
const HashSHA1 = "SHA1"

// MaxBillBytes bounds the decompressed bill, so a gzip bomb fails the run
// instead of filling the memory or the disk.
const MaxBillBytes = 4 << 30

// maxBillBytes is MaxBillBytes, lowered by tests.
var maxBillBytes int64 = MaxBillBytes

// File is an opened, checked bill.
type File struct {
	r    io.ReaderAt
	size int64
	// Totals are what the rows handed out add up to.
	Totals model.BillTotals
	// Summary is the file's own summary row, which its rows add up to.
	Summary Summary
	// MchID is the merchant (商户号) every row names; "" when the bill
	// has no such column.
	MchID string
}

// Open reads the gzip bill r (size bytes) once, checking everything: the
// SHA1 of the decompressed bill against hashValue (hashType must be SHA1),
// and the rows against the summary. After Open succeeds, Entries hands out
// rows that are known to be whole and consistent. Every fault is
// model.ErrBadBill.
func Open(r io.ReaderAt, size int64, hashType, hashValue string) (*File, error) {
	if !strings.EqualFold(hashType, HashSHA1) {
		return nil, fmt.Errorf("%w: hash_type %q: only %s is known", model.ErrBadBill, hashType, HashSHA1)
	}
	want, err := hex.DecodeString(hashValue)
	if err != nil || len(want) != sha1.Size {
		return nil, fmt.Errorf("%w: hash_value %q is not a SHA1 in hex", model.ErrBadBill, clip(hashValue))
	}
	f := &File{r: r, size: size}
	h := sha1.New()
	res, scanErr := f.scan(h, nil)
	if scanErr != nil && !isContentFault(scanErr) {
		return nil, scanErr
	}
	// A wrong hash says the file is not the one WeChat Pay vouched for:
	// that is the fault to report, whatever else its content says.
	if got := h.Sum(nil); hex.EncodeToString(got) != strings.ToLower(hashValue) {
		return nil, fmt.Errorf("%w: SHA1 of the bill is %x, the query's hash_value %s: not the file WeChat Pay vouched for",
			model.ErrBadBill, got, strings.ToLower(hashValue))
	}
	if scanErr != nil {
		return nil, scanErr.(contentFault).err
	}
	f.Totals, f.Summary, f.MchID = res.totals, res.stated, res.mchID
	return f, nil
}

// Entries streams the bill's entries to fn, in file order. fn's error
// stops it and is returned as is.
func (f *File) Entries(fn func(model.BillEntry) error) error {
	_, err := f.scan(nil, fn)
	if cf, ok := err.(contentFault); ok {
		return cf.err
	}
	return err
}

// scan decompresses the bill and scans it. With h set, it hashes the whole
// decompressed bill, reading on after a fault in its content so that the
// hash is of all of it; such a fault comes back as a contentFault.
func (f *File) scan(h hash.Hash, fn func(model.BillEntry) error) (result, error) {
	zr, err := gzip.NewReader(io.NewSectionReader(f.r, 0, f.size))
	if err != nil {
		return result{}, fmt.Errorf("%w: not a readable gzip: %v", model.ErrBadBill, err)
	}
	defer zr.Close()
	src := &reader{r: zr, left: maxBillBytes, h: h}
	res, err := scan(src, fn)
	if err == nil || h == nil || src.err != nil {
		if src.err != nil {
			return result{}, src.err
		}
		return res, err
	}
	if _, derr := io.Copy(io.Discard, src); derr != nil {
		return result{}, src.err
	}
	return result{}, contentFault{err}
}

// contentFault is a fault in the bill's text, found while the file itself
// was read whole.
type contentFault struct{ err error }

func (c contentFault) Error() string { return c.err.Error() }

func isContentFault(err error) bool {
	_, ok := err.(contentFault)
	return ok
}

// reader reads the decompressed bill: it hashes what it reads, fails past
// its limit instead of ending the file early, and keeps the first fault of
// the gzip itself apart from faults in the text.
type reader struct {
	r    io.Reader
	left int64
	h    hash.Hash
	err  error
}

func (c *reader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left <= 0 {
		c.err = fmt.Errorf("%w: bill larger than %d bytes decompressed", model.ErrBadBill, maxBillBytes)
		return 0, c.err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.h != nil {
		c.h.Write(p[:n])
	}
	if err != nil && err != io.EOF {
		c.err = fmt.Errorf("%w: not a readable gzip: %v", model.ErrBadBill, err)
		return n, c.err
	}
	return n, err
}
