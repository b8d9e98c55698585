package bill_test

import (
	"bytes"
	"compress/gzip"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/text/encoding/simplifiedchinese"

	"paynotify/model"
	"paynotify/wechatpay/bill"
)

var update = flag.Bool("update", false, "rewrite the fixtures in testdata/")

const appID, mchID = "wxd678efh567hg6787", "1230000109"

var header = bill.Header{AppID: appID, MchID: mchID}

func d(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// at is a Beijing wall time of the fixture day (2026-11-30), in UTC.
func at(hms string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04:05", "2026-11-30 "+hms, model.Beijing)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// sample is the day every good fixture holds: two payments (one at
// 23:59:59), a refund of part of the first, and a payment whose subject
// holds a comma, which WeChat Pay writes unquoted.
var sample = []bill.Line{
	{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "4200002026113000000000000001", OutTradeNo: "SN-1",
		Amount: d("100.00"), Received: d("100.00"), Fee: d("-0.60000"), FinishedAt: at("10:00:05"), App: appID}, Subject: "商品一"},
	{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "4200002026113000000000000002", OutTradeNo: "SN-2-2",
		Amount: d("0.01"), Received: d("0.01"), Fee: d("0"), FinishedAt: at("23:59:59"), App: appID}, Subject: "测试"},
	{BillEntry: model.BillEntry{Kind: model.BillRefund, TradeNo: "4200002026113000000000000001", OutTradeNo: "SN-1",
		OutRequestNo: "AS-1-abc", Amount: d("-30.00"), Received: d("-30.00"), Fee: d("0.18000"), FinishedAt: at("12:00:00"), App: appID},
		Subject: "商品一", RefundID: "50300000002026113000000000001", OrderAmount: d("100.00")},
	{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "4200002026113000000000000003", OutTradeNo: "SN-3",
		Amount: d("88.00"), Received: d("88.00"), Fee: d("-0.52800"), FinishedAt: at("08:30:00"), App: appID}, Subject: `套餐"A",B`},
}

// oldColumns is the header of a bill of 2019, before refunds had columns
// of their own in it.
var oldColumns = []string{"交易时间", "公众账号ID", "商户号", "特约商户号", "设备号", "微信订单号", "商户订单号", "用户标识", "交易类型",
	"交易状态", "付款银行", "货币种类", "应结订单金额", "代金券金额", "商品名称", "商户数据包", "手续费", "费率", "订单金额", "费率备注"}

// fixture is a file under testdata/ and the hash_value its query answers.
type fixture struct {
	gz   []byte
	hash string
}

// fixtures are the files under testdata/, each with how it is made.
var fixtures = map[string]func() fixture{
	"today.csv.gz": func() fixture { return gzOf(header, sample) },
	// Columns moved, optional ones missing (订单金额, 申请退款金额, 退款状态
	// and more), an unknown one added, the header's names backticked as
	// some bills write them: found by name all the same.
	"reordered.csv.gz": func() fixture {
		cols := []string{"`" + bill.ColFee, "`新字段", "`" + bill.ColOutRefundNo, "`" + bill.ColState, "`" + bill.ColTradeNo,
			"`" + bill.ColTime, "`" + bill.ColOutTradeNo, "`" + bill.ColRefund, "`" + bill.ColSettlement, "`" + bill.ColSubject}
		return gzOf(bill.Header{AppID: appID, MchID: mchID, Columns: cols}, sample)
	},
	// A bill of 2019: payments only, no refund columns, today's summary.
	"old.csv.gz": func() fixture {
		var pays []bill.Line
		for _, l := range sample {
			if l.Kind == model.BillPayment {
				pays = append(pays, l)
			}
		}
		return gzOf(bill.Header{AppID: appID, MchID: mchID, Columns: oldColumns}, pays)
	},
	// A day without rows: the header and a summary of zeros.
	"empty_day.csv.gz": func() fixture { return gzOf(header, nil) },
	"missing_column.csv.gz": func() fixture {
		var cols []string
		for _, c := range bill.Columns {
			if c != bill.ColFee {
				cols = append(cols, c)
			}
		}
		return gzOf(bill.Header{AppID: appID, MchID: mchID, Columns: cols}, sample)
	},
	"summary_disagrees.csv.gz": func() fixture {
		return gzWith(billWith(header, func(w *bill.Writer) error {
			for _, l := range sample {
				w.Write(l)
			}
			s := w.Summary()
			s.Settlement = s.Settlement.Add(d("0.01"))
			return w.CloseStating(s)
		}))
	},
	"summary_fee_disagrees.csv.gz": func() fixture {
		return gzWith(billWith(header, func(w *bill.Writer) error {
			for _, l := range sample {
				w.Write(l)
			}
			s := w.Summary()
			s.Fee = s.Fee.Add(d("0.00001"))
			return w.CloseStating(s)
		}))
	},
	// A day whose summary says two rows, but whose rows are gone.
	"rows_missing.csv.gz": func() fixture {
		return gzWith(billWith(header, func(w *bill.Writer) error {
			return w.CloseStating(bill.Summary{Rows: 2, Settlement: d("100.01"), Order: d("100.01")})
		}))
	},
	// The bill cut short mid-row (a download that stopped, gzipped as it
	// was): no summary.
	"truncated_bill.csv.gz": func() fixture {
		full := billWith(header, func(w *bill.Writer) error {
			for _, l := range sample {
				w.Write(l)
			}
			return w.Close()
		})
		return gzWith(full[:bytes.Index(full, []byte("SN-2-2"))])
	},
	// The bill in GBK, as the Alipay bill is: not the UTF-8 WeChat Pay
	// writes.
	"gbk.csv.gz": func() fixture {
		return gzWith(encodeGBK(string(billWith(header, func(w *bill.Writer) error {
			for _, l := range sample {
				w.Write(l)
			}
			return w.Close()
		}))))
	},
	// The gzip itself cut in half.
	"truncated.csv.gz": func() fixture {
		f := gzOf(header, sample)
		f.gz = f.gz[:len(f.gz)/2]
		return f
	},
	"not_gzip.csv.gz": func() fixture {
		return fixture{gz: []byte("<xml><return_code>FAIL</return_code></xml>"), hash: bill.Hash(nil)}
	},
}

