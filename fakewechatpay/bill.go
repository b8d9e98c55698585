package fakewechatpay

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"paynotify/model"
	"paynotify/wechatpay"
)

// billFile is a bill made for one download_url.
type billFile struct {
	body []byte
}

// billHeader and billSummary are the trade bill's column lines.
const (
	billHeader  = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单总金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注"
	billSummary = "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额"
)

// Bill is the trade bill (bill_type ALL) of day as the fake would serve
// it: a SUCCESS line per trade paid that day and a REFUND line per refund
// made that day (Beijing time), every field prefixed by a backquote, then
// the totals.
func (s *Server) Bill(day time.Time) []byte {
	y, m, d := day.In(model.Beijing).Date()
	on := func(t time.Time) bool {
		ty, tm, td := t.In(model.Beijing).Date()
		return ty == y && tm == m && td == d
	}
	s.mu.Lock()
	type line struct {
		at   time.Time
		cols []string
	}
	var lines []line
	var paid, refunded, fees int64
	var count int
	for _, t := range s.byOut {
		if t.Paid.IsZero() || !on(t.Paid) {
			continue
		}
		fee := t.Total * 6 // 0.6% in units of 1/1000 fen
		lines = append(lines, line{t.Paid, []string{
			t.Paid.In(model.Beijing).Format(time.DateTime), s.cfg.AppID, s.cfg.MchID, "0", "", t.TransactionID, t.OutTradeNo,
			t.OpenID, t.TradeType, "SUCCESS", "OTHERS", "CNY", yuan(t.Total), "0.00", "0", "0", "0.00", "0.00", "", "",
			t.Description, "", feeText(fee), "0.60%", yuan(t.Total), "0.00", "",
		}})
		count++
		paid += t.Total
		fees += fee
	}
	for _, r := range s.refunds {
		if r.Status != wechatpay.RefundSuccess || !on(r.Settled) {
			continue
		}
		t := s.byOut[r.OutTradeNo]
		fee := -r.Refund * 6
		lines = append(lines, line{r.Settled, []string{
			r.Settled.In(model.Beijing).Format(time.DateTime), s.cfg.AppID, s.cfg.MchID, "0", "", r.TransactionID, r.OutTradeNo,
			t.OpenID, t.TradeType, "REFUND", "OTHERS", "CNY", "0.00", "0.00", r.RefundID, r.OutRefundNo, yuan(r.Refund), "0.00",
			"ORIGINAL", "SUCCESS", t.Description, "", feeText(fee), "0.60%", "0.00", yuan(r.Refund), "",
		}})
		count++
		refunded += r.Refund
		fees += fee
	}
	s.mu.Unlock()
	slices.SortFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	var b strings.Builder
	b.WriteString(billHeader + "\r\n")
	for _, l := range lines {
		b.WriteString(ticked(l.cols) + "\r\n")
	}
	b.WriteString(billSummary + "\r\n")
	b.WriteString(ticked([]string{fmt.Sprint(count), yuan(paid), yuan(refunded), "0.00", feeText(fees), yuan(paid), yuan(refunded)}) + "\r\n")
	return []byte(b.String())
}

// ticked joins fields, each prefixed by a backquote as WeChat Pay writes
// them (so spreadsheet programs keep long numbers as text).
func ticked(cols []string) string {
	for i, c := range cols {
		cols[i] = "`" + c
	}
	return strings.Join(cols, ",")
}

// yuan writes fen as yuan with two decimals.
func yuan(fen int64) string {
	sign := ""
	if fen < 0 {
		sign, fen = "-", -fen
	}
	return fmt.Sprintf("%s%d.%02d", sign, fen/100, fen%100)
}

// feeText writes a fee in 1/1000 fen as yuan with five decimals.
func feeText(milli int64) string {
	sign := ""
	if milli < 0 {
		sign, milli = "-", -milli
	}
	return fmt.Sprintf("%s%d.%05d", sign, milli/100000, milli%100000)
}

// tradeBill serves GET /v3/bill/tradebill?bill_date=&bill_type=.
func (s *Server) tradeBill(r *http.Request, _ []byte) (int, any) {
	day, err := time.ParseInLocation(time.DateOnly, r.URL.Query().Get("bill_date"), model.Beijing)
	if err != nil {
		return fail(http.StatusBadRequest, "PARAM_ERROR", "bill_date must be YYYY-MM-DD")
	}
	if t := r.URL.Query().Get("bill_type"); t != "" && t != "ALL" {
		return fail(http.StatusBadRequest, "PARAM_ERROR", "this fake serves bill_type ALL only")
	}
	body := s.Bill(day)
	if strings.Count(string(body), "\r\n") == 3 { // header, summary, totals: no trade
		return fail(http.StatusBadRequest, "NO_STATEMENT_EXIST", "当日无交易，账单不存在")
	}
	token := nonce(32)
	s.mu.Lock()
	s.bills[token] = billFile{body: body}
	s.mu.Unlock()
	sum := sha1.Sum(body)
	return http.StatusOK, map[string]string{
		"hash_type": "SHA1", "hash_value": hex.EncodeToString(sum[:]),
		"download_url": "https://api.mch.weixin.qq.com/v3/billdownload/file?token=" + token,
	}
}

// billDownload serves GET /v3/billdownload/file?token=: the bill, signed
// request only, unsigned answer.
func (s *Server) billDownload(w http.ResponseWriter, r *http.Request) {
	if s.merchant != nil {
		if why := s.verifyCall(r, nil); why != "" {
			s.reply(w, false)(fail(http.StatusUnauthorized, "SIGN_ERROR", why))
			return
		}
	}
	s.mu.Lock()
	f, ok := s.bills[r.URL.Query().Get("token")]
	s.mu.Unlock()
	if !ok {
		s.reply(w, false)(fail(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "no such bill"))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(f.body)
}