func gzOf(h bill.Header, lines []bill.Line) fixture {
	var b bytes.Buffer
	hash, err := bill.WriteGzip(&b, h, func(w *bill.Writer) error {
		for _, l := range lines {
			if err := w.Write(l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return fixture{gz: b.Bytes(), hash: hash}
}

// gzWith gzips text as it is; its hash is the text's, as WeChat Pay would
// have vouched for it.
func gzWith(text []byte) fixture {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(text); err != nil {
		panic(err)
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return fixture{gz: b.Bytes(), hash: bill.Hash(text)}
}

// billWith writes a bill whose rows and summary are up to body.
func billWith(h bill.Header, body func(*bill.Writer) error) []byte {
	var b bytes.Buffer
	if err := body(bill.NewWriter(&b, h)); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// TestFixtures keeps testdata/ what the generators make (go test -update
// rewrites it): the files are inputs in WeChat Pay's layout that the other
// tests read.
func TestFixtures(t *testing.T) {
	for name, make := range fixtures {
		path := filepath.Join("testdata", name)
		want := make().gz
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its generator (run go test -update)", path)
		}
	}
}

// readFixture is a file under testdata/ and the hash its query answers.
func readFixture(t *testing.T, name string) fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	make, ok := fixtures[name]
	if !ok {
		t.Fatalf("no fixture %s", name)
	}
	return fixture{gz: b, hash: make().hash}
}

// realDay is a day as a real bill writes it (the layout of WeChat Pay's
// documentation): CRLF lines, a BOM, `0 refund numbers on payment
// rows, five-decimal fees, an empty 费率备注 at the end of each row.
var realDay = strings.Join([]string{
	"\ufeff交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注",
	"`2026-11-30 15:35:18,`wx81be3101902f7cb2,`1601959334,`0,`,`4200000910202611282955148400,`S20261130153505214586,`ofyak5qR_1wYsC99CsWA6R9MJazA,`NATIVE,`SUCCESS,`OTHERS,`CNY,`9.90,`0.00,`0,`0,`0.00,`0.00,`,`,`for testing,`cipher code,`0.05940,`0.60%,`9.90,`0.00,`",
	"`2026-11-30 16:59:46,`wx81be3101902f7cb2,`1601959334,`0,`,`4200000910202611282955148400,`S20261130153505214586,`ofyak5qR_1wYsC99CsWA6R9MJazA,`NATIVE,`REFUND,`OTHERS,`CNY,`0.00,`0.00,`50300906722026113008000000001,`RF-1,`9.90,`0.00,`ORIGINAL,`SUCCESS,`for testing,`cipher code,`-0.05940,`0.60%,`9.90,`9.90,`",
	"总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额",
	"`2,`9.90,`9.90,`0.00,`0.00000,`19.80,`9.90",
	"",
}, "\r\n")

func encodeGBK(s string) []byte {
	b, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(s))
	if err != nil {
		panic(err)
	}
	return b
}
